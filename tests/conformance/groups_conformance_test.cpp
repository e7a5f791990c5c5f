// Conformance, consumer groups: every group sees every item, group names are unique while open,
// consumers split the partitions as documented, a reopened group resumes from its commit, and
// remove_group forgets a group.
#include "conformance/conformance_support.hpp"

#include <bufferqueue/bufferqueue.hpp>

#include <algorithm>
#include <cstddef>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace groups_conformance_test {

using namespace conformance;
using bufferqueue::test::error_from;

namespace {

std::vector<int> all_items(const std::map<std::size_t, std::vector<int>>& by_partition)
{
    std::vector<int> items;
    for (const auto& [partition, delivered] : by_partition) {
        items.insert(items.end(), delivered.begin(), delivered.end());
    }
    std::sort(items.begin(), items.end());
    return items;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("conformance: two consumer groups each receive every item", "[conformance][groups]",
                        conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue, conformance_topic<int>{.name = "shared", .partitions = 3});
    auto group_a = queue.create_pull_consumers<int>(manual("shared", "a", 4), group_size<TestType>(2));
    auto group_b = queue.create_pull_consumers<int>(automatic("shared", "b", 7), 1);
    auto producer = queue.producer<int>("shared");
    REQUIRE(producer.try_produce(std::span<const int>(range(0, 40))));

    // Group a reading everything first takes nothing away from group b.
    CHECK(all_items(collect(group_a, io, 40)) == range(0, 40));
    std::vector<int> seen_by_b;
    for (int round = 0; round < max_rounds && seen_by_b.size() < 40; ++round) {
        const std::vector<int> items = consumed_items(group_b.front(), io);  // auto commit
        seen_by_b.insert(seen_by_b.end(), items.begin(), items.end());
    }
    std::sort(seen_by_b.begin(), seen_by_b.end());
    CHECK(seen_by_b == range(0, 40));
    // And neither sees anything twice afterwards.
    CHECK(all_items(drain(group_a, io)).empty());
    CHECK(try_items(group_b.front()).empty());
}

TEMPLATE_LIST_TEST_CASE("conformance: creating a group while any of its consumers is open fails with group_exists",
                        "[conformance][groups]", conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue, conformance_topic<int>{.name = "unique", .partitions = 2});
    auto consumers = queue.create_pull_consumers<int>(manual("unique", "g"), 2);

    const auto twice = error_from([&] { (void)queue.create_pull_consumer<int>(manual("unique", "g")); });
    REQUIRE(twice);
    CHECK(twice->code() == bq::errc::group_exists);
    consumers[0].close();
    const auto half_open = error_from([&] { (void)queue.create_pull_consumers<int>(manual("unique", "g"), 2); });
    REQUIRE(half_open);
    CHECK(half_open->code() == bq::errc::group_exists);  // consumers[1] is still open
    // Another group name on the same topic is independent.
    CHECK_NOTHROW(queue.create_pull_consumer<int>(manual("unique", "other")));
    consumers[1].close();
    CHECK_NOTHROW(queue.create_pull_consumers<int>(manual("unique", "g"), 2));
}

TEMPLATE_LIST_TEST_CASE("conformance: a group's consumers split the partitions evenly and contiguously",
                        "[conformance][groups]", immediate_conformance_backends)
{
    // Not over Kafka: its group protocol, not bufferqueue's split, assigns the partitions, seconds
    // after the consumers are created (docs/kafka.md, "Pull consumers": "they start with no
    // partitions").
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    constexpr std::size_t partitions = 5;
    backend.add_topic(queue, conformance_topic<int>{
                                 .name = "split", .partitions = partitions, .partition_key = partition_by_block(100)});

    SECTION("the documented example: 5 partitions and 2 consumers give {0, 1, 2} and {3, 4}")
    {
        const auto consumers = queue.create_pull_consumers<int>(manual("split", "two"), 2);
        REQUIRE(consumers.size() == 2);
        CHECK(consumers[0].partitions() == std::vector<std::size_t>{0, 1, 2});
        CHECK(consumers[1].partitions() == std::vector<std::size_t>{3, 4});
    }

    SECTION("every count from 1 to the partition count: contiguous, ascending, sizes differ by at most one")
    {
        for (std::size_t count = 1; count <= partitions; ++count) {
            INFO(count << " consumers");
            const auto consumers =
                queue.create_pull_consumers<int>(manual("split", "n" + std::to_string(count)), count);
            REQUIRE(consumers.size() == count);
            std::size_t next = 0;
            std::size_t smallest = partitions;
            std::size_t largest = 0;
            for (const auto& consumer : consumers) {
                const auto& owned = consumer.partitions();
                REQUIRE_FALSE(owned.empty());
                for (const std::size_t partition : owned) {
                    CHECK(partition == next++);
                }
                smallest = std::min(smallest, owned.size());
                largest = std::max(largest, owned.size());
            }
            CHECK(next == partitions);
            CHECK(largest - smallest <= 1);
        }
    }

    SECTION("each consumer receives exactly the items of its own partitions")
    {
        auto consumers = queue.create_pull_consumers<int>(manual("split", "readers", 3), 2);
        auto producer = queue.producer<int>("split");
        std::vector<int> input;
        for (int partition = 0; partition < static_cast<int>(partitions); ++partition) {
            for (int seq = 0; seq < 4; ++seq) {
                input.push_back(partition * 100 + seq);
            }
        }
        REQUIRE(producer.try_produce(std::span<const int>(input)));
        for (auto& consumer : consumers) {
            const std::vector<std::size_t> owned = consumer.partitions();
            std::vector<int> expected;
            for (const std::size_t partition : owned) {
                for (int seq = 0; seq < 4; ++seq) {
                    expected.push_back(static_cast<int>(partition) * 100 + seq);
                }
            }
            const auto by_partition = drain(consumer, io);
            for (const auto& [partition, items] : by_partition) {
                CHECK(std::find(owned.begin(), owned.end(), partition) != owned.end());
            }
            CHECK(all_items(by_partition) == expected);
        }
    }
}

TEMPLATE_LIST_TEST_CASE("conformance: zero consumers or more consumers than partitions fail with too_many_consumers",
                        "[conformance][groups]", conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue, conformance_topic<int>{.name = "few", .partitions = 3});

    for (const std::size_t count : {std::size_t{0}, std::size_t{4}, std::size_t{100}}) {
        INFO(count << " consumers");
        const auto failure = error_from([&] { (void)queue.create_pull_consumers<int>(manual("few", "g"), count); });
        REQUIRE(failure);
        CHECK(failure->code() == bq::errc::too_many_consumers);
    }
    // The refused calls created nothing: the group is still new.
    CHECK(queue.create_pull_consumers<int>(manual("few", "g"), 3).size() == 3);
}

TEMPLATE_LIST_TEST_CASE("conformance: a group opened again after its consumers closed resumes from its commit",
                        "[conformance][groups][commit]", immediate_conformance_backends)
{
    // Not over Kafka: it needs consumer 0 to own partition 0 at once, and Kafka's group protocol
    // assigns the partitions seconds later, as its assignor decides (docs/kafka.md, "Pull
    // consumers"). Kafka resuming from the committed offsets: the persistence case (commit_conformance_test.cpp).
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(
        queue, conformance_topic<int>{.name = "resume", .partitions = 2, .partition_key = partition_by_block(100)});
    auto producer = queue.producer<int>("resume");
    REQUIRE(producer.try_produce(std::vector<int>{0, 1, 2, 3, 100, 101, 102, 103}));
    {
        auto consumers = queue.create_pull_consumers<int>(manual("resume", "g", 2), 2);
        REQUIRE(consumers[0].partitions() == std::vector<std::size_t>{0});
        CHECK(try_items(consumers[0]) == std::vector<int>{0, 1});
        REQUIRE_FALSE(commit_now(consumers[0], io));
        CHECK(try_items(consumers[0]) == std::vector<int>{2, 3});      // delivered, not committed
        CHECK(try_items(consumers[1]) == std::vector<int>{100, 101});  // delivered, not committed
        consumers[0].close();
        consumers[1].close();
        // Opened again - with another consumer count - while the closed handles still exist.
        auto again = queue.create_pull_consumer<int>(manual("resume", "g", 10));
        const auto by_partition = drain(again, io);
        CHECK(by_partition.at(0) == std::vector<int>{2, 3});
        CHECK(by_partition.at(1) == std::vector<int>{100, 101, 102, 103});
        // The closed handles report closed and do not disturb the reopened group.
        const auto closed = error_from([&] { (void)consumers[0].try_consume(); });
        REQUIRE(closed);
        CHECK(closed->code() == bq::errc::closed);
    }
    // Everything was committed by `again`, destroyed now: a third opening finds nothing left.
    auto last = queue.create_pull_consumer<int>(manual("resume", "g"));
    CHECK(try_items(last).empty());
    REQUIRE(producer.try_produce(4));
    CHECK(try_items(last) == std::vector<int>{4});
}

TEMPLATE_LIST_TEST_CASE("conformance: remove_group forgets a closed group and refuses an open one",
                        "[conformance][groups]", conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue, conformance_topic<int>{.name = "removable", .partitions = 1});
    // A group that never commits keeps every item held, so a new group starts at the first item.
    auto keeper = queue.create_pull_consumer<int>(manual("removable", "keeper"));
    auto producer = queue.producer<int>("removable");
    // Two produce requests: Kafka's mock cluster serves one request's records per fetch, so the first
    // batch a consumer gets may hold item 1 alone (as the run of 2026-12-03 found by chance).
    REQUIRE_FALSE(produce_now(producer, 1, io));
    REQUIRE(producer.try_produce(std::vector<int>{2, 3, 4}));

    auto consumer = queue.create_pull_consumer<int>(manual("removable", "g", 2));
    CHECK(consumed_items(consumer, io, 2) == std::vector<int>{1, 2});
    REQUIRE_FALSE(commit_now(consumer, io));

    const auto in_use = error_from([&] { (void)queue.remove_group<int>("removable", "g"); });
    REQUIRE(in_use);
    CHECK(in_use->code() == bq::errc::group_in_use);
    consumer.close();
    CHECK(queue.remove_group<int>("removable", "g"));
    CHECK_FALSE(queue.remove_group<int>("removable", "g"));        // nothing left to remove
    CHECK_FALSE(queue.remove_group<int>("removable", "unknown"));  // never existed
    // A group created later under the same name is new: it does not resume at the removed commit.
    auto fresh = queue.create_pull_consumer<int>(manual("removable", "g", 10));
    CHECK(consumed_items(fresh, io, 4) == std::vector<int>{1, 2, 3, 4});
    // The other group was not touched.
    CHECK(consumed_items(keeper, io, 4) == std::vector<int>{1, 2, 3, 4});
}

}  // namespace groups_conformance_test
