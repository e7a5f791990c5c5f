// Push consumers over Kafka topics: auto commit reaches the brokers when a batch is pulled, and a
// failing handler under manual commit is retried max_attempts times, then dead-lettered to a Kafka
// topic and committed (docs/kafka.md, "Push consumers"; docs/push-consumers.md).
#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/dead_letter.hpp"
#include "bufferqueue/kafka.hpp"

#include "catch.hpp"
#include "kafka_ops_support.hpp"
#include "kafka_test_support.hpp"
#include "push/push_test_support.hpp"
#include "test_support.hpp"

#include <utility>  // before the Asio coroutine headers (GCC 12)

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace kafka_push_test {

namespace {

namespace bq = bufferqueue;
using bq::test::produce_and_wait;
using bq::test::run_until;

}  // namespace

TEST_CASE("an auto-commit push consumer of a kafka topic commits on the brokers as batches are pulled, and a "
          "throwing handler's batch is reported and not delivered again",
          "[kafka][push][slow]")
{
    auto& cluster = bq::test::shared_kafka_cluster();
    const std::string topic = bq::test::unique_topic("push-auto");
    cluster.create_topic(topic, 2);
    const std::string group_name = bq::test::unique_topic("auto");  // Kafka group names are the cluster's
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    bq::test::sink_log errors;
    queue.set_push_error_sink(errors.sink());
    queue.add_topic(bq::test::quick_topic(topic, 2, cluster.bootstrap_servers()));
    auto producer = queue.producer<int>(topic);
    REQUIRE(produce_and_wait(producer, bq::test::range(0, 20), io) == boost::system::error_code());

    std::vector<int> received;
    queue.add_push_consumer<int>({.topic = topic, .group = group_name, .batch_size = 4},
                                 [&](bq::batch<int> batch) -> boost::asio::awaitable<void> {
                                     received.insert(received.end(), batch.begin(), batch.end());
                                     if (std::find(batch.begin(), batch.end(), 7) != batch.end()) {
                                         throw std::runtime_error("cannot handle 7");
                                     }
                                     co_return;
                                 });
    queue.start();
    io.restart();  // the produce ran it out of work
    REQUIRE(bq::test::run_until_then_stop(io, queue, [&] { return received.size() >= 20; }));

    // Every record once: the throwing batch too (auto commit: committed when pulled, never retried).
    std::sort(received.begin(), received.end());
    CHECK(received == bq::test::range(0, 20));
    REQUIRE(errors.size() == 1);
    CHECK(errors.lines.front().rfind(topic + "|" + group_name + "|", 0) == 0);
    CHECK(errors.lines.front().find("|exception") != std::string::npos);
    // Round-robin put 10 records in each partition; the brokers hold the group's commits after both.
    CHECK(bq::test::committed_offsets(cluster.bootstrap_servers(), topic, 2, group_name) ==
          std::vector<std::int64_t>{10, 10});
    const bq::topic_stats stats = queue.stats<int>(topic);
    REQUIRE(stats.groups.size() == 1);
    const bq::group_stats& group = stats.groups.front();
    CHECK(group.lag == 0);
    CHECK(group.push_failed_deliveries == 1);
}

TEST_CASE("a failing push handler over a kafka topic is retried max_attempts times, then its records go to a "
          "kafka dead-letter topic and the group commits past them",
          "[kafka][push][dead_letter][slow]")
{
    auto& cluster = bq::test::shared_kafka_cluster();
    const std::string topic = bq::test::unique_topic("push-failing");
    const std::string dead = topic + ".dead";
    cluster.create_topic(topic, 1);
    cluster.create_topic(dead, 1);
    const std::string group_name = bq::test::unique_topic("work");  // Kafka group names are the cluster's
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    bq::test::sink_log errors;
    queue.set_push_error_sink(errors.sink());
    queue.add_topic(bq::test::quick_topic(topic, 1, cluster.bootstrap_servers()));
    queue.add_topic(bq::test::quick_topic<bq::dead_letter<int>>(dead, 1, cluster.bootstrap_servers()));
    auto producer = queue.producer<int>(topic);
    REQUIRE(produce_and_wait(producer, bq::test::range(0, 12), io) == boost::system::error_code());

    std::vector<std::vector<int>> batches;  // what the handler saw, in order
    std::vector<int> failing;               // the batch holding 7, as delivered the last time
    int last_committed = -1;                // the last item of the last batch committed
    queue.add_push_consumer({.topic = topic,
                             .group = group_name,
                             .batch_size = 4,
                             .max_attempts = 2,
                             .retry_backoff = bq::test::quick_backoff,
                             .dead_letter_topic = dead},
                            [&](bq::batch<int> batch, bq::committer& committer) -> boost::asio::awaitable<void> {
                                batches.emplace_back(batch.begin(), batch.end());
                                if (std::find(batch.begin(), batch.end(), 7) != batch.end()) {
                                    failing = batches.back();
                                    throw std::runtime_error("cannot handle 7");
                                }
                                co_await committer.commit();
                                last_committed = batch.back();
                            });
    queue.start();
    const auto delivered = [&] {
        std::vector<int> all;
        for (const auto& batch : batches) {
            all.insert(all.end(), batch.begin(), batch.end());
        }
        return all;
    };
    io.restart();  // the produce ran it out of work
    REQUIRE(bq::test::run_until_then_stop(io, queue, [&] { return last_committed == 11; }));
    CHECK(bq::test::committed_offsets(cluster.bootstrap_servers(), topic, 1, group_name) ==
          std::vector<std::int64_t>{12});

    // The failing batch twice in a row (max_attempts), every other record once, in order.
    REQUIRE_FALSE(failing.empty());
    std::size_t failing_deliveries = 0;
    for (std::size_t index = 0; index < batches.size(); ++index) {
        if (batches[index] == failing) {
            ++failing_deliveries;
            CHECK((failing_deliveries == 1 || batches[index - 1] == failing));
        }
    }
    CHECK(failing_deliveries == 2);
    std::vector<int> once = delivered();
    once.erase(std::search(once.begin(), once.end(), failing.begin(), failing.end()),
               std::search(once.begin(), once.end(), failing.begin(), failing.end()) +
                   static_cast<std::ptrdiff_t>(failing.size()));
    CHECK(once == bq::test::range(0, 12));

    // One dead letter per record of that batch reached the dead-letter topic's broker, with the
    // record's Kafka offset (the item: one partition, offset = item) and the attempt count.
    bq::test::kafka_reader reader(cluster.bootstrap_servers());
    REQUIRE(reader.end_offset(dead, 0) == static_cast<std::int64_t>(failing.size()));
    std::vector<int> letters;
    for (const std::string& value : reader.values(dead, 0, failing.size())) {
        const auto letter = nlohmann::json::parse(value).get<bq::dead_letter<int>>();
        REQUIRE(letter.item);
        letters.push_back(*letter.item);
        CHECK(letter.topic == topic);
        CHECK(letter.offset == static_cast<std::uint64_t>(*letter.item));
        CHECK(letter.attempts == 2);
        CHECK(letter.error.find("cannot handle 7") != std::string::npos);
    }
    CHECK(letters == failing);
    const bq::topic_stats stats = queue.stats<int>(topic);
    REQUIRE(stats.groups.size() == 1);
    const bq::group_stats& group = stats.groups.front();
    CHECK(group.lag == 0);  // processed or dead-lettered, all committed on the brokers
    CHECK(group.push_failed_deliveries == 2);
    CHECK(group.dead_letters == failing.size());
    CHECK(errors.size() == 3);  // two failed attempts, one give-up report
}

}  // namespace kafka_push_test
