// Heap allocations of memory topics in steady state, counted by a replacement global operator new.
// The replacement serves the whole test executable: it forwards to malloc/free (which ASan
// intercepts, so its checks stay in force) and counts only on a thread that armed it. The TSan build
// leaves this file out: clang's static TSan runtime defines operator new itself.
#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/memory/memory_topic.hpp"

#include "catch.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstddef>
#include <cstdlib>
#include <exception>
#include <new>
#include <numeric>
#include <optional>
#include <span>
#include <thread>
#include <vector>

// The helpers and tests in a namespace of their own (the test files are compiled several at a time,
// tests/CMakeLists.txt); the replacement operators must stay global.
namespace allocation_test {

thread_local bool counting = false;
thread_local std::size_t counted_allocations = 0;
thread_local std::size_t counted_bytes = 0;

void* allocate(std::size_t size, std::size_t alignment)
{
    if (counting) {
        ++counted_allocations;
        counted_bytes += size;
    }
    if (size == 0) {
        size = 1;
    }
    void* memory = nullptr;
    if (alignment <= alignof(std::max_align_t)) {
        memory = std::malloc(size);
    } else {
        memory = std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
    }
    if (memory == nullptr) {
        throw std::bad_alloc();
    }
    return memory;
}

// Out of line: GCC would otherwise see the inlined replacement `operator delete` free a pointer from
// `operator new` and report a mismatch (-Wmismatched-new-delete).
[[gnu::noinline]] void release(void* memory) noexcept
{
    std::free(memory);
}

/// Counts the heap allocations the current thread makes while alive.
class allocation_counter {
public:
    allocation_counter()
    {
        counted_allocations = 0;
        counted_bytes = 0;
        counting = true;
    }
    allocation_counter(const allocation_counter&) = delete;
    allocation_counter& operator=(const allocation_counter&) = delete;
    ~allocation_counter() { counting = false; }

    std::size_t allocations() const noexcept { return counted_allocations; }
    std::size_t bytes() const noexcept { return counted_bytes; }
    void stop() noexcept { counting = false; }
};

}  // namespace allocation_test

void* operator new(std::size_t size)
{
    return allocation_test::allocate(size, 0);
}
void* operator new[](std::size_t size)
{
    return allocation_test::allocate(size, 0);
}
void* operator new(std::size_t size, std::align_val_t alignment)
{
    return allocation_test::allocate(size, static_cast<std::size_t>(alignment));
}
void* operator new[](std::size_t size, std::align_val_t alignment)
{
    return allocation_test::allocate(size, static_cast<std::size_t>(alignment));
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept
{
    try {
        return allocation_test::allocate(size, 0);
    } catch (...) {
        return nullptr;
    }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept
{
    try {
        return allocation_test::allocate(size, 0);
    } catch (...) {
        return nullptr;
    }
}
void operator delete(void* memory) noexcept
{
    allocation_test::release(memory);
}
void operator delete[](void* memory) noexcept
{
    allocation_test::release(memory);
}
void operator delete(void* memory, std::size_t) noexcept
{
    allocation_test::release(memory);
}
void operator delete[](void* memory, std::size_t) noexcept
{
    allocation_test::release(memory);
}
void operator delete(void* memory, std::align_val_t) noexcept
{
    allocation_test::release(memory);
}
void operator delete[](void* memory, std::align_val_t) noexcept
{
    allocation_test::release(memory);
}
void operator delete(void* memory, std::size_t, std::align_val_t) noexcept
{
    allocation_test::release(memory);
}
void operator delete[](void* memory, std::size_t, std::align_val_t) noexcept
{
    allocation_test::release(memory);
}

namespace allocation_test {

namespace bq = bufferqueue;

namespace {

std::vector<int> sequence(std::size_t count)
{
    std::vector<int> values(count);
    std::iota(values.begin(), values.end(), 0);
    return values;
}

/// One round: 300 single items and a 300-item span, then drains the consumer with try_consume.
std::size_t produce_and_drain(bq::producer<int>& producer, bq::pull_consumer<int>& consumer,
                              const std::vector<int>& items)
{
    for (std::size_t i = 0; i < 300; ++i) {
        REQUIRE(producer.try_produce(items[i]));
    }
    REQUIRE(producer.try_produce(std::span<const int>(items.data() + 300, 300)));
    std::size_t drained = 0;
    while (auto batch = consumer.try_consume()) {
        drained += batch->size();
    }
    return drained;
}

}  // namespace

TEST_CASE("allocation: the counting operator new sees an allocation of the armed thread only", "[allocation]")
{
    allocation_counter counter;
    // Through volatile pointers: the optimizer may otherwise elide a new-expression whose result is
    // only deleted (g++ 12 at -O1 did, and this test saw no allocation).
    int* volatile probe = new int(7);
    delete probe;
    CHECK(counter.allocations() == 1);
    CHECK(counter.bytes() == sizeof(int));
    std::size_t seen_by_other_thread = 0;
    std::thread other([&] {
        int* volatile elsewhere = new int(8);
        delete elsewhere;
        seen_by_other_thread = counted_allocations;
    });
    other.join();
    counter.stop();
    CHECK(seen_by_other_thread == 0);
}

TEST_CASE("allocation: memory topic: producing single items and spans and try_consume allocate nothing in "
          "steady state",
          "[allocation][memory]")
{
    for (const bool bounded : {false, true}) {
        CAPTURE(bounded);
        boost::asio::io_context io;
        bq::buffer_queue queue(io.get_executor());
        bq::memory_topic_options<int> options{.name = "steady", .partitions = 2};
        if (bounded) {
            options.bounded_capacity = 4096;
        }
        queue.add_topic(options);
        bq::producer<int> producer = queue.producer<int>("steady");
        bq::pull_consumer<int> consumer =
            queue.create_pull_consumer<int>({.topic = "steady", .group = "g", .auto_commit = true, .batch_size = 64});
        const std::vector<int> items = sequence(600);

        // Warm-up: fills the segment free lists and the thread-local buffers.
        for (int round = 0; round < 20; ++round) {
            REQUIRE(produce_and_drain(producer, consumer, items) == 600);
        }
        allocation_counter counter;
        std::size_t moved = 0;
        for (int round = 0; round < 50; ++round) {  // 30,000 items, about 15 segments per partition
            moved += produce_and_drain(producer, consumer, items);
        }
        counter.stop();
        CHECK(moved == 50 * 600);
        CHECK(counter.allocations() == 0);
    }
}

TEST_CASE("allocation: memory topic: co_await consume and commit of ready data allocate nothing in steady state",
          "[allocation][memory]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(bq::memory_topic_options<int>{.name = "ready", .partitions = 2});
    bq::producer<int> producer = queue.producer<int>("ready");
    bq::pull_consumer<int> consumer =
        queue.create_pull_consumer<int>({.topic = "ready", .group = "g", .auto_commit = false, .batch_size = 64});
    const std::vector<int> items = sequence(600);

    constexpr int warm_up_rounds = 20;
    constexpr int measured_rounds = 50;
    std::size_t allocations = 1;
    std::size_t moved = 0;
    std::exception_ptr failure;
    boost::asio::co_spawn(
        io,
        [&]() -> boost::asio::awaitable<void> {
            // Counting starts after the warm-up, inside this coroutine, so Asio's per-thread frame
            // cache has seen every frame size.
            std::optional<allocation_counter> counter;
            for (int round = 0; round < warm_up_rounds + measured_rounds; ++round) {
                if (round == warm_up_rounds) {
                    counter.emplace();
                }
                for (std::size_t i = 0; i < 300; ++i) {
                    producer.try_produce(items[i]);
                }
                producer.try_produce(std::span<const int>(items.data() + 300, 300));
                for (std::size_t round_received = 0; round_received < 600;) {
                    bq::batch<int> batch = co_await consumer.consume();
                    co_await consumer.commit();
                    round_received += batch.size();
                }
                moved += counter ? 600 : 0;
            }
            counter->stop();
            allocations = counter->allocations();
        },
        [&](std::exception_ptr error) { failure = error; });
    io.run();
    REQUIRE_FALSE(failure);
    CHECK(moved == measured_rounds * 600);
    CHECK(allocations == 0);
}

TEST_CASE("allocation: memory topic: a consume that has to wait allocates per wait, never per item",
          "[allocation][memory]")
{
    // Each wait allocates the type-erased completion that parks the handler (pull_consumer.hpp
    // documents it); the batch that ends the wait costs nothing more, whatever its size.
    auto allocations_per_wait = [](std::size_t items_per_wake) {
        boost::asio::io_context io;
        bq::buffer_queue queue(io.get_executor());
        queue.add_topic(bq::memory_topic_options<int>{.name = "wait", .partitions = 1});
        bq::producer<int> producer = queue.producer<int>("wait");
        bq::pull_consumer<int> consumer =
            queue.create_pull_consumer<int>({.topic = "wait", .group = "g", .auto_commit = true, .batch_size = 1000});
        const std::vector<int> items = sequence(items_per_wake);
        constexpr int warm_up_waits = 20;
        constexpr int waits = 200;
        std::size_t allocations = 0;
        std::size_t received = 0;
        std::exception_ptr failure;
        boost::asio::co_spawn(
            io,
            [&]() -> boost::asio::awaitable<void> {
                std::optional<allocation_counter> counter;
                for (int wait = 0; wait < warm_up_waits + waits; ++wait) {
                    if (wait == warm_up_waits) {
                        counter.emplace();
                    }
                    // The first consume suspends; the produce runs after it, from the io_context.
                    boost::asio::post(io, [&] { producer.try_produce(std::span<const int>(items)); });
                    for (std::size_t woken = 0; woken < items.size();) {
                        bq::batch<int> batch = co_await consumer.consume();
                        woken += batch.size();
                    }
                    received += counter ? items.size() : 0;
                }
                counter->stop();
                allocations = counter->allocations();
            },
            [&](std::exception_ptr error) { failure = error; });
        io.run();
        REQUIRE_FALSE(failure);
        REQUIRE(received == waits * items_per_wake);
        return static_cast<double>(allocations) / waits;
    };
    const double one_item = allocations_per_wait(1);
    const double many_items = allocations_per_wait(1000);
    CAPTURE(one_item, many_items);
    CHECK(one_item == many_items);
    CHECK(one_item <= 1.0);
}

TEST_CASE("allocation: memory topic: 1,000,000 pending ints take at most 1.25x their raw size plus a constant",
          "[allocation][memory]")
{
    constexpr std::size_t pending = 1'000'000;
    const std::vector<int> chunk = sequence(8192);
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(bq::memory_topic_options<int>{.name = "backlog", .partitions = 4});
    bq::producer<int> producer = queue.producer<int>("backlog");
    bq::pull_consumer<int> consumer = queue.create_pull_consumer<int>({.topic = "backlog", .group = "g"});

    allocation_counter counter;
    for (std::size_t produced = 0; produced < pending;) {
        const std::size_t count = std::min(chunk.size(), pending - produced);
        REQUIRE(producer.try_produce(std::span<const int>(chunk.data(), count)));
        produced += count;
    }
    counter.stop();
    const double raw = static_cast<double>(pending * sizeof(int));
    CAPTURE(counter.bytes(), counter.bytes() / raw);
    constexpr std::size_t constant = 64 * 1024;
    CHECK(static_cast<double>(counter.bytes()) <= 1.25 * raw + constant);
    CHECK(static_cast<double>(counter.bytes()) >= raw);  // the items are all held
}

}  // namespace allocation_test
