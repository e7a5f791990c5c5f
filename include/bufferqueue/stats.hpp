// bufferqueue: the statistics of a topic - depth, lag and counters, in items, for every backend.
// `buffer_queue::stats<T>(topic)` and `buffer_queue::stats()` return them (see docs/statistics.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace bufferqueue {

/// One partition of a topic, in items.
struct partition_stats {
    /// The partition's index in the topic.
    std::size_t partition = 0;
    /// Items ever appended to the partition; for persistent topics also before a restart.
    std::uint64_t end = 0;
    /// The index of the first item the partition still holds (after recycling or retention);
    /// `end - earliest` is the depth.
    std::uint64_t earliest = 0;
    /// Background storage work that failed since the partition opened in this process, each retried
    /// later: for mmap topics, retention runs that failed part way or left a released segment file
    /// undeleted (the disk then holds more than `end - earliest`). 0 for backends with no such work.
    /// Monotonic; no data is lost by such a failure.
    std::uint64_t maintenance_failures = 0;
};

/// One consumer group's position in one partition, in items.
struct group_partition_stats {
    /// The partition's index in the topic.
    std::size_t partition = 0;
    /// The group's committed position: the index of the next item it will be delivered.
    std::uint64_t committed = 0;
    /// Items appended and not yet committed by the group: `end - committed`.
    std::uint64_t lag = 0;
};

/// One consumer group of a topic: created in this process, or (persistent topics) known from disk.
struct group_stats {
    /// The group's name.
    std::string name{};
    /// Items not yet committed by the group, over all partitions (the sum of `partitions[i].lag`).
    std::uint64_t lag = 0;
    /// Every partition of the topic, ascending.
    std::vector<group_partition_stats> partitions{};
    /// How long the oldest item the group has not committed has been in the topic, where the backend
    /// knows it. No backend records append times yet (memory and mmap would pay a clock read per
    /// append): always empty for now.
    std::optional<std::chrono::nanoseconds> oldest_uncommitted_age{};
    /// The group's push consumers in this process (0 without any), since their registration:
    /// handler calls that failed (threw, or a per-batch factory did), and batches given up after
    /// `max_attempts`. Counted as the push loops go, read without a lock.
    std::uint64_t push_failed_deliveries = 0;
    /// Batches given up after `max_attempts` failed deliveries (with a dead-letter topic: committed
    /// once their dead letters are acknowledged; without: left uncommitted, and that push loop ends).
    std::uint64_t push_given_up_batches = 0;
    /// Dead letters a dead-letter topic acknowledged for the group's consumers in this process
    /// (push and pull; 0 without a dead-letter topic): one per item of a given-up push batch and
    /// one per record that did not decode. Read without a lock.
    std::uint64_t dead_letters = 0;
};

/// A snapshot of one topic (`buffer_queue::stats`). Each number is read without a lock on the
/// produce path, one after the other, so a snapshot taken while items flow is not one instant: a
/// group's `committed` may be read after `end` moved on (its lag is then never negative: it counts
/// from the `end` read for the same partition).
struct topic_stats {
    /// The topic's name.
    std::string topic{};
    /// The item type's readable name (a topic name may be registered once per item type).
    std::string item_type{};
    /// The storage backend: "memory", "mmap", or what the backend's `storage_traits::backend_name`
    /// says ("unnamed" when it names itself nowhere).
    std::string backend{};
    /// Every partition, ascending.
    std::vector<partition_stats> partitions{};
    /// Every group, by name.
    std::vector<group_stats> groups{};
    /// Items ever appended, over all partitions (the sum of `partitions[i].end`; for persistent
    /// topics it includes earlier runs). Monotonic.
    std::uint64_t produced = 0;
    /// Items committed by consumer groups since this process opened them, summed over groups (an
    /// item two groups commit counts twice; auto commit commits a batch when it is delivered). A
    /// removed group's count stays in it. Monotonic; starts at 0 in every process.
    std::uint64_t consumed = 0;
    /// Produces waiting for room in a bounded topic (`full_mode::wait`) now.
    std::size_t waiting_producers = 0;
    /// `consume()` operations waiting for data now, over all partitions.
    std::size_t waiting_consumers = 0;
};

}  // namespace bufferqueue
