// Group membership owned outside the topic (`bufferqueue::group_membership`), through the test
// backend's stand-in group protocol (test_backend_membership.hpp, public headers only): consumers
// start with nothing and wait; partitions assigned through the port are read; a partition moved
// to another consumer resumes after the last commit and the old owner's commit of it fails with
// partition_revoked; joins and leaves rebalance; statistics and remove_group reach the membership;
// the port refuses once the topic is closed.
#include "storage/test_backend/test_backend.hpp"

#include "bufferqueue/buffer_queue.hpp"
#include "catch.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace outside_membership_test {

namespace {

namespace bq = bufferqueue;
namespace tb = bufferqueue_test_backend;
using namespace std::chrono_literals;
using bufferqueue::test::run_until;

std::size_t owned(const std::vector<bq::pull_consumer<int>>& consumers)
{
    std::size_t total = 0;
    for (const auto& consumer : consumers) {
        total += consumer.partitions().size();
    }
    return total;
}

tb::test_backend_topic_options<int> topic_of(std::string name, std::size_t partitions,
                                             std::shared_ptr<tb::test_backend_membership> membership)
{
    return {.name = std::move(name), .partitions = partitions, .membership = std::move(membership)};
}

// Adds topic `name` of two partitions, every item keyed to partition 0, whose membership the test
// drives by hand; returns the membership.
std::shared_ptr<tb::test_backend_membership> add_manual_topic(bq::buffer_queue& queue, std::string name)
{
    auto membership = std::make_shared<tb::test_backend_membership>(2);
    membership->manual();
    auto options = topic_of(std::move(name), 2, membership);
    options.partition_key = [](const int&) { return 1; };  // key 1: partition 0
    queue.add_topic(std::move(options));
    return membership;
}

}  // namespace

TEST_CASE("test backend: with outside membership, consumers start with no partitions and wait until assigned some",
          "[test_backend][membership]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    auto membership = std::make_shared<tb::test_backend_membership>(2);
    membership->manual();
    queue.add_topic(topic_of("assigned", 2, membership));
    auto consumer =
        queue.create_pull_consumer<int>({.topic = "assigned", .group = "g", .auto_commit = true, .batch_size = 10});
    auto producer = queue.producer<int>("assigned");
    CHECK(consumer.partitions().empty());

    REQUIRE(producer.try_produce(std::vector<int>{1, 2}));  // one item per partition
    std::optional<bq::batch<int>> received;
    bool done = false;
    consumer.consume([&](boost::system::error_code error, bq::batch<int> delivered) {
        CHECK_FALSE(error);
        received.emplace(std::move(delivered));
        done = true;
    });
    io.run_for(50ms);
    io.restart();
    CHECK_FALSE(done);  // owns nothing: waits

    const std::vector<std::size_t> second{1};
    membership->port().assign("g", 0, second);
    REQUIRE(run_until(io, [&] { return done; }));
    REQUIRE(received);
    CHECK(bufferqueue::test::items_of(*received) == std::vector<int>{2});
    CHECK(consumer.partitions() == second);
}

TEST_CASE("test backend: a partition moved to another consumer resumes after the last commit, and the old owner's "
          "commit of it fails with partition_revoked",
          "[test_backend][membership][commit]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    auto membership = add_manual_topic(queue, "moved");
    auto consumers =
        queue.create_pull_consumers<int>({.topic = "moved", .group = "g", .auto_commit = false, .batch_size = 2}, 2);
    auto producer = queue.producer<int>("moved");
    const std::vector<std::size_t> first{0};
    membership->port().assign("g", 0, first);
    REQUIRE(producer.try_produce(std::vector<int>{1, 2, 3}));

    CHECK(bufferqueue::test::items_of(consumers[0].try_consume()) == std::vector<int>{1, 2});
    CHECK_FALSE(bufferqueue::test::commit_now(consumers[0], io));
    CHECK(bufferqueue::test::items_of(consumers[0].try_consume()) == std::vector<int>{3});  // held, uncommitted

    membership->port().assign("g", 1, first);  // taken from consumer 0 once it lets go
    CHECK(bufferqueue::test::commit_now(consumers[0], io) == bq::errc::partition_revoked);
    CHECK_FALSE(consumers[0].try_consume().has_value());  // lets go

    std::vector<int> resumed;
    REQUIRE(run_until(io, [&] {
        if (const auto delivered = consumers[1].try_consume()) {
            resumed = bufferqueue::test::items_of(*delivered);
        }
        return !resumed.empty();
    }));
    CHECK(resumed == std::vector<int>{3});  // from the last commit: delivered again
    CHECK_FALSE(bufferqueue::test::commit_now(consumers[1], io));
    CHECK(consumers[0].partitions().empty());
    CHECK(consumers[1].partitions() == first);
}

TEST_CASE("test backend: a revoked partition stays in use while its consumer holds a batch of it, and the membership "
          "is told once it let go",
          "[test_backend][membership]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    auto membership = add_manual_topic(queue, "handed");
    auto consumer =
        queue.create_pull_consumer<int>({.topic = "handed", .group = "g", .auto_commit = false, .batch_size = 2});
    auto port = membership->port();
    using partitions = std::vector<std::size_t>;
    CHECK(port.partitions_in_use("g").empty());
    port.assign("g", 0, partitions{0, 1});
    CHECK(port.partitions_in_use("g") == partitions{0, 1});
    REQUIRE(queue.producer<int>("handed").try_produce(std::vector<int>{1, 2}));
    CHECK(bufferqueue::test::items_of(consumer.try_consume()) == std::vector<int>{1, 2});  // held: partition 0

    port.revoke("g", 0, partitions{1});  // no batch of it held: let go at once, and not hinted
    CHECK(port.partitions_in_use("g") == partitions{0});
    port.revoke("g", 0, partitions{0});  // its batch is held
    CHECK(port.partitions_in_use("g") == partitions{0});
    CHECK(membership->let_go_hints().empty());

    CHECK(bufferqueue::test::commit_now(consumer, io) == bq::errc::partition_revoked);
    CHECK_FALSE(consumer.try_consume().has_value());  // lets go
    CHECK(port.partitions_in_use("g").empty());
    const auto hints = membership->let_go_hints();
    REQUIRE(hints.size() == 1);
    CHECK(hints[0].first == "g");
    CHECK(hints[0].second.empty());  // asked from inside the hint: already nobody's

    port.assign("g", 0, partitions{1});
    consumer.close();  // lets go of partition 1: hinted before consumer_closed
    const auto after_close = membership->let_go_hints();
    REQUIRE(after_close.size() == 2);
    CHECK(after_close[1].second.empty());

    const auto unknown = bufferqueue::test::error_from([&] { port.partitions_in_use("nobody"); });
    REQUIRE(unknown);
    CHECK(unknown->code() == bq::errc::invalid_argument);
    CHECK(bufferqueue::test::missing_from(unknown->what(), {"'handed'", "'nobody'"}) == "");
}

TEST_CASE("test backend: the outside membership rebalances when consumers join and close", "[test_backend][membership]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    auto membership = std::make_shared<tb::test_backend_membership>(4);
    queue.add_topic(topic_of("rebalanced", 4, membership));
    auto consumers = queue.create_pull_consumers<int>(
        {.topic = "rebalanced", .group = "g", .auto_commit = true, .batch_size = 10}, 2);
    auto producer = queue.producer<int>("rebalanced");

    REQUIRE(
        run_until(io, [&] { return consumers[0].partitions().size() == 2 && consumers[1].partitions().size() == 2; }));
    CHECK(owned(consumers) == 4);

    consumers[1].close();
    REQUIRE(run_until(io, [&] { return consumers[0].partitions().size() == 4; }));
    CHECK(membership->closed_consumers() == 1);
    CHECK(membership->rebalances() >= 2);

    // Every item reaches the consumer left.
    REQUIRE(producer.try_produce(bufferqueue::test::range(0, 20)));
    std::vector<int> received;
    REQUIRE(run_until(io, [&] {
        while (const auto delivered = consumers[0].try_consume()) {
            received.insert(received.end(), delivered->begin(), delivered->end());
        }
        return received.size() >= 20;
    }));
    std::sort(received.begin(), received.end());
    CHECK(received == bufferqueue::test::range(0, 20));
}

TEST_CASE("test backend: a group opened again while the membership still hears of its last consumer's close gets "
          "its partitions",
          "[test_backend][membership][concurrency]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    auto membership = std::make_shared<tb::test_backend_membership>(2);
    queue.add_topic(topic_of("reopened", 2, membership));
    auto first = queue.create_pull_consumer<int>({.topic = "reopened", .group = "g"});
    REQUIRE(run_until(io, [&] { return first.partitions().size() == 2; }));

    // The close is reported to the membership slowly, on another thread; the group is opened again
    // in the meantime. The membership must hear of that close before the new consumer's creation,
    // or it takes the new consumer 0 for the one that left: it stops counting it (a Kafka topic's
    // new member leaves the group), so the next rebalance gives it nothing.
    membership->slow_close_reports(300ms);
    std::thread closing([&] { first.close(); });
    const bool report_begun = run_until(io, [&] { return membership->closes_begun() == 1; });
    std::optional<bq::pull_consumer<int>> second;
    if (report_begun) {
        second.emplace(queue.create_pull_consumer<int>({.topic = "reopened", .group = "g"}));
    }
    closing.join();
    REQUIRE(report_begun);
    CHECK(membership->closed_consumers() == 1);
    CHECK(membership->open_consumers("g") == std::set<std::size_t>{0});
    CHECK(run_until(io, [&] { return second->partitions().size() == 2; }));
}

TEST_CASE("test backend: statistics and remove_group reach the outside membership, and its port refuses calls once "
          "the topic is closed",
          "[test_backend][membership][close]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    auto membership = std::make_shared<tb::test_backend_membership>(1);
    queue.add_topic(topic_of("managed", 1, membership));
    {
        auto consumer = queue.create_pull_consumer<int>({.topic = "managed", .group = "g"});
        REQUIRE(run_until(io, [&] { return consumer.partitions().size() == 1; }));
        (void)queue.stats<int>("managed");
        CHECK(membership->statistics_refreshes() == 1);
    }
    CHECK(queue.remove_group<int>("managed", "g"));
    CHECK(membership->removed_groups() == std::vector<std::string>{"g"});

    queue.close();
    const std::vector<std::size_t> partitions{0};
    const auto refused = bufferqueue::test::error_from([&] { membership->port().assign("g", 0, partitions); });
    REQUIRE(refused);
    CHECK(refused->code() == bq::errc::closed);
    CHECK_THAT(refused->what(), Catch::Matchers::Contains("'g'"));
}

}  // namespace outside_membership_test
