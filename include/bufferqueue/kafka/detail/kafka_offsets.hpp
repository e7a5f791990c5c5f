// Internal: a Kafka topic's offsets as the brokers report them (statistics), and moving a group's
// committed offsets back to the earliest records (remove_group). The librdkafka calls are in
// src/kafka/kafka_offsets.cpp (see docs/kafka.md, "Statistics" and "remove_group").
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace bufferqueue::detail {

/// What the brokers reported for one topic: each partition's earliest offset and end offset (the
/// offset the next record will get; ListOffsets), and for each group asked about its committed
/// offset per partition (OffsetFetch), -1 where the group committed nothing.
struct kafka_topic_offsets {
    std::vector<std::int64_t> earliest;
    std::vector<std::int64_t> end;
    std::map<std::string, std::vector<std::int64_t>> committed;
};

/// What `reset_kafka_group_offsets` needs.
struct kafka_group_reset_settings {
    std::string topic;
    std::size_t partitions = 1;
    std::string group;
    std::string bootstrap_servers;
    /// The topic's librdkafka properties; `group.id` and `enable.auto.commit=false` are set after them.
    std::map<std::string, std::string> properties;
    /// Bounds the whole call: the offset queries, the group join and the commit.
    std::chrono::milliseconds timeout{10000};
};

/// Moves `settings.group`'s committed offsets of every partition of the topic back to the
/// partition's earliest record, so a group created again under that name starts from the first
/// stored record (what `remove_group` means on every backend). Returns false, without joining the
/// group, when the group has committed nothing past the earliest records (nothing to remove).
/// Otherwise joins the Kafka group as a member (the only way the commit is accepted by every
/// broker, the 2.0.2 mock included: DeleteGroups / OffsetDelete crash librdkafka 2.0.2 on brokers
/// that lack them), waits until it owns every partition, commits the earliest offsets and leaves.
/// Blocks the calling thread for up to `settings.timeout` (a group join: about 3 s on the mock).
/// Throws `bufferqueue::error` naming topic, group and servers: `errc::group_in_use` when other
/// members (another process, another client) hold partitions of the topic in the group,
/// `errc::io_error` / `errc::timed_out` when the brokers do not answer in time, `errc::invalid_argument`
/// for a property librdkafka refuses. Thread-safe (its own client).
bool reset_kafka_group_offsets(const kafka_group_reset_settings& settings);

}  // namespace bufferqueue::detail
