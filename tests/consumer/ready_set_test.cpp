// Consumers owning many partitions (ready_set::threshold or more) pull only the partitions a
// producer marked since they were found empty: these tests check that nothing is missed that way -
// a partition found empty and produced to later is read, the ring stays fair, a waiting consume
// wakes, a reassignment rebuilds the marks, and producers on several threads lose nothing.
#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/consumer/detail/ready_set.hpp"
#include "bufferqueue/memory/memory_topic.hpp"
#include "bufferqueue/producer.hpp"
#include "bufferqueue/pull_consumer.hpp"
#include "storage/test_backend/test_backend.hpp"

#include "catch.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <utility>  // before the Asio coroutine headers (GCC 12)

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace ready_set_test {

namespace {

namespace asio = boost::asio;
namespace bq = bufferqueue;
namespace tb = bufferqueue_test_backend;

/// A hang guard, never a timing assertion: generous enough for ThreadSanitizer on a loaded machine.
constexpr auto hang_guard = std::chrono::seconds(60);

/// Adds topic "wide" of `count` partitions whose key sends value v to partition v % count.
void add_wide_topic(bq::buffer_queue& queue, std::size_t count)
{
    queue.add_topic(bq::memory_topic_options<int>{
        .name = "wide", .partitions = count, .partition_key = [count](const int& value) {
            return static_cast<std::int64_t>(static_cast<std::size_t>(value) % count) + 1;  // key k: partition k - 1
        }});
}

using bufferqueue::test::run_until;

std::vector<int> drain(bq::pull_consumer<int>& consumer, std::vector<std::size_t>* partitions = nullptr)
{
    std::vector<int> items;
    while (std::optional<bq::batch<int>> batch = consumer.try_consume()) {
        items.insert(items.end(), batch->begin(), batch->end());
        if (partitions != nullptr) {
            partitions->push_back(batch->partition());
        }
    }
    return items;
}

}  // namespace

TEST_CASE("a consumer owning 1,024 partitions reads a partition it found empty once an item is produced to it",
          "[consumer][memory][ready_set]")
{
    static_assert(bq::detail::ready_set::threshold <= 1024);
    asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    add_wide_topic(queue, 1024);
    auto producer = queue.producer<int>("wide");
    auto consumer = queue.create_pull_consumer<int>({.topic = "wide", .group = "g", .auto_commit = true});
    CHECK(drain(consumer).empty());  // every partition found empty
    // Partitions at word and block edges of the marks, and the ring's wrap.
    for (const int partition : {0, 63, 64, 65, 511, 700, 1023, 1, 0}) {
        REQUIRE(producer.try_produce(partition));
        std::vector<std::size_t> partitions;
        CHECK(drain(consumer, &partitions) == std::vector<int>{partition});
        CHECK(partitions == std::vector<std::size_t>{static_cast<std::size_t>(partition)});
    }
    // Items produced before the consumer first scans are found too.
    auto late = queue.create_pull_consumer<int>({.topic = "wide", .group = "late", .auto_commit = true});
    CHECK(drain(late).size() == 9);
}

TEST_CASE("the smallest set with marks, ready_set::threshold partitions, reads partitions it found empty, awaited "
          "too",
          "[consumer][memory][ready_set]")
{
    constexpr int partition_count = static_cast<int>(bq::detail::ready_set::threshold);
    asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    add_wide_topic(queue, partition_count);
    auto producer = queue.producer<int>("wide");
    auto consumer = queue.create_pull_consumer<int>({.topic = "wide", .group = "g", .auto_commit = true});
    CHECK(drain(consumer).empty());  // every partition found empty
    for (const int partition : {0, partition_count - 1, 1}) {
        REQUIRE(producer.try_produce(partition));
        CHECK(drain(consumer) == std::vector<int>{partition});
    }
    std::vector<int> received;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            const bq::batch<int> batch = co_await consumer.consume();
            received.assign(batch.begin(), batch.end());
        },
        asio::detached);
    io.run_for(std::chrono::milliseconds(20));
    CHECK(received.empty());  // waiting
    REQUIRE(producer.try_produce(partition_count - 2));
    REQUIRE(run_until(io, [&] { return !received.empty(); }));
    CHECK(received == std::vector<int>{partition_count - 2});
}

TEST_CASE("a consumer owning 1,024 partitions gives every readable partition one pull per rotation",
          "[consumer][memory][ready_set]")
{
    asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    add_wide_topic(queue, 1024);
    auto producer = queue.producer<int>("wide");
    auto consumer =
        queue.create_pull_consumer<int>({.topic = "wide", .group = "g", .auto_commit = true, .batch_size = 1});
    CHECK(drain(consumer).empty());
    for (int round = 0; round < 3; ++round) {
        for (const int partition : {5, 500, 1000}) {
            REQUIRE(producer.try_produce(partition + 1024 * round));
        }
    }
    std::vector<std::size_t> partitions;
    CHECK(drain(consumer, &partitions).size() == 9);
    CHECK(partitions == std::vector<std::size_t>{5, 500, 1000, 5, 500, 1000, 5, 500, 1000});
}

TEST_CASE("a consume awaited over 4,096 partitions wakes for an item produced to one of them",
          "[consumer][memory][ready_set]")
{
    asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    add_wide_topic(queue, 4096);
    auto producer = queue.producer<int>("wide");
    auto consumer = queue.create_pull_consumer<int>({.topic = "wide", .group = "g", .auto_commit = true});
    std::vector<int> received;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            for (int count = 0; count < 3; ++count) {
                const bq::batch<int> batch = co_await consumer.consume();
                received.insert(received.end(), batch.begin(), batch.end());
            }
        },
        asio::detached);
    io.run_for(std::chrono::milliseconds(50));
    CHECK(received.empty());  // waiting: every partition was found empty
    for (const int partition : {4000, 17, 4095}) {
        REQUIRE(producer.try_produce(partition));
        REQUIRE(run_until(io, [&] { return !received.empty() && received.back() == partition; }));
    }
    CHECK(received == std::vector<int>{4000, 17, 4095});
}

TEST_CASE("a consumer given the partitions of another reads all of them", "[consumer][test_backend][ready_set]")
{
    constexpr std::size_t partition_count = 600;  // 300 each: both above the threshold, 600 after
    asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    // The group protocol moves partitions only when the test says so.
    auto membership = std::make_shared<tb::test_backend_membership>(partition_count);
    membership->manual();
    queue.add_topic(tb::test_backend_topic_options<int>{
        .name = "wide",
        .partitions = partition_count,
        .partition_key = [](const int& value) { return static_cast<std::int64_t>(value % 600) + 1; },
        .membership = membership});
    std::vector<bq::pull_consumer<int>> consumers =
        queue.create_pull_consumers<int>({.topic = "wide", .group = "g", .auto_commit = true}, 2);
    membership->rebalance_now("g");  // 300 each, as a topic without outside membership splits them
    REQUIRE(consumers[0].partitions().size() == 300);
    auto producer = queue.producer<int>("wide");
    CHECK(drain(consumers[0]).empty());
    CHECK(drain(consumers[1]).empty());
    std::vector<std::size_t> second_half(300);
    std::iota(second_half.begin(), second_half.end(), std::size_t{300});
    membership->port().assign("g", 0, second_half);  // consumer 1 is idle: handed over at once
    REQUIRE(consumers[0].partitions().size() == partition_count);
    for (int value = 0; value < 600; ++value) {
        REQUIRE(producer.try_produce(value));
    }
    CHECK(drain(consumers[1]).empty());
    std::vector<int> received = drain(consumers[0]);
    std::sort(received.begin(), received.end());
    std::vector<int> expected(600);
    std::iota(expected.begin(), expected.end(), 0);
    CHECK(received == expected);
}

TEST_CASE("producers on two threads into 512 partitions and a consumer awaiting on two io_context threads: "
          "every item arrives once",
          "[consumer][memory][ready_set][concurrency]")
{
    constexpr int per_producer = 20000;
    constexpr std::size_t partition_count = 512;
    asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    add_wide_topic(queue, partition_count);
    auto producer = queue.producer<int>("wide");
    std::vector<bq::pull_consumer<int>> consumers =
        queue.create_pull_consumers<int>({.topic = "wide", .group = "g", .auto_commit = true, .batch_size = 16}, 2);
    std::vector<std::atomic<int>> seen(2 * per_producer);
    std::atomic<int> delivered{0};
    std::atomic<int> failures{0};
    for (bq::pull_consumer<int>& consumer : consumers) {
        asio::co_spawn(
            io,
            [&]() -> asio::awaitable<void> {
                while (delivered.load() < 2 * per_producer) {
                    boost::system::error_code error;
                    const bq::batch<int> batch =
                        co_await consumer.consume(asio::redirect_error(asio::use_awaitable, error));
                    if (error) {
                        if (error != bq::errc::closed && error != asio::error::operation_aborted) {
                            ++failures;
                        }
                        co_return;
                    }
                    for (const int value : batch) {
                        seen[static_cast<std::size_t>(value)].fetch_add(1);
                    }
                    delivered.fetch_add(static_cast<int>(batch.size()));
                }
            },
            asio::detached);
    }
    auto work = asio::make_work_guard(io);
    std::thread first([&io] { io.run(); });
    std::thread second([&io] { io.run(); });
    const auto produce = [&](int first_value) {
        std::minstd_rand random(static_cast<unsigned>(first_value) + 1);
        for (int value = first_value; value < first_value + per_producer; ++value) {
            if (!producer.try_produce(value)) {
                ++failures;  // an unbounded topic never refuses
            }
            if (random() % 64 == 0) {
                std::this_thread::yield();  // bursts and pauses: partitions go empty and fill again
            }
        }
    };
    std::thread producing([&] { produce(per_producer); });
    produce(0);
    producing.join();
    const auto deadline = std::chrono::steady_clock::now() + hang_guard;
    while (delivered.load() < 2 * per_producer && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHECK(delivered.load() == 2 * per_producer);
    for (bq::pull_consumer<int>& consumer : consumers) {
        consumer.close();
    }
    work.reset();
    io.stop();
    first.join();
    second.join();
    CHECK(failures.load() == 0);
    int twice = 0;
    int missing = 0;
    for (const std::atomic<int>& count : seen) {
        twice += count.load() > 1 ? 1 : 0;
        missing += count.load() == 0 ? 1 : 0;
    }
    CHECK(twice == 0);
    CHECK(missing == 0);
}

}  // namespace ready_set_test
