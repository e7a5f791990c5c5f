// Test helpers for Kafka topics: the cluster the tests share (librdkafka's mock cluster, or the real
// cluster BUFFERQUEUE_KAFKA_BOOTSTRAP names), a plain librdkafka reader that checks what reached the
// brokers (run_until, which runs an io_context until a condition holds, is queue_test_support.hpp's).
#pragma once

#include "bufferqueue/kafka/kafka_mock_cluster.hpp"
#include "bufferqueue/producer.hpp"

#include "catch.hpp"
#include "queue_test_support.hpp"

#include <boost/asio/io_context.hpp>

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace bufferqueue::test {

/// The value of BUFFERQUEUE_KAFKA_BOOTSTRAP ("host:port,..."): when set and not empty, the Kafka
/// tests run against that cluster instead of the in-process mock (docs/kafka.md, "Tests").
inline std::string real_kafka_bootstrap()
{
    const char* value = std::getenv("BUFFERQUEUE_KAFKA_BOOTSTRAP");
    return value != nullptr ? value : "";
}

/// True when the tests run against the real cluster BUFFERQUEUE_KAFKA_BOOTSTRAP names.
inline bool on_real_kafka_cluster()
{
    return !real_kafka_bootstrap().empty();
}

/// For a test that needs the mock cluster's fault injection (brokers down, pushed errors): true when
/// it cannot run because the tests run against a real cluster; it then WARNs naming why, and the
/// test returns: `if (skip_on_real_kafka_cluster("takes a broker down")) return;`.
inline bool skip_on_real_kafka_cluster(const std::string& why)
{
    if (!on_real_kafka_cluster()) {
        return false;
    }
    WARN("skipped against the real cluster BUFFERQUEUE_KAFKA_BOOTSTRAP="
         << real_kafka_bootstrap() << ": this test " << why << ", which only the mock cluster can do");
    return true;
}

/// What a cluster's metadata says of one topic.
struct kafka_topic_state {
    bool exists = false;
    int partitions = 0;
    bool every_partition_led = false;  // every partition has a leader
};

/// The metadata of `topic` (`exists` false when the cluster has no such topic or does not answer in
/// 5 s). Lists all topics, never names `topic`, so it cannot make a broker auto-create it.
inline kafka_topic_state kafka_topic_metadata(rd_kafka_t* client, const std::string& topic)
{
    kafka_topic_state state;
    const rd_kafka_metadata_t* metadata = nullptr;
    if (rd_kafka_metadata(client, 1, nullptr, &metadata, 5000) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        return state;
    }
    for (int index = 0; index < metadata->topic_cnt; ++index) {
        const rd_kafka_metadata_topic_t& each = metadata->topics[index];
        if (each.topic == topic && each.err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            state.exists = true;
            state.partitions = each.partition_cnt;
            state.every_partition_led = true;
            for (int partition = 0; partition < each.partition_cnt; ++partition) {
                state.every_partition_led = state.every_partition_led && each.partitions[partition].leader >= 0;
            }
        }
    }
    rd_kafka_metadata_destroy(metadata);
    return state;
}

/// The cluster the Kafka tests share: a 3-broker mock cluster, or, with BUFFERQUEUE_KAFKA_BOOTSTRAP
/// set, that real cluster. `create_topic` then goes through the admin API (rd_kafka_CreateTopics);
/// give each test its own topics with `unique_topic`, whose names are unique per run there too.
class kafka_test_cluster {
public:
    kafka_test_cluster() : servers_(real_kafka_bootstrap())
    {
        if (servers_.empty()) {
            mock_ = std::make_unique<kafka_mock_cluster>(3);
            servers_ = mock_->bootstrap_servers();
            return;
        }
        std::array<char, 512> reason{};
        rd_kafka_conf_t* configuration = rd_kafka_conf_new();
        rd_kafka_conf_set(configuration, "bootstrap.servers", servers_.c_str(), reason.data(), reason.size());
        rd_kafka_conf_set(configuration, "log_level", "0", reason.data(), reason.size());
        admin_ = rd_kafka_new(RD_KAFKA_PRODUCER, configuration, reason.data(), reason.size());
        REQUIRE(admin_ != nullptr);
    }
    kafka_test_cluster(const kafka_test_cluster&) = delete;
    kafka_test_cluster& operator=(const kafka_test_cluster&) = delete;
    ~kafka_test_cluster()
    {
        if (admin_ != nullptr) {
            rd_kafka_destroy(admin_);
        }
    }

    /// "host:port,..." of the cluster.
    std::string bootstrap_servers() const { return servers_; }

    /// True for the real cluster of BUFFERQUEUE_KAFKA_BOOTSTRAP.
    bool real() const { return mock_ == nullptr; }

    /// Creates `name` with `partitions` partitions. On the mock: `kafka_mock_cluster::create_topic`.
    /// On a real cluster: prints "bufferqueue tests: creating Kafka topic <name> (<n> partitions,
    /// replication <r>)", uses the topic if it already exists with that partition count (something
    /// created it for this run, e.g. the driver of kafka_bootstrap_test.cpp), else creates it through
    /// the admin API with `replication_factor` capped at the broker count, and waits until every
    /// partition has a leader. FAILs the test naming the topic when that does not work in 20 s.
    void create_topic(const std::string& name, std::size_t partitions, std::size_t replication_factor = 1)
    {
        if (mock_ != nullptr) {
            mock_->create_topic(name, partitions, replication_factor);
            return;
        }
        const int brokers = broker_count();
        const int replicas = std::max(1, std::min(static_cast<int>(replication_factor), brokers));
        std::printf("bufferqueue tests: creating Kafka topic %s (%zu partitions, replication %d)\n", name.c_str(),
                    partitions, replicas);
        std::fflush(stdout);
        const auto wanted = static_cast<int>(partitions);
        // Created for this run already? (Briefly: on a real cluster unique names never exist yet.)
        for (int attempt = 0; attempt < 15; ++attempt) {
            if (const kafka_topic_state found = kafka_topic_metadata(admin_, name); found.exists) {
                INFO("Kafka topic " << name << " exists with " << found.partitions << " partitions, not " << wanted);
                REQUIRE(found.partitions == wanted);
                wait_for_leaders(name, wanted);
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        create_through_admin_api(name, wanted, replicas);
        wait_for_leaders(name, wanted);
    }

private:
    int broker_count()
    {
        const rd_kafka_metadata_t* metadata = nullptr;
        const rd_kafka_resp_err_t result = rd_kafka_metadata(admin_, 1, nullptr, &metadata, 10000);
        INFO("reading the metadata of BUFFERQUEUE_KAFKA_BOOTSTRAP=" << servers_ << ": " << rd_kafka_err2str(result));
        REQUIRE(result == RD_KAFKA_RESP_ERR_NO_ERROR);
        const int brokers = metadata->broker_cnt;
        rd_kafka_metadata_destroy(metadata);
        return brokers;
    }

    void create_through_admin_api(const std::string& name, int partitions, int replicas)
    {
        std::array<char, 512> reason{};
        rd_kafka_NewTopic_t* topic =
            rd_kafka_NewTopic_new(name.c_str(), partitions, replicas, reason.data(), reason.size());
        INFO("rd_kafka_NewTopic_new(" << name << "): " << reason.data());
        REQUIRE(topic != nullptr);
        rd_kafka_AdminOptions_t* options = rd_kafka_AdminOptions_new(admin_, RD_KAFKA_ADMIN_OP_CREATETOPICS);
        rd_kafka_AdminOptions_set_request_timeout(options, 15000, reason.data(), reason.size());
        rd_kafka_AdminOptions_set_operation_timeout(options, 15000, reason.data(), reason.size());
        rd_kafka_queue_t* results = rd_kafka_queue_new(admin_);
        rd_kafka_CreateTopics(admin_, &topic, 1, options, results);
        rd_kafka_event_t* event = rd_kafka_queue_poll(results, 20000);
        std::string failure = event == nullptr ? "no answer in 20 s" : "";
        if (event != nullptr && rd_kafka_event_error(event) != RD_KAFKA_RESP_ERR_NO_ERROR) {
            failure = rd_kafka_event_error_string(event);
        } else if (event != nullptr) {
            std::size_t count = 0;
            const rd_kafka_topic_result_t** each =
                rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(event), &count);
            for (std::size_t index = 0; index < count; ++index) {
                const rd_kafka_resp_err_t error = rd_kafka_topic_result_error(each[index]);
                if (error != RD_KAFKA_RESP_ERR_NO_ERROR && error != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
                    const char* text = rd_kafka_topic_result_error_string(each[index]);
                    failure = text != nullptr ? text : rd_kafka_err2str(error);
                }
            }
        }
        if (event != nullptr) {
            rd_kafka_event_destroy(event);
        }
        rd_kafka_queue_destroy(results);
        rd_kafka_AdminOptions_destroy(options);
        rd_kafka_NewTopic_destroy(topic);
        INFO("creating Kafka topic " << name << " on BUFFERQUEUE_KAFKA_BOOTSTRAP=" << servers_ << ": " << failure);
        REQUIRE(failure.empty());
    }

    void wait_for_leaders(const std::string& name, int partitions)
    {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        const auto ready = [&](const kafka_topic_state& state) {
            return state.exists && state.partitions == partitions && state.every_partition_led;
        };
        kafka_topic_state found = kafka_topic_metadata(admin_, name);
        while (!ready(found) && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            found = kafka_topic_metadata(admin_, name);
        }
        INFO("Kafka topic " << name << " on " << servers_ << ": every one of its " << partitions
                            << " partitions has a leader");
        REQUIRE(ready(found));
    }

    std::string servers_;
    std::unique_ptr<kafka_mock_cluster> mock_;  // null against a real cluster
    rd_kafka_t* admin_ = nullptr;               // the admin client against a real cluster, else null
};

/// The cluster shared by the tests that neither take brokers down nor inject errors (stopping a mock
/// cluster costs librdkafka about a second); give each test its own topics with `unique_topic`.
inline kafka_test_cluster& shared_kafka_cluster()
{
    static kafka_test_cluster cluster;
    return cluster;
}

/// `base` with a suffix no other call returned in this process; against a real cluster also unique
/// per run ("bufferqueue-test-<seconds>-<pid>-<base>-<n>"), so reruns never meet old records.
inline std::string unique_topic(const std::string& base)
{
    static std::atomic<int> next{0};
    static const std::string run_prefix =
        on_real_kafka_cluster()
            ? "bufferqueue-test-" + std::to_string(std::time(nullptr)) + "-" + std::to_string(::getpid()) + "-"
            : "";
    return run_prefix + base + "-" + std::to_string(next.fetch_add(1));
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

/// The 2.0.2 mock's fixed delay of a group's first JoinGroup, and the session timeout the tests'
/// consumers use (see `group_properties`).
inline constexpr int mock_first_join_delay_ms = 3000;
inline constexpr int mock_session_timeout_ms = 6000;
/// How long `remove_group` and the statistics may wait for the brokers in those tests
/// (`kafka_topic_options::admin_timeout`): remove_group joins the group, and with a 6000 ms session
/// the mock's rebalance after earlier members left can take longer than the default 10 s.
inline constexpr std::chrono::milliseconds mock_admin_timeout{30000};

/// The group settings of test consumers against the 2.0.2 mock, with `quiet_properties`: records
/// fetched within 10 ms, heartbeats every 500 ms, and a session timeout of 6000 ms (later
/// rebalances take about session.timeout.ms - 1000 on the mock).
///
/// Why not shorter: the mock holds a group's first JoinGroup for a fixed 3 s, and its session check,
/// a 1 s tick that reads the clock itself, evicts a member idle for session.timeout.ms even while it
/// holds that member's JoinGroup - dropping the held reply, for which the client then waits
/// max.poll.interval.ms (5 minutes): a consumer never assigned, a test hung. At 3000 ms a tick a
/// few milliseconds late was enough (a conformance case hung once beside a TSan build; reproduced by
/// stopping the test process for 5 s during the first join: 7 hangs in 10 runs); at 6000 ms the
/// mock's thread has to stall for 3 s.
inline std::map<std::string, std::string> group_properties()
{
    static_assert(mock_session_timeout_ms >= mock_first_join_delay_ms + 3000);
    return quiet_properties({{"session.timeout.ms", std::to_string(mock_session_timeout_ms)},
                             {"heartbeat.interval.ms", "500"},
                             {"fetch.wait.max.ms", "10"}});
}

/// Produces `items` with a callback and runs `io` until the produce completes; returns its code.
template <class T>
boost::system::error_code produce_and_wait(producer<T>& producer, std::vector<T> items, boost::asio::io_context& io,
                                           std::chrono::milliseconds timeout = std::chrono::seconds(10))
{
    std::optional<boost::system::error_code> result;
    producer.produce(std::move(items), [&](boost::system::error_code error) { result = error; });
    REQUIRE(run_until(
        io, [&] { return result.has_value(); }, timeout));
    return *result;
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
