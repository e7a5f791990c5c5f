// Conformance, statistics: every backend reports end, committed and lag in items through
// buffer_queue::stats and pull_consumer::lag, and - on persistent backends - the same numbers for a
// new buffer_queue, before any consumer opened the group again.
#include "conformance/conformance_support.hpp"

#include <bufferqueue/bufferqueue.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace stats_conformance_test {

using namespace conformance;

namespace {

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

TEMPLATE_LIST_TEST_CASE("conformance: statistics count appended and committed items and each group's lag",
                        "[conformance][stats]", statistics_conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue, conformance_topic<int>{.name = "counted", .partitions = 2});
    auto reader = queue.create_pull_consumer<int>(manual("counted", "reader", 100));
    auto idle = queue.create_pull_consumer<int>(manual("counted", "idle", 100));
    REQUIRE(queue.producer<int>("counted").try_produce(std::vector<int>{1, 2, 3, 4, 5, 6}));
    const std::size_t taken = consumed_items(reader, io).size();  // one partition's items
    REQUIRE(taken > 0);
    // A consumer's lag counts its own partitions: wait until the idle one owns its split (at once,
    // but over Kafka when the group's rebalance assigned it).
    REQUIRE(run_until(io, [&] { return idle.partitions().size() == 2; }));
    REQUIRE_FALSE(commit_now(reader, io));

    const bq::topic_stats stats = queue.stats<int>("counted");
    CHECK(stats.topic == "counted");
    CHECK_FALSE(stats.backend.empty());
    REQUIRE(stats.partitions.size() == 2);
    CHECK(stats.partitions[0].end + stats.partitions[1].end == 6);
    CHECK(stats.produced == 6);
    CHECK(stats.consumed == taken);
    const bq::group_stats* reader_group = group_named(stats, "reader");
    const bq::group_stats* idle_group = group_named(stats, "idle");
    REQUIRE(reader_group != nullptr);
    REQUIRE(idle_group != nullptr);
    CHECK(reader_group->lag == 6 - taken);
    CHECK(idle_group->lag == 6);
    CHECK(idle_group->partitions[0].lag + idle_group->partitions[1].lag == 6);
    CHECK(reader.lag() == 6 - taken);
    CHECK(idle.lag() == 6);
}

TEMPLATE_LIST_TEST_CASE("conformance: a persistent backend reports end and committed positions after a restart",
                        "[conformance][stats][persistence]", stored_group_statistics_conformance_backends)
{
    // Not over Kafka: it lists only the groups opened in this process, as the 2.0.2 mock has no
    // ListGroups (docs/kafka.md, "Statistics").
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    const conformance_topic<int> spec{.name = "restarted", .partitions = 1};
    {
        asio::io_context io;
        bq::buffer_queue queue{io.get_executor()};
        backend.add_topic(queue, spec);
        auto consumer = queue.create_pull_consumer<int>(manual("restarted", "g", 2));
        REQUIRE(queue.producer<int>("restarted").try_produce(std::vector<int>{1, 2, 3, 4, 5}));
        // consume(): a process-shared topic's consumer gets its partition once it leased it.
        CHECK(consumed_items(consumer, io) == std::vector<int>{1, 2});
        REQUIRE_FALSE(commit_now(consumer, io));
    }
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue, spec);
    const bq::topic_stats stats = queue.stats<int>("restarted");
    CHECK(stats.partitions[0].end == 5);
    const bq::group_stats* group = group_named(stats, "g");
    REQUIRE(group != nullptr);  // known from storage: no consumer opened it in this run
    CHECK(group->partitions[0].committed == 2);
    CHECK(group->lag == 3);
}

}  // namespace stats_conformance_test
