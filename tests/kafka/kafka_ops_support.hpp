// Test helpers of the Kafka statistics, remove_group and push tests: a group's committed offsets
// read with a plain librdkafka client (no group join), and the options of their topics.
#pragma once

#include "bufferqueue/kafka.hpp"

#include "catch.hpp"
#include "kafka_test_support.hpp"

#include <librdkafka/rdkafka.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace bufferqueue::test {

/// `group`'s committed offset of each of the topic's `partitions` as the brokers hold it (-1: none),
/// read with OffsetFetch from a client that never joins the group.
inline std::vector<std::int64_t> committed_offsets(const std::string& bootstrap_servers, const std::string& topic,
                                                   std::size_t partitions, const std::string& group)
{
    std::array<char, 512> reason{};
    rd_kafka_conf_t* configuration = rd_kafka_conf_new();
    rd_kafka_conf_set(configuration, "bootstrap.servers", bootstrap_servers.c_str(), reason.data(), reason.size());
    rd_kafka_conf_set(configuration, "log_level", "0", reason.data(), reason.size());
    rd_kafka_conf_set(configuration, "group.id", group.c_str(), reason.data(), reason.size());
    rd_kafka_t* client = rd_kafka_new(RD_KAFKA_CONSUMER, configuration, reason.data(), reason.size());
    REQUIRE(client != nullptr);
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(static_cast<int>(partitions));
    for (std::size_t partition = 0; partition < partitions; ++partition) {
        rd_kafka_topic_partition_list_add(list, topic.c_str(), static_cast<std::int32_t>(partition));
    }
    const rd_kafka_resp_err_t result = rd_kafka_committed(client, list, 5000);
    std::vector<std::int64_t> offsets;
    for (int each = 0; each < list->cnt; ++each) {
        offsets.push_back(list->elems[each].offset >= 0 ? list->elems[each].offset : -1);
    }
    rd_kafka_topic_partition_list_destroy(list);
    rd_kafka_destroy(client);
    REQUIRE(result == RD_KAFKA_RESP_ERR_NO_ERROR);
    return offsets;
}

/// Options of an int topic on `servers` whose group protocol is as quick as the mock allows.
template <class T = int>
kafka_topic_options<T> quick_topic(const std::string& topic, std::size_t partitions, const std::string& servers)
{
    return kafka_topic_options<T>{.name = topic,
                                  .partitions = partitions,
                                  .bootstrap_servers = servers,
                                  .properties = group_properties(),
                                  .admin_timeout = mock_admin_timeout};
}

}  // namespace bufferqueue::test
