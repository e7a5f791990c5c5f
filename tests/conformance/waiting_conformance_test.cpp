// Conformance, waiting: a consume parked on an empty topic completes when a producer appends, and on
// bounded backends a produce waits for room (full_mode::wait) or fails with queue_full
// (full_mode::fail).
#include "conformance/conformance_support.hpp"

#include <bufferqueue/bufferqueue.hpp>

#include <boost/system/system_error.hpp>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <span>
#include <thread>
#include <utility>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace waiting_conformance_test {

using namespace conformance;

TEMPLATE_LIST_TEST_CASE("conformance: a consume waiting on an empty topic completes when a producer appends",
                        "[conformance][waiting]", conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(
        queue, conformance_topic<int>{.name = "idle", .partitions = 3, .partition_key = partition_by_block(100)});
    auto consumer = queue.create_pull_consumer<int>(manual("idle", "g"));
    auto producer = queue.producer<int>("idle");

    // Parks, then is woken by an append from this thread to any of its partitions (here the last).
    std::vector<int> received;
    std::size_t partition = 99;
    auto waiting = spawn(io, [&]() -> asio::awaitable<void> {
        const bq::batch<int> delivered = co_await consumer.consume();
        received.assign(delivered.begin(), delivered.end());
        partition = delivered.partition();
        co_await consumer.commit();
    });
    settle(io);
    REQUIRE_FALSE(waiting->finished);
    REQUIRE(producer.try_produce(201));
    REQUIRE(run_until(io, [&] { return waiting->finished; }));
    waiting->rethrow();
    CHECK(received == std::vector<int>{201});
    CHECK(partition == 2);

    // Parks again (nothing is left), then is woken by an awaited produce of a coroutine.
    received.clear();
    waiting = spawn(io, [&]() -> asio::awaitable<void> {
        const bq::batch<int> delivered = co_await consumer.consume();
        received.assign(delivered.begin(), delivered.end());
        partition = delivered.partition();
        co_await consumer.commit();
    });
    settle(io);
    REQUIRE_FALSE(waiting->finished);
    auto producing = spawn(io, [&]() -> asio::awaitable<void> {
        std::vector<int> items{5, 6};  // named: GCC 12 rejects an initializer list inside co_await
        co_await producer.produce(std::move(items));
    });
    REQUIRE(run_until(io, [&] { return waiting->finished && producing->finished; }));
    waiting->rethrow();
    producing->rethrow();
    CHECK(received == std::vector<int>{5, 6});
    CHECK(partition == 0);

    // And once more, woken by an append from another thread.
    received.clear();
    waiting = spawn(io, [&]() -> asio::awaitable<void> {
        const bq::batch<int> delivered = co_await consumer.consume();
        received.assign(delivered.begin(), delivered.end());
        partition = delivered.partition();
    });
    settle(io);
    REQUIRE_FALSE(waiting->finished);
    std::thread other([&producer] { (void)producer.try_produce(150); });
    REQUIRE(run_until(io, [&] { return waiting->finished; }));
    other.join();
    waiting->rethrow();
    CHECK(received == std::vector<int>{150});
    CHECK(partition == 1);
}

TEMPLATE_LIST_TEST_CASE("conformance: on a full bounded topic in wait mode a produce waits until a commit makes room",
                        "[conformance][waiting][bounded]", bounded_conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue,
                      conformance_topic<int>{
                          .name = "bounded", .partitions = 2, .bounded_capacity = 2, .full_mode = bq::full_mode::wait});
    auto consumer = queue.create_pull_consumer<int>(manual("bounded", "g", 10));
    auto producer = queue.producer<int>("bounded");
    REQUIRE(producer.try_produce(1));
    REQUIRE(producer.try_produce(2));
    CHECK_FALSE(producer.try_produce(9));  // full: try_produce never waits and stores nothing

    outcome waiting;
    producer.produce(3, waiting.handler());
    settle(io);
    CHECK_FALSE(waiting.code);

    // Reading without committing gives no room back.
    std::vector<int> seen = try_items(consumer);
    REQUIRE(seen.size() == 1);  // round-robin put one item in each partition
    settle(io);
    CHECK_FALSE(waiting.code);

    // Committing one item makes room for one: the waiting produce completes.
    REQUIRE_FALSE(commit_now(consumer, io));
    REQUIRE(run_until(io, [&] { return waiting.code.has_value(); }));
    CHECK_FALSE(*waiting.code);
    for (int round = 0; round < 2; ++round) {
        const std::vector<int> items = try_items(consumer);
        REQUIRE(items.size() == 1);
        seen.push_back(items.front());
        REQUIRE_FALSE(commit_now(consumer, io));
    }
    std::sort(seen.begin(), seen.end());
    CHECK(seen == std::vector<int>{1, 2, 3});
    CHECK_FALSE(consumer.try_consume().has_value());
}

TEMPLATE_LIST_TEST_CASE("conformance: on a full bounded topic in fail mode a produce fails with queue_full",
                        "[conformance][waiting][bounded]", bounded_conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue,
                      conformance_topic<int>{
                          .name = "strict", .partitions = 1, .bounded_capacity = 2, .full_mode = bq::full_mode::fail});
    auto consumer = queue.create_pull_consumer<int>(manual("strict", "g", 10));
    auto producer = queue.producer<int>("strict");
    REQUIRE(producer.try_produce(1));

    // A batch that does not fit is rejected whole, even though one item would.
    outcome batch;
    producer.produce(std::vector<int>{2, 3}, batch.handler());
    REQUIRE(run_until(io, [&] { return batch.code.has_value(); }));
    CHECK(*batch.code == bq::errc::queue_full);
    REQUIRE(producer.try_produce(2));
    CHECK_FALSE(producer.try_produce(3));
    CHECK(produce_now(producer, 3, io) == bq::errc::queue_full);
    std::optional<error_code> awaited;
    run_coroutine(io, [&]() -> asio::awaitable<void> {
        try {
            co_await producer.produce(4);
        } catch (const boost::system::system_error& failure) {
            awaited = failure.code();
        }
    });
    REQUIRE(awaited);
    CHECK(*awaited == bq::errc::queue_full);

    // Nothing rejected was stored; a commit makes room again. (consumed_items: also where the
    // consumer gets its partition later, from an outside group protocol.)
    CHECK(consumed_items(consumer, io, 2) == std::vector<int>{1, 2});
    REQUIRE_FALSE(commit_now(consumer, io));
    CHECK_FALSE(produce_now(producer, 5, io));
    CHECK(consumed_items(consumer, io) == std::vector<int>{5});
}

}  // namespace waiting_conformance_test
