// Kafka topics: registration checks the cluster's metadata (docs/kafka.md, "Registration").
#include "bufferqueue/kafka.hpp"

#include "bufferqueue/buffer_queue.hpp"

#include "catch.hpp"
#include "kafka_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <string>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace kafka_registration_test {

namespace {

namespace bq = bufferqueue;
using bq::errc;
using bq::test::error_from;
using bq::test::missing_from;
using bq::test::quiet_properties;

bq::kafka_topic_options<int> int_topic(const std::string& name, std::size_t partitions, const std::string& servers)
{
    return bq::kafka_topic_options<int>{.name = name,
                                        .partitions = partitions,
                                        .bootstrap_servers = servers,
                                        .properties = quiet_properties(),
                                        .connect_timeout = std::chrono::seconds(5)};
}

}  // namespace

TEST_CASE("a kafka topic registers when the cluster has it with that partition count", "[kafka]")
{
    bq::test::kafka_test_cluster& cluster = bq::test::shared_kafka_cluster();
    const std::string topic = bq::test::unique_topic("orders");
    cluster.create_topic(topic, 6);
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(int_topic(topic, 6, cluster.bootstrap_servers()));
    CHECK_FALSE(error_from([&] { (void)queue.producer<int>(topic); }));
}

TEST_CASE("registering a kafka topic on an unreachable cluster fails with io_error naming the servers in bounded time",
          "[kafka]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    auto options = int_topic("orders", 1, "127.0.0.1:1");
    options.connect_timeout = std::chrono::milliseconds(300);
    const auto started = std::chrono::steady_clock::now();
    const auto failure = error_from([&] { queue.add_topic(std::move(options)); });
    const auto took = std::chrono::steady_clock::now() - started;
    REQUIRE(failure);
    CHECK(failure->code() == errc::io_error);
    CHECK(missing_from(failure->what(), {"orders", "127.0.0.1:1", "300 ms"}) == "");
    CHECK(took < std::chrono::seconds(3));
    CHECK(bq::make_error_code(errc::timed_out).message() == "timed out");
    CHECK(error_from([&] { (void)queue.producer<int>("orders"); })->code() == errc::no_such_topic);
}

TEST_CASE("registering a kafka topic the cluster lacks fails with no_such_topic and creates nothing", "[kafka]")
{
    bq::test::kafka_test_cluster& cluster = bq::test::shared_kafka_cluster();
    const std::string typo = bq::test::unique_topic("ordres");
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    for (int attempt = 0; attempt < 2; ++attempt) {
        // The 2.0.2 mock auto-creates (4 partitions) any topic a request names: a second attempt
        // that still fails shows that the first named nothing.
        const auto failure = error_from([&] { queue.add_topic(int_topic(typo, 4, cluster.bootstrap_servers())); });
        REQUIRE(failure);
        CHECK(failure->code() == errc::no_such_topic);
        CHECK(missing_from(failure->what(), {typo, cluster.bootstrap_servers()}) == "");
    }
}

TEST_CASE("registering a kafka topic with another partition count than the cluster's names both counts", "[kafka]")
{
    bq::test::kafka_test_cluster& cluster = bq::test::shared_kafka_cluster();
    const std::string topic = bq::test::unique_topic("orders");
    cluster.create_topic(topic, 6);
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    const auto failure = error_from([&] { queue.add_topic(int_topic(topic, 4, cluster.bootstrap_servers())); });
    REQUIRE(failure);
    CHECK(failure->code() == errc::invalid_argument);
    CHECK(missing_from(failure->what(), {topic, "'partitions' is 4", "has 6 partitions"}) == "");
}

TEST_CASE("kafka topic options are checked before connecting, naming the option or property", "[kafka]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    // Unreachable servers: a check that passed would fail later with io_error instead.
    const std::string servers = "127.0.0.1:1";

    auto bad_name = int_topic("or ders", 1, servers);
    auto failure = error_from([&] { queue.add_topic(std::move(bad_name)); });
    REQUIRE(failure);
    CHECK(failure->code() == errc::invalid_argument);
    CHECK(missing_from(failure->what(), {"or ders", "'name'"}) == "");

    failure = error_from([&] { queue.add_topic(int_topic("orders", 1, "")); });
    REQUIRE(failure);
    CHECK(failure->code() == errc::invalid_argument);
    CHECK(missing_from(failure->what(), {"'bootstrap_servers'"}) == "");

    failure = error_from([&] { queue.add_topic(int_topic("orders", 0, servers)); });
    REQUIRE(failure);
    CHECK(failure->code() == errc::invalid_argument);
    CHECK(missing_from(failure->what(), {"'partitions'"}) == "");

    auto zero_timeout = int_topic("orders", 1, servers);
    zero_timeout.connect_timeout = std::chrono::milliseconds(0);
    failure = error_from([&] { queue.add_topic(std::move(zero_timeout)); });
    REQUIRE(failure);
    CHECK(failure->code() == errc::invalid_argument);
    CHECK(missing_from(failure->what(), {"'connect_timeout'"}) == "");

    auto bad_property = int_topic("orders", 1, servers);
    bad_property.properties["acks"] = "several";
    failure = error_from([&] { queue.add_topic(std::move(bad_property)); });
    REQUIRE(failure);
    CHECK(failure->code() == errc::invalid_argument);
    CHECK(missing_from(failure->what(), {"orders", "'acks'", "several"}) == "");

    auto unknown_property = int_topic("orders", 1, servers);
    unknown_property.properties["no.such.property"] = "1";
    failure = error_from([&] { queue.add_topic(std::move(unknown_property)); });
    REQUIRE(failure);
    CHECK(failure->code() == errc::invalid_argument);
    CHECK(missing_from(failure->what(), {"'no.such.property'"}) == "");
}

TEST_CASE("registering a kafka topic twice is topic_exists, checked before connecting", "[kafka]")
{
    bq::test::kafka_test_cluster& cluster = bq::test::shared_kafka_cluster();
    const std::string topic = bq::test::unique_topic("orders");
    cluster.create_topic(topic, 1);
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(int_topic(topic, 1, cluster.bootstrap_servers()));
    // Unreachable servers: only the duplicate check can answer within the test.
    const auto failure = error_from([&] { queue.add_topic(int_topic(topic, 1, "127.0.0.1:1")); });
    REQUIRE(failure);
    CHECK(failure->code() == errc::topic_exists);
}

TEST_CASE("the kafka mock cluster refuses bad counts, duplicate topics and unknown brokers", "[kafka]")
{
    CHECK(error_from([] { bq::kafka_mock_cluster none{0}; })->code() == errc::invalid_argument);
    bq::kafka_mock_cluster cluster{2};
    CHECK(cluster.broker_count() == 2);
    CHECK(cluster.bootstrap_servers().find(',') != std::string::npos);
    cluster.create_topic("orders", 3, 2);
    CHECK(error_from([&] { cluster.create_topic("orders", 3); })->code() == errc::topic_exists);
    CHECK(error_from([&] { cluster.create_topic("wide", 3, 3); })->code() == errc::invalid_argument);
    CHECK(error_from([&] { cluster.create_topic("", 3); })->code() == errc::invalid_argument);
    CHECK(error_from([&] { cluster.set_broker_down(3); })->code() == errc::invalid_argument);
    CHECK_FALSE(error_from([&] { cluster.set_broker_down(2); }));
    CHECK_FALSE(error_from([&] { cluster.set_broker_up(2); }));
}

}  // namespace kafka_registration_test
