// Kafka topics: what a pull consumer reports (docs/kafka.md "Pull consumers"): a committed offset
// out of range fails a consume with errc::offset_out_of_range and is never reset, a partition
// without a committed offset starts at its earliest record; broker faults (semantic 8): a consume
// waiting while the broker is down waits without spinning and resumes when it returns, a commit the
// broker refuses fails and the batch is delivered again, refused fetches are retried; closing the
// queue ends the members' waits.
#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/kafka.hpp"

#include "catch.hpp"
#include "kafka_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/io_context.hpp>

#include <librdkafka/rdkafka.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace kafka_consumer_faults_test {

namespace {

namespace bq = bufferqueue;
using bq::test::produce_and_wait;
using bq::test::run_until;

template <class T>
std::set<std::size_t> owned(const bq::pull_consumer<T>& consumer)
{
    const std::vector<std::size_t> partitions = consumer.partitions();
    return {partitions.begin(), partitions.end()};
}

/// What one consume ended with: its code, the batch's partition and items, the consumer's last_error.
template <class T>
struct consumed {
    boost::system::error_code error;
    std::size_t partition = 0;
    std::vector<T> items;
    std::string last_error;
};

template <class T>
consumed<T> consume_once(boost::asio::io_context& io, bq::pull_consumer<T>& consumer,
                         std::chrono::milliseconds timeout = std::chrono::seconds(10))
{
    std::optional<consumed<T>> result;
    consumer.consume([&](boost::system::error_code error, bq::batch<T> delivered) {
        result = consumed<T>{error, delivered.partition(), std::vector<T>(delivered.begin(), delivered.end()), ""};
    });
    REQUIRE(run_until(
        io, [&] { return result.has_value(); }, timeout));
    result->last_error = consumer.last_error();
    return *result;
}

template <class T>
boost::system::error_code commit_and_wait(boost::asio::io_context& io, bq::pull_consumer<T>& consumer)
{
    std::optional<boost::system::error_code> result;
    consumer.commit([&](boost::system::error_code error) { result = error; });
    REQUIRE(run_until(io, [&] { return result.has_value(); }));
    return *result;
}

/// Commits `offset` for `partition` of `topic` in consumer group `group` with a plain librdkafka
/// client that never joins the group (what another tool resetting the group's offsets does).
void commit_offset_outside(const std::string& bootstrap_servers, const std::string& group, const std::string& topic,
                           std::int32_t partition, std::int64_t offset)
{
    std::array<char, 512> reason{};
    rd_kafka_conf_t* configuration = rd_kafka_conf_new();
    for (const auto& [name, value] : std::map<std::string, std::string>{
             {"bootstrap.servers", bootstrap_servers}, {"group.id", group}, {"log_level", "0"}}) {
        REQUIRE(rd_kafka_conf_set(configuration, name.c_str(), value.c_str(), reason.data(), reason.size()) ==
                RD_KAFKA_CONF_OK);
    }
    rd_kafka_t* client = rd_kafka_new(RD_KAFKA_CONSUMER, configuration, reason.data(), reason.size());
    REQUIRE(client != nullptr);
    rd_kafka_topic_partition_list_t* offsets = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(offsets, topic.c_str(), partition)->offset = offset;
    const rd_kafka_resp_err_t result = rd_kafka_commit(client, offsets, 0);
    const rd_kafka_resp_err_t element = offsets->elems[0].err;
    rd_kafka_topic_partition_list_destroy(offsets);
    rd_kafka_destroy(client);
    REQUIRE(result == RD_KAFKA_RESP_ERR_NO_ERROR);
    REQUIRE(element == RD_KAFKA_RESP_ERR_NO_ERROR);
}

}  // namespace

TEST_CASE("a kafka consumer reports a committed offset out of range instead of resetting it, and starts a "
          "partition without a committed offset at its earliest record",
          "[kafka][slow]")
{
    const std::string topic = bq::test::unique_topic("out-of-range");
    auto& cluster = bq::test::shared_kafka_cluster();
    cluster.create_topic(topic, 3);
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(bq::kafka_topic_options<std::string>{.name = topic,
                                                         .partitions = 3,
                                                         .bootstrap_servers = cluster.bootstrap_servers(),
                                                         .properties = bq::test::group_properties()});
    auto producer = queue.producer<std::string>(topic);
    // Round-robin from partition 0: p0 holds x0 x1, p1 a b, p2 c d.
    REQUIRE(produce_and_wait<std::string>(producer, {"x0", "a", "c", "x1", "b", "d"}, io) ==
            boost::system::error_code());
    // The group's offset for partition 0 names no record (as after retention deleted them);
    // partitions 1 and 2 have no committed offset.
    commit_offset_outside(cluster.bootstrap_servers(), "readers", topic, 0, 100);

    auto consumer = queue.create_pull_consumer<std::string>({.topic = topic, .group = "readers"});
    REQUIRE(run_until(
        io, [&] { return owned(consumer).size() == 3; }, std::chrono::seconds(20)));

    std::map<std::size_t, std::vector<std::string>> received;
    std::optional<std::string> out_of_range;
    const auto done = [&] { return out_of_range && received[1].size() == 2 && received[2].size() == 2; };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done() && std::chrono::steady_clock::now() < deadline) {
        const consumed<std::string> result = consume_once(io, consumer);
        if (result.error == bq::errc::offset_out_of_range) {
            CHECK_FALSE(out_of_range);  // reported once
            out_of_range = result.last_error;
        } else {
            REQUIRE(result.error == boost::system::error_code());
            received[result.partition].insert(received[result.partition].end(), result.items.begin(),
                                              result.items.end());
            REQUIRE(commit_and_wait(io, consumer) == boost::system::error_code());
        }
    }
    REQUIRE(done());
    // Names topic, group, partition and offset.
    CHECK_THAT(*out_of_range, Catch::Contains(topic) && Catch::Contains("group 'readers'") &&
                                  Catch::Contains("partition 0") && Catch::Contains("offset 100"));
    // Partitions without a committed offset started at their earliest record.
    CHECK(received[1] == std::vector<std::string>{"a", "b"});
    CHECK(received[2] == std::vector<std::string>{"c", "d"});

    // Never reset: partition 0 still delivers nothing, while the others go on.
    REQUIRE(produce_and_wait<std::string>(producer, {"x3", "f"}, io) == boost::system::error_code());
    const consumed<std::string> later = consume_once(io, consumer);
    REQUIRE(later.error == boost::system::error_code());
    CHECK(later.partition == 1);
    CHECK(later.items == std::vector<std::string>{"f"});
    CHECK(received[0].empty());
    consumer.close();
}

TEST_CASE("a kafka consumer waiting while its broker is down waits without spinning and resumes when the broker "
          "returns, and a commit the broker refuses fails and the batch is delivered again",
          "[kafka][slow]")
{
    // Its own cluster: the broker goes down and errors are injected.
    bq::kafka_mock_cluster cluster{1};
    cluster.create_topic("faults", 1);
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(bq::kafka_topic_options<int>{.name = "faults",
                                                 .partitions = 1,
                                                 .bootstrap_servers = cluster.bootstrap_servers(),
                                                 .properties = bq::test::group_properties()});
    auto producer = queue.producer<int>("faults");
    auto consumer = queue.create_pull_consumer<int>({.topic = "faults", .group = "g"});
    REQUIRE(run_until(
        io, [&] { return owned(consumer).size() == 1; }, std::chrono::seconds(20)));
    REQUIRE(produce_and_wait<int>(producer, {1}, io) == boost::system::error_code());
    consumed<int> first = consume_once(io, consumer);
    REQUIRE(first.error == boost::system::error_code());
    CHECK(first.items == std::vector<int>{1});
    REQUIRE(commit_and_wait(io, consumer) == boost::system::error_code());

    // The broker goes down while a consume waits: the consume keeps waiting, and the io_context runs
    // only a few handlers a second (the member's wake-ups for librdkafka's connection errors) - no
    // busy loop, no crash.
    cluster.set_broker_down(1);
    std::optional<consumed<int>> waiting;
    consumer.consume([&](boost::system::error_code error, bq::batch<int> delivered) {
        waiting = consumed<int>{error, delivered.partition(), std::vector<int>(delivered.begin(), delivered.end()), ""};
    });
    std::size_t handlers = 0;
    const auto down_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
    while (std::chrono::steady_clock::now() < down_until) {
        io.restart();
        handlers += io.run_for(std::chrono::milliseconds(50));
    }
    CHECK_FALSE(waiting.has_value());
    CHECK(handlers < 300);
    // The client's connection errors show in last_error (no consume failed).
    CHECK_THAT(consumer.last_error(), Catch::Contains("faults") && Catch::Contains("group 'g'"));

    // The broker returns: a record produced now wakes the waiting consume.
    cluster.set_broker_up(1);
    REQUIRE(produce_and_wait<int>(producer, {2, 3}, io) == boost::system::error_code());
    REQUIRE(run_until(
        io, [&] { return waiting.has_value(); }, std::chrono::seconds(20)));
    REQUIRE(waiting->error == boost::system::error_code());
    std::vector<int> resumed = waiting->items;
    while (resumed.size() < 2) {  // the two records may arrive in two fetches
        const consumed<int> more = consume_once(io, consumer);
        REQUIRE(more.error == boost::system::error_code());
        resumed = more.items;  // not committed: the same batch again, longer
    }
    CHECK(resumed == std::vector<int>{2, 3});

    // The broker refuses the commit (GROUP_AUTHORIZATION_FAILED): commit() fails with io_error, the
    // batch is delivered again, and a later commit succeeds.
    cluster.push_request_errors(bq::kafka_request::offset_commit, {30});
    CHECK(commit_and_wait(io, consumer) == bq::errc::io_error);
    CHECK_THAT(consumer.last_error(), Catch::Contains("faults") && Catch::Contains("commit of offset 3"));
    const consumed<int> again = consume_once(io, consumer);
    REQUIRE(again.error == boost::system::error_code());
    CHECK(again.items == std::vector<int>{2, 3});
    CHECK(commit_and_wait(io, consumer) == boost::system::error_code());

    // Fetches the broker refuses (NOT_LEADER_OR_FOLLOWER, retriable: librdkafka refreshes the
    // metadata and fetches again) fail no consume: the next record still arrives, once.
    cluster.push_request_errors(bq::kafka_request::fetch, {6, 6, 6});
    REQUIRE(produce_and_wait<int>(producer, {4}, io) == boost::system::error_code());
    const consumed<int> after_fetch_errors = consume_once(io, consumer);
    REQUIRE(after_fetch_errors.error == boost::system::error_code());
    CHECK(after_fetch_errors.items == std::vector<int>{4});
    CHECK(commit_and_wait(io, consumer) == boost::system::error_code());

    // Closing the queue (not the consumer handle) makes the member leave the group and end its wait:
    // io_context::run() returns, without waiting for the session timeout or blocking the thread.
    queue.close();
    const auto closing = std::chrono::steady_clock::now();
    io.restart();
    io.run_for(std::chrono::seconds(10));
    CHECK(std::chrono::steady_clock::now() - closing < std::chrono::seconds(5));
}

}  // namespace kafka_consumer_faults_test
