// Test helpers for Kafka topics: a plain librdkafka reader that checks what reached the brokers,
// and running an io_context until a condition holds.
#pragma once

#include "bufferqueue/storage/kafka/kafka_mock_cluster.hpp"

#include "catch.hpp"

#include <boost/asio/io_context.hpp>

#include <librdkafka/rdkafka.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace bufferqueue::test {

/// A 3-broker mock cluster shared by the tests that neither take brokers down nor inject errors
/// (stopping a mock cluster costs librdkafka about a second); give each test its own topics with
/// `unique_topic`.
inline kafka_mock_cluster& shared_kafka_cluster()
{
    static kafka_mock_cluster cluster{3};
    return cluster;
}

/// `base` with a suffix no other call returned in this process.
inline std::string unique_topic(const std::string& base)
{
    static std::atomic<int> next{0};
    return base + "-" + std::to_string(next.fetch_add(1));
}

/// librdkafka properties that keep test clients quiet and fast against the mock cluster.
inline std::map<std::string, std::string> quiet_properties(std::map<std::string, std::string> extra = {})
{
    std::map<std::string, std::string> properties{{"log_level", "0"}, {"linger.ms", "1"}};
    for (auto& [name, value] : extra) {
        properties[name] = value;
    }
    return properties;
}

/// Runs `io` until `done()` holds (REQUIREs it within `timeout`).
inline void run_until(boost::asio::io_context& io, const std::function<bool()>& done,
                      std::chrono::milliseconds timeout = std::chrono::seconds(10))
{
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
        io.restart();
        io.run_for(std::chrono::milliseconds(5));
    }
    REQUIRE(done());
}

/// Reads a Kafka topic with a plain librdkafka consumer (no group): the records of a partition,
/// and the partition's end offset.
class kafka_reader {
public:
    explicit kafka_reader(const std::string& bootstrap_servers)
    {
        std::array<char, 512> reason{};
        rd_kafka_conf_t* configuration = rd_kafka_conf_new();
        rd_kafka_conf_set(configuration, "bootstrap.servers", bootstrap_servers.c_str(), reason.data(), reason.size());
        rd_kafka_conf_set(configuration, "log_level", "0", reason.data(), reason.size());
        rd_kafka_conf_set(configuration, "fetch.wait.max.ms", "5", reason.data(), reason.size());
        client_ = rd_kafka_new(RD_KAFKA_CONSUMER, configuration, reason.data(), reason.size());
        REQUIRE(client_ != nullptr);
    }
    kafka_reader(const kafka_reader&) = delete;
    kafka_reader& operator=(const kafka_reader&) = delete;
    ~kafka_reader() { rd_kafka_destroy(client_); }

    /// The partition's high watermark: how many records it holds (the mock never deletes any).
    std::int64_t end_offset(const std::string& topic, std::int32_t partition)
    {
        std::int64_t low = 0;
        std::int64_t high = 0;
        const rd_kafka_resp_err_t result =
            rd_kafka_query_watermark_offsets(client_, topic.c_str(), partition, &low, &high, 5000);
        REQUIRE(result == RD_KAFKA_RESP_ERR_NO_ERROR);
        return high;
    }

    /// The values of the first `count` records of a partition, as text.
    std::vector<std::string> values(const std::string& topic, std::int32_t partition, std::size_t count)
    {
        rd_kafka_topic_t* handle = rd_kafka_topic_new(client_, topic.c_str(), nullptr);
        REQUIRE(handle != nullptr);
        REQUIRE(rd_kafka_consume_start(handle, partition, RD_KAFKA_OFFSET_BEGINNING) == 0);
        std::vector<std::string> read;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (read.size() < count && std::chrono::steady_clock::now() < deadline) {
            rd_kafka_message_t* message = rd_kafka_consume(handle, partition, 100);
            if (message == nullptr) {
                continue;
            }
            if (message->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
                read.emplace_back(static_cast<const char*>(message->payload), message->len);
            }
            rd_kafka_message_destroy(message);
        }
        rd_kafka_consume_stop(handle, partition);
        rd_kafka_topic_destroy(handle);
        return read;
    }

private:
    rd_kafka_t* client_ = nullptr;
};

}  // namespace bufferqueue::test
