// Tests of the process-wide producer thread numbers that pick a thread's lane.
#include "bufferqueue/detail/thread_number.hpp"

#include "catch.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <set>
#include <thread>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace thread_number_test {

namespace {

namespace bq = bufferqueue;

TEST_CASE("thread numbers: a registry hands out the lowest free number and reuses a released one", "[thread_number]")
{
    bq::detail::thread_number_registry registry;
    CHECK(registry.acquire() == 0);
    CHECK(registry.acquire() == 1);
    CHECK(registry.acquire() == 2);
    registry.release(1);
    CHECK(registry.acquire() == 1);
    for (std::size_t expected = 3; expected < bq::detail::thread_number_registry::capacity; ++expected) {
        REQUIRE(registry.acquire() == expected);
    }
    CHECK(registry.acquire() == bq::detail::thread_number_registry::none);
    registry.release(700);
    CHECK(registry.acquire() == 700);
}

TEST_CASE("thread numbers: living threads hold distinct numbers and an exited thread's number is reused",
          "[thread_number]")
{
    const std::size_t mine = bq::detail::producer_thread_number();
    CHECK(bq::detail::producer_thread_number() == mine);  // stable for the thread's life

    std::size_t first = 0;
    std::size_t nested = 0;
    std::thread([&] {
        first = bq::detail::producer_thread_number();
        std::thread([&] { nested = bq::detail::producer_thread_number(); }).join();
    }).join();
    CHECK(first != mine);
    CHECK(nested != mine);
    CHECK(nested != first);
    CHECK(first < bq::detail::thread_number_registry::capacity);

    // Both threads have exited: the next thread takes the lowest free number again.
    std::size_t later = 0;
    std::thread([&] { later = bq::detail::producer_thread_number(); }).join();
    CHECK(later == std::min(first, nested));
}

TEST_CASE("thread numbers: the first lanes - 1 numbers own a lane and the others share the last",
          "[thread_number][concurrency]")
{
    CHECK(bq::detail::producer_lane(1) == 0);
    std::vector<std::size_t> lanes(6);
    std::vector<std::size_t> numbers(6);
    std::vector<std::thread> threads;
    std::atomic<int> arrived{0};
    for (std::size_t i = 0; i < lanes.size(); ++i) {
        threads.emplace_back([&, i] {
            numbers[i] = bq::detail::producer_thread_number();
            lanes[i] = bq::detail::producer_lane(4);
            arrived.fetch_add(1);
            while (arrived.load() < static_cast<int>(lanes.size())) {
                std::this_thread::yield();  // all six alive at once: six distinct numbers
            }
        });
    }
    for (std::thread& each : threads) {
        each.join();
    }
    CHECK(std::set<std::size_t>(numbers.begin(), numbers.end()).size() == numbers.size());
    for (std::size_t i = 0; i < lanes.size(); ++i) {
        CHECK(lanes[i] == (numbers[i] < 3 ? numbers[i] : 3));
    }
}

}  // namespace

}  // namespace thread_number_test
