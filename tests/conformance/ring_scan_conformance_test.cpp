// Conformance, ring scan: one consumer over several readable partitions gets one pull from each per
// rotation, so a busy partition cannot starve the others.
#include "conformance/conformance_support.hpp"

#include <bufferqueue/bufferqueue.hpp>

#include <cstddef>
#include <map>
#include <set>
#include <span>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace ring_scan_conformance_test {

using namespace conformance;

TEMPLATE_LIST_TEST_CASE("conformance: a consumer pulls from every readable partition once per rotation",
                        "[conformance][ring]", immediate_conformance_backends)
{
    // Not over Kafka: it needs every partition readable from the first pull on, and a Kafka record is
    // readable once the group member fetched it; the partitions are fetched independently, so the
    // first rotation may find one not fetched yet (docs/kafka.md, "Pull consumers").
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    const bool auto_commit = GENERATE(false, true);
    INFO("auto_commit " << auto_commit);
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(
        queue, conformance_topic<int>{.name = "ring", .partitions = 3, .partition_key = partition_by_block(1000)});
    auto producer = queue.producer<int>("ring");
    auto consumer = queue.create_pull_consumer<int>(auto_commit ? automatic("ring", "g", 5) : manual("ring", "g", 5));

    // Partition 0 is busy (100 items, 20 batches); partitions 1 and 2 hold 10 items (2 batches) each.
    REQUIRE(producer.try_produce(std::span<const int>(range(0, 100))));
    REQUIRE(producer.try_produce(std::span<const int>(range(1000, 1010))));
    REQUIRE(producer.try_produce(std::span<const int>(range(2000, 2010))));

    // Takes one batch (committing it under manual commit) and returns its partition.
    std::map<std::size_t, std::vector<int>> by_partition;
    const auto pull = [&]() -> asio::awaitable<std::size_t> {
        const bq::batch<int> delivered = co_await consumer.consume();
        REQUIRE(delivered.size() == 5);
        auto& items = by_partition[delivered.partition()];
        items.insert(items.end(), delivered.begin(), delivered.end());
        if (!auto_commit) {
            co_await consumer.commit();
        }
        co_return delivered.partition();
    };
    run_coroutine(io, [&]() -> asio::awaitable<void> {
        std::vector<std::size_t> pulls;
        for (int index = 0; index < 22; ++index) {
            pulls.push_back(co_await pull());
        }
        // Two full rotations while all three are readable: each partition once in each.
        CHECK(std::set<std::size_t>(pulls.begin(), pulls.begin() + 3) == std::set<std::size_t>{0, 1, 2});
        CHECK(std::set<std::size_t>(pulls.begin() + 3, pulls.begin() + 6) == std::set<std::size_t>{0, 1, 2});
        // Then only the busy partition is left.
        CHECK(std::vector<std::size_t>(pulls.begin() + 6, pulls.end()) == std::vector<std::size_t>(16, 0));
        CHECK(by_partition[0] == range(0, 90));
        CHECK(by_partition[1] == range(1000, 1010));
        CHECK(by_partition[2] == range(2000, 2010));

        // Data arriving at an empty partition is pulled on its turn: after a pull from 0 the scan
        // starts at 1 (empty) and reaches 2 before 0 again.
        REQUIRE(producer.try_produce(std::span<const int>(range(2010, 2015))));
        const std::size_t after_busy = co_await pull();
        CHECK(after_busy == 2);
        const std::size_t then = co_await pull();
        CHECK(then == 0);
        CHECK(by_partition[0] == range(0, 95));
        CHECK(by_partition[2] == range(2000, 2015));
    });
}

}  // namespace ring_scan_conformance_test
