// Kafka topics' statistics from the brokers (end, earliest and committed offsets, also of records
// and commits of other processes) and remove_group moving a group's committed offsets back on the
// brokers (docs/kafka.md, "Statistics" and "remove_group").
#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/kafka.hpp"

#include "catch.hpp"
#include "kafka_ops_support.hpp"
#include "kafka_test_support.hpp"
#include "test_support.hpp"

#include <utility>  // before the Asio coroutine headers (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace kafka_ops_test {

namespace {

namespace bq = bufferqueue;
using bq::test::produce_and_wait;
using bq::test::run_until;

const bq::group_stats* group_named(const bq::topic_stats& stats, const std::string& name)
{
    for (const bq::group_stats& group : stats.groups) {
        if (group.name == name) {
            return &group;
        }
    }
    return nullptr;
}

}  // namespace

TEST_CASE("kafka statistics report the brokers' end offsets and a group's commits made in another process",
          "[kafka][stats][slow]")
{
    auto& cluster = bq::test::shared_kafka_cluster();
    const std::string topic = bq::test::unique_topic("stats");
    cluster.create_topic(topic, 2);
    // Kafka group names are the cluster's: unique, so no other test's lingering member joins it.
    const std::string readers_group = bq::test::unique_topic("readers");
    boost::asio::io_context io;
    // The queue that asks for statistics; another queue (another process's client) produces and commits.
    bq::buffer_queue observer(io.get_executor());
    observer.add_topic(bq::test::quick_topic(topic, 2, cluster.bootstrap_servers()));
    std::size_t committed = 0;
    {
        bq::buffer_queue other(io.get_executor());
        other.add_topic(bq::test::quick_topic(topic, 2, cluster.bootstrap_servers()));
        auto producer = other.producer<int>(topic);
        REQUIRE(produce_and_wait(producer, bq::test::range(0, 6), io) == boost::system::error_code());  // 3 each

        const bq::topic_stats before = observer.stats<int>(topic);
        CHECK(before.backend == "kafka");
        REQUIRE(before.partitions.size() == 2);
        CHECK(before.partitions[0].end == 3);
        CHECK(before.partitions[1].end == 3);
        CHECK(before.partitions[0].earliest == 0);
        CHECK(before.produced == 6);
        CHECK(before.groups.empty());

        auto reader = other.create_pull_consumer<int>({.topic = topic, .group = readers_group});
        std::optional<std::size_t> taken;
        reader.consume([&](boost::system::error_code error, bq::batch<int> batch) {
            REQUIRE_FALSE(error);
            taken = batch.size();
        });
        REQUIRE(run_until(
            io, [&] { return taken.has_value(); }, std::chrono::seconds(20)));
        std::optional<boost::system::error_code> commit_result;
        reader.commit([&](boost::system::error_code error) { commit_result = error; });
        REQUIRE(run_until(io, [&] { return commit_result.has_value(); }));
        REQUIRE_FALSE(*commit_result);
        committed = *taken;
        reader.close();
    }
    REQUIRE(committed > 0);

    // The observer opens the group (nothing is read): the statistics show the other process's
    // commit, and the consumer's lag (over its partitions: wait for the group's assignment) follows.
    auto idle = observer.create_pull_consumer<int>({.topic = topic, .group = readers_group});
    REQUIRE(run_until(
        io, [&] { return idle.partitions().size() == 2; }, std::chrono::seconds(20)));
    const bq::topic_stats after = observer.stats<int>(topic);
    const bq::group_stats* readers = group_named(after, readers_group);
    REQUIRE(readers != nullptr);
    CHECK(readers->partitions[0].committed + readers->partitions[1].committed == committed);
    CHECK(readers->lag == 6 - committed);
    CHECK(idle.lag() == 6 - committed);
    CHECK(after.produced == 6);
    idle.close();
}

TEST_CASE("kafka statistics never wait on the topic's io_context thread, and with the brokers down they report "
          "the last numbers known, and remove_group then fails naming topic and group",
          "[kafka][stats][slow]")
{
    bq::kafka_mock_cluster cluster{1};
    cluster.create_topic("down", 1);
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    auto options = bq::test::quick_topic("down", 1, cluster.bootstrap_servers());
    options.admin_timeout = std::chrono::milliseconds(1500);
    options.properties["message.timeout.ms"] = "1000";
    options.properties["reconnect.backoff.max.ms"] = "100";
    queue.add_topic(options);
    auto producer = queue.producer<int>("down");
    REQUIRE(produce_and_wait(producer, {1, 2}, io) == boost::system::error_code());
    CHECK(queue.stats<int>("down").partitions.at(0).end == 2);

    cluster.set_broker_down(1);
    const auto started = std::chrono::steady_clock::now();
    const bq::topic_stats stale = queue.stats<int>("down");
    const auto waited = std::chrono::steady_clock::now() - started;
    CHECK(stale.partitions.at(0).end == 2);   // the last numbers known, not zeros
    CHECK(waited < std::chrono::seconds(5));  // admin_timeout bounds it (1.5 s here)

    // On the io_context's thread: no broker round trip at all, the last numbers known at once.
    std::optional<bq::topic_stats> on_executor;
    std::chrono::steady_clock::duration executor_wait{};
    boost::asio::post(io, [&] {
        const auto posted = std::chrono::steady_clock::now();
        on_executor = queue.stats<int>("down");
        executor_wait = std::chrono::steady_clock::now() - posted;
    });
    REQUIRE(run_until(io, [&] { return on_executor.has_value(); }));
    CHECK(on_executor->partitions.at(0).end == 2);
    CHECK(executor_wait < std::chrono::milliseconds(1000));  // well below admin_timeout: it did not ask

    const auto unreachable = bq::test::error_from([&] { (void)queue.remove_group<int>("down", "gone"); });
    REQUIRE(unreachable);
    CHECK((unreachable->code() == bq::errc::timed_out || unreachable->code() == bq::errc::io_error));
    const std::string message = unreachable->what();
    CHECK(message.find("'down'") != std::string::npos);
    CHECK(message.find("'gone'") != std::string::npos);
    cluster.set_broker_up(1);
}

TEST_CASE("kafka remove_group refuses a group whose members in another process hold partitions, naming topic and "
          "group, and leaves its offsets",
          "[kafka][groups][slow]")
{
    auto& cluster = bq::test::shared_kafka_cluster();
    const std::string topic = bq::test::unique_topic("removal");
    cluster.create_topic(topic, 2);
    const std::string busy = bq::test::unique_topic("busy");  // Kafka group names are the cluster's
    boost::asio::io_context io;
    bq::buffer_queue elsewhere(io.get_executor());  // another process's member of the group
    elsewhere.add_topic(bq::test::quick_topic(topic, 2, cluster.bootstrap_servers()));
    auto producer = elsewhere.producer<int>(topic);
    REQUIRE(produce_and_wait(producer, bq::test::range(0, 4), io) == boost::system::error_code());
    auto member = elsewhere.create_pull_consumer<int>({.topic = topic, .group = busy});
    std::optional<bool> read;
    member.consume([&](boost::system::error_code error, bq::batch<int> batch) { read = !error && !batch.empty(); });
    REQUIRE(run_until(
        io, [&] { return read.has_value(); }, std::chrono::seconds(20)));
    REQUIRE(*read);
    std::optional<boost::system::error_code> commit_result;
    member.commit([&](boost::system::error_code error) { commit_result = error; });
    REQUIRE(run_until(io, [&] { return commit_result.has_value(); }));
    REQUIRE_FALSE(*commit_result);
    const std::vector<std::int64_t> before = bq::test::committed_offsets(cluster.bootstrap_servers(), topic, 2, busy);

    bq::buffer_queue here(io.get_executor());
    here.add_topic(bq::test::quick_topic(topic, 2, cluster.bootstrap_servers()));
    // remove_group blocks this thread while its member joins; the other member must keep serving its
    // rebalance meanwhile, as another process would: its io_context runs on a thread of its own.
    std::optional<bq::error> refused;
    {
        auto guard = boost::asio::make_work_guard(io);
        std::thread runner([&] { io.run(); });
        refused = bq::test::error_from([&] { (void)here.remove_group<int>(topic, busy); });
        guard.reset();
        boost::asio::post(io, [&] { io.stop(); });
        runner.join();
    }
    REQUIRE(refused);
    CHECK(refused->code() == bq::errc::group_in_use);
    const std::string message = refused->what();
    CHECK(message.find("'" + topic + "'") != std::string::npos);
    CHECK(message.find("'" + busy + "'") != std::string::npos);
    CHECK(bq::test::committed_offsets(cluster.bootstrap_servers(), topic, 2, busy) == before);
    io.restart();
    member.close();
}

}  // namespace kafka_ops_test
