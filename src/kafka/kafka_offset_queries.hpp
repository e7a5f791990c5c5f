// Internal to src/kafka: reading a topic's offsets from the brokers through a client.
#pragma once

#include "bufferqueue/kafka/detail/kafka_offsets.hpp"

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace bufferqueue::detail {

/// Reads every partition's earliest and end offsets of `topic` (ListOffsets) and each of `groups`'
/// committed offsets (OffsetFetch, through the admin API's ListConsumerGroupOffsets, so any client
/// type works) within `timeout` in all. Blocks the calling thread. Throws `bufferqueue::error`
/// naming topic (and group) and `servers`: `errc::timed_out` when the brokers do not answer in
/// time, `errc::io_error` (or what `kafka_error_code` maps) for an error they report.
kafka_topic_offsets query_topic_offsets(rd_kafka_t* client, const std::string& topic, std::size_t partitions,
                                        const std::vector<std::string>& groups, std::chrono::milliseconds timeout,
                                        const std::string& servers);

}  // namespace bufferqueue::detail
