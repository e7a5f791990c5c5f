// Kafka topics: producing (docs/kafka.md, "Producing"): our routing, completion on the broker's
// acknowledgement, try_produce, and faults injected into the mock cluster.
#include "bufferqueue/kafka.hpp"

#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/partition_key.hpp"

#include "catch.hpp"
#include "kafka_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace kafka_produce_test {

namespace {

namespace bq = bufferqueue;
using bq::errc;
using bq::test::kafka_reader;
using bq::test::produce_and_wait;
using bq::test::quiet_properties;
using bq::test::run_until;

struct order {
    std::int64_t id = 0;
    std::string customer;
    bool operator==(const order&) const = default;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(order, id, customer)

std::int64_t total_records(kafka_reader& reader, const std::string& topic, std::int32_t partitions)
{
    std::int64_t total = 0;
    for (std::int32_t partition = 0; partition < partitions; ++partition) {
        total += reader.end_offset(topic, partition);
    }
    return total;
}

}  // namespace

TEST_CASE("a kafka produce completes once the brokers acknowledged every record, routed by key as on memory topics",
          "[kafka]")
{
    bq::test::kafka_test_cluster& cluster = bq::test::shared_kafka_cluster();
    const std::string topic = bq::test::unique_topic("orders");
    cluster.create_topic(topic, 6, 3);
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(bq::kafka_topic_options<order>{.name = topic,
                                                   .partitions = 6,
                                                   .bootstrap_servers = cluster.bootstrap_servers(),
                                                   .serializer = bq::json_serializer<order>{},
                                                   .partition_key = [](const order& o) { return o.customer; },
                                                   .properties = quiet_properties({{"acks", "all"}})});
    auto producer = queue.producer<order>(topic);
    std::vector<order> orders;
    std::map<std::uint32_t, std::vector<order>> expected;  // per partition, in produce order
    for (int index = 0; index < 60; ++index) {
        order next{.id = index, .customer = "customer-" + std::to_string(index % 7)};
        expected[bq::partition_for_key(std::string_view(next.customer), 6)].push_back(next);
        orders.push_back(next);
    }
    REQUIRE(produce_and_wait(producer, orders, io) == boost::system::error_code());
    // Every delivery report is served: the io_context has no work left, so run() returns (the
    // descriptor is waited on only while records are in flight).
    io.restart();
    io.run_for(std::chrono::milliseconds(300));
    CHECK(io.stopped());

    // Acknowledged means stored: no waiting for the brokers here.
    kafka_reader reader(cluster.bootstrap_servers());
    for (std::uint32_t partition = 0; partition < 6; ++partition) {
        const std::vector<order>& wanted = expected[partition];
        REQUIRE(reader.end_offset(topic, static_cast<std::int32_t>(partition)) ==
                static_cast<std::int64_t>(wanted.size()));
        std::vector<order> stored;
        for (const std::string& value : reader.values(topic, static_cast<std::int32_t>(partition), wanted.size())) {
            stored.push_back(nlohmann::json::parse(value).get<order>());
        }
        CHECK(stored == wanted);
    }
}

TEST_CASE("a kafka produce without a key spreads items round-robin, one partition after the other", "[kafka]")
{
    bq::test::kafka_test_cluster& cluster = bq::test::shared_kafka_cluster();
    const std::string topic = bq::test::unique_topic("numbers");
    cluster.create_topic(topic, 4);
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(bq::kafka_topic_options<int>{.name = topic,
                                                 .partitions = 4,
                                                 .bootstrap_servers = cluster.bootstrap_servers(),
                                                 .properties = quiet_properties()});
    auto producer = queue.producer<int>(topic);
    REQUIRE(produce_and_wait(producer, bq::test::range(0, 10), io) == boost::system::error_code());
    REQUIRE(produce_and_wait(producer, bq::test::range(10, 12), io) == boost::system::error_code());
    kafka_reader reader(cluster.bootstrap_servers());
    CHECK(reader.end_offset(topic, 0) == 3);
    CHECK(reader.end_offset(topic, 1) == 3);
    CHECK(reader.end_offset(topic, 2) == 3);
    CHECK(reader.end_offset(topic, 3) == 3);
    CHECK(reader.values(topic, 1, 3) == std::vector<std::string>{"1", "5", "9"});
}

TEST_CASE("kafka try_produce hands records to the client without waiting for the brokers", "[kafka]")
{
    bq::test::kafka_test_cluster& cluster = bq::test::shared_kafka_cluster();
    const std::string topic = bq::test::unique_topic("numbers");
    cluster.create_topic(topic, 2);
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    std::vector<bq::kafka_delivery_failure> failures;
    queue.add_topic(bq::kafka_topic_options<int>{
        .name = topic,
        .partitions = 2,
        .bootstrap_servers = cluster.bootstrap_servers(),
        .properties = quiet_properties(),
        .delivery_error_sink = [&](const bq::kafka_delivery_failure& failure) { failures.push_back(failure); }});
    auto producer = queue.producer<int>(topic);
    const std::vector<int> items = bq::test::range(0, 100);
    CHECK(producer.try_produce(std::span<const int>(items)));
    CHECK(producer.try_produce(100));
    kafka_reader reader(cluster.bootstrap_servers());
    // The delivery reports are served on `io`; the brokers store the records either way.
    REQUIRE(run_until(io, [&] { return total_records(reader, topic, 2) == 101; }));
    CHECK(failures.empty());
}

TEST_CASE("a kafka produce completes with timed_out after message.timeout.ms while the broker is down", "[kafka][slow]")
{
    if (bq::test::skip_on_real_kafka_cluster("takes a broker down")) {
        return;
    }
    bq::kafka_mock_cluster cluster{1};
    cluster.create_topic("numbers", 1);
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    std::vector<bq::kafka_delivery_failure> failures;
    queue.add_topic(bq::kafka_topic_options<int>{
        .name = "numbers",
        .partitions = 1,
        .bootstrap_servers = cluster.bootstrap_servers(),
        // librdkafka honours message.timeout.ms only with reconnect.backoff.max.ms below it.
        .properties = quiet_properties({{"message.timeout.ms", "700"}, {"reconnect.backoff.max.ms", "100"}}),
        .delivery_error_sink = [&](const bq::kafka_delivery_failure& failure) { failures.push_back(failure); }});
    auto producer = queue.producer<int>("numbers");
    REQUIRE(produce_and_wait(producer, {1}, io) == boost::system::error_code());

    cluster.set_broker_down(1);
    const auto started = std::chrono::steady_clock::now();
    CHECK(produce_and_wait(producer, {2, 3}, io) == errc::timed_out);
    CHECK(std::chrono::steady_clock::now() - started >= std::chrono::milliseconds(600));

    // A record nobody waits for reaches the error sink, counted.
    CHECK(producer.try_produce(4));
    REQUIRE(run_until(io, [&] { return !failures.empty(); }));
    CHECK(failures.front().error == errc::timed_out);
    CHECK(failures.front().topic == "numbers");
    CHECK(failures.front().partition == 0);
    CHECK(failures.front().failures == 1);
    CHECK(failures.front().detail.find("numbers") != std::string::npos);

    // Back up: producing works again, and only the acknowledged record was stored before.
    cluster.set_broker_up(1);
    REQUIRE(produce_and_wait(producer, {5}, io) == boost::system::error_code());
    kafka_reader reader(cluster.bootstrap_servers());
    CHECK(reader.values("numbers", 0, 2) == std::vector<std::string>{"1", "5"});
}

TEST_CASE("a kafka produce survives retriable produce errors and fails on a refusal", "[kafka]")
{
    if (bq::test::skip_on_real_kafka_cluster("injects produce errors")) {
        return;
    }
    bq::kafka_mock_cluster cluster{1};
    cluster.create_topic("numbers", 1);
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(bq::kafka_topic_options<int>{.name = "numbers",
                                                 .partitions = 1,
                                                 .bootstrap_servers = cluster.bootstrap_servers(),
                                                 .properties = quiet_properties({{"retry.backoff.ms", "10"}})});
    auto producer = queue.producer<int>("numbers");
    // 6 NOT_LEADER_FOR_PARTITION is retriable: librdkafka retries, the produce succeeds.
    cluster.push_request_errors(bq::kafka_request::produce, {6, 6});
    CHECK(produce_and_wait(producer, {1}, io) == boost::system::error_code());
    // 87 INVALID_RECORD is not: the produce fails and nothing is stored.
    cluster.push_request_errors(bq::kafka_request::produce, {87});
    CHECK(produce_and_wait(producer, {2}, io) == errc::io_error);
    REQUIRE(produce_and_wait(producer, {3}, io) == boost::system::error_code());
    kafka_reader reader(cluster.bootstrap_servers());
    CHECK(reader.values("numbers", 0, 2) == std::vector<std::string>{"1", "3"});
}

TEST_CASE("closing the queue completes kafka produces still waiting for the brokers with closed", "[kafka]")
{
    if (bq::test::skip_on_real_kafka_cluster("takes a broker down")) {
        return;
    }
    bq::kafka_mock_cluster cluster{1};
    cluster.create_topic("numbers", 1);
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(bq::kafka_topic_options<int>{.name = "numbers",
                                                 .partitions = 1,
                                                 .bootstrap_servers = cluster.bootstrap_servers(),
                                                 .properties = quiet_properties()});
    auto producer = queue.producer<int>("numbers");
    cluster.set_broker_down(1);
    std::optional<boost::system::error_code> result;
    producer.produce(std::vector<int>{1, 2}, [&](boost::system::error_code error) { result = error; });
    io.restart();
    io.run_for(std::chrono::milliseconds(50));
    CHECK_FALSE(result.has_value());
    queue.close();
    REQUIRE(run_until(
        io, [&] { return result.has_value(); }, std::chrono::seconds(5)));
    CHECK(*result == errc::closed);
    // After close nothing is handed over.
    std::optional<boost::system::error_code> later;
    producer.produce(3, [&](boost::system::error_code error) { later = error; });
    REQUIRE(run_until(
        io, [&] { return later.has_value(); }, std::chrono::seconds(5)));
    CHECK(*later == errc::closed);
    // With nothing in flight the io_context has no work left: run() returns.
    io.restart();
    io.run();
}

TEST_CASE("kafka produces from several threads at once all complete and every record is stored once", "[kafka]")
{
    bq::test::kafka_test_cluster& cluster = bq::test::shared_kafka_cluster();
    const std::string topic = bq::test::unique_topic("numbers");
    cluster.create_topic(topic, 3);
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(bq::kafka_topic_options<int>{.name = topic,
                                                 .partitions = 3,
                                                 .bootstrap_servers = cluster.bootstrap_servers(),
                                                 .partition_key = [](int value) { return value; },
                                                 .properties = quiet_properties()});
    constexpr int threads = 4;
    constexpr int calls = 50;
    constexpr int per_call = 5;
    std::atomic<int> succeeded{0};
    std::atomic<int> failed{0};
    auto work = boost::asio::make_work_guard(io);
    std::vector<std::thread> runners;
    for (int runner = 0; runner < 2; ++runner) {
        runners.emplace_back([&] { io.run(); });
    }
    std::vector<std::thread> producers;
    for (int thread = 0; thread < threads; ++thread) {
        producers.emplace_back([&, thread] {
            auto producer = queue.producer<int>(topic);
            for (int call = 0; call < calls; ++call) {
                const int first = (thread * calls + call) * per_call;
                producer.produce(bq::test::range(first, first + per_call),
                                 [&](boost::system::error_code error) { (error ? failed : succeeded).fetch_add(1); });
            }
        });
    }
    for (auto& producer : producers) {
        producer.join();
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (succeeded.load() + failed.load() < threads * calls && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    work.reset();
    for (auto& runner : runners) {
        runner.join();
    }
    CHECK(failed.load() == 0);
    REQUIRE(succeeded.load() == threads * calls);
    kafka_reader reader(cluster.bootstrap_servers());
    std::int64_t expected[3] = {0, 0, 0};
    for (int value = 0; value < threads * calls * per_call; ++value) {
        ++expected[bq::partition_for_key(value, 3)];
    }
    for (std::int32_t partition = 0; partition < 3; ++partition) {
        CHECK(reader.end_offset(topic, partition) == expected[partition]);
    }
}

}  // namespace kafka_produce_test
