#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/memory/memory_topic.hpp"
#include "bufferqueue/topic/detail/capacity_gate.hpp"

#include "catch.hpp"
#include "test_support.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace capacity_test {

namespace {

namespace bq = bufferqueue;
using boost::system::error_code;
using bq::test::rethrow;

constexpr const char* topic_name = "bounded";

/// A capacity waiter that counts how it ended.
struct recording_waiter final : bq::detail::capacity_waiter {
    explicit recording_waiter(std::size_t requested) : capacity_waiter(requested) {}
    void granted() noexcept override { ++grants; }
    void aborted() noexcept override { ++aborts; }
    int grants = 0;
    int aborts = 0;
};

// Runs every handler that is ready now, without blocking; returns how many ran.
std::size_t drain(boost::asio::io_context& io)
{
    io.restart();
    return io.poll();
}

// The completion of a callback-token operation, once it ran.
struct outcome {
    std::optional<error_code> code;

    auto handler()
    {
        return [this](error_code ec) { code = ec; };
    }
};

// A memory topic of int named "bounded" with the given bound, and a producer for it.
struct bounded_topic {
    bounded_topic(std::size_t partitions, std::optional<std::size_t> capacity, bq::full_mode mode,
                  std::size_t segment_size = 1024)
        : queue(io.get_executor()), producer(register_topic(partitions, capacity, mode, segment_size))
    {
    }

    // A manual-commit group with a single consumer.
    bq::pull_consumer<int> consumer(const std::string& group, std::size_t batch_size = 100)
    {
        return queue.create_pull_consumer<int>({.topic = topic_name, .group = group, .batch_size = batch_size});
    }

    // A manual-commit group with `count` consumers.
    std::vector<bq::pull_consumer<int>> consumers(const std::string& group, std::size_t count,
                                                  std::size_t batch_size = 100)
    {
        return queue.create_pull_consumers<int>({.topic = topic_name, .group = group, .batch_size = batch_size}, count);
    }

    bool try_batch(const std::vector<int>& items) { return producer.try_produce(std::span<const int>(items)); }

    // Commits `consumer`'s latest batch and runs what the returned room wakes up.
    void commit(bq::pull_consumer<int>& consumer)
    {
        outcome committed;
        consumer.commit(committed.handler());
        drain(io);
        REQUIRE(committed.code);
        REQUIRE_FALSE(*committed.code);
    }

    boost::asio::io_context io;
    bq::buffer_queue queue;
    bq::producer<int> producer;

private:
    bq::producer<int> register_topic(std::size_t partitions, std::optional<std::size_t> capacity, bq::full_mode mode,
                                     std::size_t segment_size)
    {
        queue.add_topic(bq::memory_topic_options<int>{.name = topic_name,
                                                      .partitions = partitions,
                                                      .segment_size = segment_size,
                                                      .bounded_capacity = capacity,
                                                      .full_mode = mode});
        return queue.producer<int>(topic_name);
    }
};

// The next batch `consumer` delivers now (empty when nothing is readable). Without a commit in
// between, a manual-commit consumer delivers the same batch again, so this also peeks.
std::vector<int> next_batch(bq::pull_consumer<int>& consumer)
{
    const std::optional<bq::batch<int>> delivered = consumer.try_consume();
    return delivered ? std::vector<int>(delivered->begin(), delivered->end()) : std::vector<int>{};
}

using items = std::vector<int>;

}  // namespace

TEST_CASE("memory topic: in wait mode produce waits for room until a consumer commits", "[memory][capacity]")
{
    bounded_topic topic(1, 2, bq::full_mode::wait);
    auto consumer = topic.consumer("g", 1);
    REQUIRE(topic.producer.try_produce(1));
    REQUIRE(topic.producer.try_produce(2));

    outcome waiting;
    topic.producer.produce(3, waiting.handler());
    bool awaited = false;
    boost::asio::co_spawn(
        topic.io,
        [&]() -> boost::asio::awaitable<void> {
            co_await topic.producer.produce(4);
            awaited = true;
        },
        rethrow);
    drain(topic.io);
    CHECK_FALSE(waiting.code);
    CHECK_FALSE(awaited);
    CHECK(topic.io.poll() == 0);      // suspended, not spinning
    CHECK_FALSE(topic.io.stopped());  // the waiting operations keep the io_context busy

    // Reading without committing gives no room back.
    CHECK(next_batch(consumer) == items{1});
    drain(topic.io);
    CHECK_FALSE(waiting.code);
    CHECK_FALSE(awaited);

    // Each commit returns one item of room: the waiters go in one by one, in order.
    topic.commit(consumer);
    REQUIRE(waiting.code);
    CHECK_FALSE(*waiting.code);
    CHECK_FALSE(awaited);
    CHECK(next_batch(consumer) == items{2});
    topic.commit(consumer);
    CHECK(awaited);
    CHECK(next_batch(consumer) == items{3});
    topic.commit(consumer);
    CHECK(next_batch(consumer) == items{4});
    topic.commit(consumer);
    CHECK(next_batch(consumer).empty());
}

TEST_CASE("memory topic: in fail mode produce fails with queue_full and try_produce returns false",
          "[memory][capacity]")
{
    bounded_topic topic(2, 2, bq::full_mode::fail);
    auto consumer = topic.consumer("g");
    REQUIRE(topic.producer.try_produce(1));
    REQUIRE(topic.producer.try_produce(2));

    CHECK_FALSE(topic.producer.try_produce(3));
    outcome single;
    topic.producer.produce(3, single.handler());
    const items batch{4};
    outcome batched;
    topic.producer.produce(std::span<const int>(batch), batched.handler());
    std::optional<error_code> awaited;
    boost::asio::co_spawn(
        topic.io,
        [&]() -> boost::asio::awaitable<void> {
            try {
                co_await topic.producer.produce(5);
            } catch (const boost::system::system_error& failure) {
                awaited = failure.code();
            }
        },
        rethrow);
    drain(topic.io);
    REQUIRE(single.code);
    CHECK(*single.code == bq::errc::queue_full);
    REQUIRE(batched.code);
    CHECK(*batched.code == bq::errc::queue_full);
    REQUIRE(awaited);
    CHECK(*awaited == bq::errc::queue_full);

    // None of the rejected items was stored; after a commit there is room again.
    items seen = next_batch(consumer);
    topic.commit(consumer);
    const items second = next_batch(consumer);
    seen.insert(seen.end(), second.begin(), second.end());
    topic.commit(consumer);
    std::sort(seen.begin(), seen.end());
    CHECK(seen == items{1, 2});
    CHECK(next_batch(consumer).empty());
    outcome after_room;
    topic.producer.produce(6, after_room.handler());
    drain(topic.io);
    REQUIRE(after_room.code);
    CHECK_FALSE(*after_room.code);
}

TEST_CASE("memory topic: try_produce never waits, in either full mode", "[memory][capacity]")
{
    for (const bq::full_mode mode : {bq::full_mode::wait, bq::full_mode::fail}) {
        INFO((mode == bq::full_mode::wait ? "wait mode" : "fail mode"));
        bounded_topic topic(1, 2, mode);
        auto consumer = topic.consumer("g");
        REQUIRE(topic.try_batch({1, 2}));

        CHECK_FALSE(topic.producer.try_produce(3));
        CHECK_FALSE(topic.try_batch({4, 5}));
        CHECK_FALSE(topic.try_batch({6, 7, 8}));  // larger than the capacity
        CHECK(drain(topic.io) == 0);              // nothing was left waiting

        // When room returns, none of the rejected items shows up.
        CHECK(next_batch(consumer) == items{1, 2});
        topic.commit(consumer);
        CHECK(next_batch(consumer).empty());
        REQUIRE(topic.producer.try_produce(9));
        CHECK(next_batch(consumer) == items{9});
    }
}

TEST_CASE("memory topic: a batch no larger than the capacity is admitted whole or not at all", "[memory][capacity]")
{
    SECTION("wait mode waits until the whole batch fits")
    {
        // Two partitions, so that one consumer's commit returns only part of the room.
        bounded_topic topic(2, 5, bq::full_mode::wait);
        auto consumers = topic.consumers("g", 2);
        REQUIRE(topic.try_batch({1, 2, 3}));  // partition 0: 1, 3; partition 1: 2
        CHECK_FALSE(topic.try_batch({4, 5, 6}));

        const items batch{4, 5, 6, 7};
        outcome waiting;
        topic.producer.produce(std::span<const int>(batch), waiting.handler());
        drain(topic.io);
        CHECK_FALSE(waiting.code);

        CHECK(next_batch(consumers[1]) == items{2});
        topic.commit(consumers[1]);  // room 3 of the 4 needed
        CHECK_FALSE(waiting.code);
        CHECK(next_batch(consumers[1]).empty());
        CHECK(next_batch(consumers[0]) == items{1, 3});  // nothing of the batch is visible

        topic.commit(consumers[0]);  // room 5: admitted whole
        REQUIRE(waiting.code);
        CHECK_FALSE(*waiting.code);
        CHECK(next_batch(consumers[1]) == items{4, 6});
        CHECK(next_batch(consumers[0]) == items{5, 7});
    }
    SECTION("fail mode rejects a batch that does not fit now")
    {
        bounded_topic topic(2, 5, bq::full_mode::fail);
        auto consumers = topic.consumers("g", 2);
        REQUIRE(topic.try_batch({1, 2, 3}));
        CHECK_FALSE(topic.try_batch({4, 5, 6}));
        const items batch{4, 5, 6};
        outcome rejected;
        topic.producer.produce(std::span<const int>(batch), rejected.handler());
        drain(topic.io);
        REQUIRE(rejected.code);
        CHECK(*rejected.code == bq::errc::queue_full);
        CHECK(next_batch(consumers[0]) == items{1, 3});
        CHECK(next_batch(consumers[1]) == items{2});

        // Exactly the remaining room fits.
        CHECK(topic.try_batch({7, 8}));
        CHECK_FALSE(topic.producer.try_produce(9));
    }
}

TEST_CASE("memory topic: an oversized batch in wait mode is admitted in capacity-sized slices", "[memory][capacity]")
{
    bounded_topic topic(1, 3, bq::full_mode::wait);
    auto consumer = topic.consumer("g");
    const items batch{1, 2, 3, 4, 5, 6, 7};
    outcome produced;
    topic.producer.produce(std::span<const int>(batch), produced.handler());
    drain(topic.io);

    // The first slice is in, whole; the rest waits for room.
    CHECK_FALSE(produced.code);
    CHECK(next_batch(consumer) == items{1, 2, 3});
    topic.commit(consumer);
    CHECK_FALSE(produced.code);
    CHECK(next_batch(consumer) == items{4, 5, 6});
    topic.commit(consumer);
    REQUIRE(produced.code);
    CHECK_FALSE(*produced.code);
    CHECK(next_batch(consumer) == items{7});
    topic.commit(consumer);
    CHECK(next_batch(consumer).empty());

    // try_produce never waits, so it rejects an oversized batch even in wait mode.
    CHECK_FALSE(topic.try_batch({8, 9, 10, 11}));
    CHECK(next_batch(consumer).empty());
}

TEST_CASE("memory topic: an oversized batch in fail mode is rejected whole", "[memory][capacity]")
{
    bounded_topic topic(2, 3, bq::full_mode::fail);
    auto consumer = topic.consumer("g");
    const items batch{1, 2, 3, 4};
    outcome produced;
    topic.producer.produce(std::span<const int>(batch), produced.handler());
    drain(topic.io);
    REQUIRE(produced.code);
    CHECK(*produced.code == bq::errc::queue_full);
    CHECK_FALSE(topic.try_batch(batch));
    CHECK(next_batch(consumer).empty());  // not even the first three

    CHECK(topic.try_batch({1, 2, 3}));  // the whole capacity is still there
}

TEST_CASE("memory topic: capacity returns as the minimum committed position over all groups advances",
          "[memory][capacity]")
{
    // One partition, one segment: every release below happens inside a segment.
    bounded_topic topic(1, 4, bq::full_mode::fail);
    auto fast = topic.consumer("fast", 2);
    auto slow = topic.consumer("slow", 2);
    REQUIRE(topic.try_batch({1, 2, 3, 4}));
    CHECK_FALSE(topic.producer.try_produce(5));

    // One group committing everything returns nothing while the other has committed nothing.
    CHECK(next_batch(fast) == items{1, 2});
    topic.commit(fast);
    CHECK(next_batch(fast) == items{3, 4});
    topic.commit(fast);
    CHECK_FALSE(topic.producer.try_produce(5));

    // The slow group's partial commit returns exactly the items both groups are past.
    CHECK(next_batch(slow) == items{1, 2});
    topic.commit(slow);
    CHECK_FALSE(topic.try_batch({5, 6, 7}));
    CHECK(topic.try_batch({5, 6}));
    CHECK_FALSE(topic.producer.try_produce(7));

    CHECK(next_batch(slow) == items{3, 4});
    topic.commit(slow);
    CHECK(topic.try_batch({7, 8}));
    CHECK_FALSE(topic.producer.try_produce(9));

    // Now the fast group is the slow one.
    CHECK(next_batch(slow) == items{5, 6});
    topic.commit(slow);
    CHECK_FALSE(topic.producer.try_produce(9));
    CHECK(next_batch(fast) == items{5, 6});
    topic.commit(fast);
    CHECK(topic.producer.try_produce(9));
}

TEST_CASE("memory topic: capacity is topic-wide, shared by every partition", "[memory][capacity]")
{
    bounded_topic topic(3, 3, bq::full_mode::fail, 2);
    auto consumers = topic.consumers("g", 3);
    REQUIRE(topic.producer.try_produce(0));
    REQUIRE(topic.producer.try_produce(1));
    REQUIRE(topic.producer.try_produce(2));
    CHECK_FALSE(topic.producer.try_produce(3));  // partition 0 holds one item, yet the topic is full

    CHECK(next_batch(consumers[1]) == items{1});
    topic.commit(consumers[1]);  // room from partition 1 serves an item for partition 0
    CHECK(topic.producer.try_produce(3));
    CHECK_FALSE(topic.producer.try_produce(4));
}

TEST_CASE("memory topic: a group created later starts where capacity was released", "[memory][capacity]")
{
    bounded_topic topic(1, 10, bq::full_mode::fail);
    auto early = topic.consumer("early", 4);
    REQUIRE(topic.try_batch({1, 2, 3, 4, 5, 6}));
    CHECK(next_batch(early) == items{1, 2, 3, 4});
    topic.commit(early);

    // Items 1-4 still sit in the segment, but capacity was released for them: the late group
    // starts after them.
    auto late = topic.consumer("late", 100);
    CHECK(next_batch(late) == items{5, 6});

    // The late group holds capacity like any other.
    REQUIRE(topic.try_batch({7, 8, 9, 10, 11, 12, 13, 14}));
    CHECK_FALSE(topic.producer.try_produce(15));
    CHECK(next_batch(early) == items{5, 6, 7, 8});
    topic.commit(early);
    CHECK_FALSE(topic.producer.try_produce(15));  // the late group is still at item 5
    CHECK(next_batch(late) == items{5, 6, 7, 8, 9, 10, 11, 12, 13, 14});
    topic.commit(late);
    CHECK(topic.try_batch({15, 16, 17, 18}));  // both past item 8: four items of room
    CHECK_FALSE(topic.producer.try_produce(19));
}

TEST_CASE("memory topic: a group created later on an unbounded topic starts at the oldest item held",
          "[memory][capacity]")
{
    SECTION("nothing recycled yet: the late group reads everything")
    {
        bounded_topic topic(1, std::nullopt, bq::full_mode::wait, 4);
        auto early = topic.consumer("early", 4);
        REQUIRE(topic.try_batch({0, 1, 2, 3, 4, 5}));
        CHECK(next_batch(early) == items{0, 1, 2, 3});
        auto late = topic.consumer("late", 4);
        CHECK(next_batch(late) == items{0, 1, 2, 3});
    }
    SECTION("after a segment was recycled: the late group starts at the head segment")
    {
        bounded_topic topic(1, std::nullopt, bq::full_mode::wait, 4);
        auto early = topic.consumer("early", 4);
        REQUIRE(topic.try_batch({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
        CHECK(next_batch(early) == items{0, 1, 2, 3});
        topic.commit(early);
        CHECK(next_batch(early) == items{4, 5, 6, 7});
        topic.commit(early);  // segment [0, 4) is released; [4, 8) still backs the batch just read

        auto late = topic.consumer("late", 4);
        CHECK(next_batch(late) == items{4, 5, 6, 7});
        topic.commit(late);
        CHECK(next_batch(late) == items{8, 9});
        CHECK(next_batch(early) == items{8, 9});
    }
}

TEST_CASE("memory topic: a failed admission neither advances round-robin nor leaks capacity", "[memory][capacity]")
{
    for (const bq::full_mode mode : {bq::full_mode::wait, bq::full_mode::fail}) {
        INFO((mode == bq::full_mode::wait ? "wait mode" : "fail mode"));
        bounded_topic topic(4, 4, mode);
        auto consumers = topic.consumers("g", 4);
        REQUIRE(topic.producer.try_produce(0));  // partition 0; room 3 left

        CHECK_FALSE(topic.try_batch({10, 11, 12, 13}));      // no room for four
        CHECK_FALSE(topic.try_batch({20, 21, 22, 23, 24}));  // larger than the capacity
        if (mode == bq::full_mode::fail) {
            const items rejected{30, 31, 32, 33};
            const items oversized{40, 41, 42, 43, 44};
            outcome full;
            outcome too_large;
            topic.producer.produce(std::span<const int>(rejected), full.handler());
            topic.producer.produce(std::span<const int>(oversized), too_large.handler());
            drain(topic.io);
            REQUIRE(full.code);
            CHECK(*full.code == bq::errc::queue_full);
            REQUIRE(too_large.code);
            CHECK(*too_large.code == bq::errc::queue_full);
        }

        // Selection resumes at partition 1, and exactly the three free items of room are left.
        REQUIRE(topic.producer.try_produce(1));
        REQUIRE(topic.try_batch({2, 3}));
        CHECK_FALSE(topic.producer.try_produce(4));
        for (std::size_t partition = 0; partition < 4; ++partition) {
            INFO("partition " << partition);
            CHECK(next_batch(consumers[partition]) == items{static_cast<int>(partition)});
            topic.commit(consumers[partition]);
        }
        // Every item committed: the full capacity is back.
        CHECK(topic.try_batch({4, 5, 6, 7}));
        for (std::size_t partition = 0; partition < 4; ++partition) {
            CHECK(next_batch(consumers[partition]) == items{static_cast<int>(partition) + 4});
        }
    }
}

TEST_CASE("memory topic: closing the queue aborts a waiting produce with operation_aborted", "[memory][capacity]")
{
    bounded_topic topic(2, 2, bq::full_mode::wait);
    const items oversized{10, 11, 12, 13, 14};
    REQUIRE(topic.try_batch({1, 2}));

    outcome single;
    outcome batch;
    topic.producer.produce(3, single.handler());
    topic.producer.produce(std::span<const int>(oversized), batch.handler());
    std::optional<error_code> awaited;
    boost::asio::co_spawn(
        topic.io,
        [&]() -> boost::asio::awaitable<void> {
            try {
                co_await topic.producer.produce(4);
            } catch (const boost::system::system_error& failure) {
                awaited = failure.code();
            }
        },
        rethrow);
    drain(topic.io);
    CHECK_FALSE(single.code);
    CHECK_FALSE(batch.code);
    CHECK_FALSE(awaited);

    topic.queue.close();
    drain(topic.io);
    REQUIRE(single.code);
    CHECK(*single.code == boost::asio::error::operation_aborted);
    REQUIRE(batch.code);
    CHECK(*batch.code == boost::asio::error::operation_aborted);
    REQUIRE(awaited);
    CHECK(*awaited == boost::asio::error::operation_aborted);
    CHECK(topic.io.stopped());  // nothing keeps the io_context busy any more
}

TEST_CASE("memory topic: a topic without consumer groups never releases capacity", "[memory][capacity]")
{
    bounded_topic topic(1, 2, bq::full_mode::fail);
    // A group on a topic of the same name but another item type is a different buffer.
    topic.queue.add_topic(bq::memory_topic_options<long>{.name = topic_name, .bounded_capacity = 2});
    auto other = topic.queue.create_pull_consumer<long>({.topic = topic_name, .group = "g"});
    auto other_producer = topic.queue.producer<long>(topic_name);

    REQUIRE(topic.try_batch({1, 2}));
    REQUIRE(other_producer.try_produce(1L));
    REQUIRE(other.try_consume());
    outcome committed;
    other.commit(committed.handler());
    drain(topic.io);
    REQUIRE(committed.code);
    CHECK_FALSE(*committed.code);
    CHECK_FALSE(topic.producer.try_produce(3));

    // A group created now starts at the oldest item (nothing was released) and frees room by committing.
    auto late = topic.consumer("late");
    CHECK(next_batch(late) == items{1, 2});
    CHECK_FALSE(topic.producer.try_produce(3));
    topic.commit(late);
    CHECK(topic.try_batch({3, 4}));
}

TEST_CASE("memory topic: with a producer waiting for room, try_produce and a new produce queue behind it",
          "[memory][capacity]")
{
    bounded_topic topic(1, 3, bq::full_mode::wait);
    auto consumer = topic.consumer("readers", 1);
    REQUIRE(topic.try_batch({1, 2, 3}));

    outcome waiting;
    topic.producer.produce(items{4, 5, 6}, waiting.handler());
    drain(topic.io);
    REQUIRE_FALSE(waiting.code);

    // One item of room comes back: not enough for the waiting batch, and not for anyone behind it.
    REQUIRE(next_batch(consumer) == items{1});
    topic.commit(consumer);
    items expected{2, 3, 4, 5, 6};
    outcome later;
    SECTION("try_produce")
    {
        CHECK_FALSE(topic.producer.try_produce(99));
    }
    SECTION("produce")
    {
        topic.producer.produce(100, later.handler());
        drain(topic.io);
        CHECK_FALSE(later.code);
        expected.push_back(100);
    }

    // Reading on hands the room out in arrival order: the batch first, then what came later.
    std::vector<int> delivered;
    for (int round = 0; round < 10; ++round) {
        const items batch = next_batch(consumer);
        if (batch.empty()) {
            break;
        }
        delivered.insert(delivered.end(), batch.begin(), batch.end());
        topic.commit(consumer);
    }
    CHECK(delivered == expected);
    REQUIRE(waiting.code);
    CHECK_FALSE(*waiting.code);
    if (expected.size() == 6) {
        REQUIRE(later.code);
        CHECK_FALSE(*later.code);
    }
}

TEST_CASE("capacity gate: cancelling the head waiter hands the room to the waiters behind it", "[capacity]")
{
    bq::detail::capacity_gate gate(2);
    REQUIRE(gate.try_acquire(1));
    recording_waiter head(2);
    recording_waiter behind(1);
    REQUIRE_FALSE(gate.acquire_or_enqueue(head));
    REQUIRE_FALSE(gate.acquire_or_enqueue(behind));
    CHECK(behind.grants == 0);  // FIFO: the free unit waits for the head

    REQUIRE(gate.remove(head));
    CHECK(head.grants == 0);
    CHECK(behind.grants == 1);
    CHECK(gate.used() == 2);
    CHECK_FALSE(gate.remove(behind));  // already granted
}

// Failed on the code before the fix, 4 runs of 4 (3 to 34 miscounted rounds of 2,000,000): `settle`
// decremented the waiting count after unlocking, and a `close` in between (it stores the count of
// waiters still to settle) let the decrement wrap it to SIZE_MAX. Each round races one settle
// against one close.
TEST_CASE("capacity gate: a close racing the settle of the granted waiter leaves nobody counted as waiting",
          "[capacity][concurrency]")
{
    constexpr int rounds = 2'000'000;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);  // bounds the work only
    // Waits without burning a shared core for long: spins briefly, then yields.
    const auto wait_for = [](const std::atomic<int>& word, int value) {
        for (int spins = 0; word.load(std::memory_order_acquire) != value; ++spins) {
            if (spins > 1000) {
                std::this_thread::yield();
            }
        }
    };
    std::atomic<bq::detail::capacity_gate*> current{nullptr};
    std::atomic<int> started{0};   // the round the closer is to close
    std::atomic<int> finished{0};  // the round the closer has closed
    std::atomic<int> last_round{rounds};
    std::thread closer([&] {
        for (int round = 1; round <= last_round.load(std::memory_order_acquire); ++round) {
            wait_for(started, round);
            if (current.load(std::memory_order_acquire) != nullptr) {
                current.load(std::memory_order_acquire)->close();
            }
            finished.store(round, std::memory_order_release);
        }
    });
    int miscounted = 0;
    int set_up_failures = 0;
    int round = 1;
    for (; round <= rounds; ++round) {
        bq::detail::capacity_gate gate(1);
        recording_waiter waiter(1);
        // Counted, not REQUIREd: the closer thread waits for every round up to `last_round`.
        bool set_up = gate.try_acquire(1) && !gate.acquire_or_enqueue(waiter);
        gate.release(1);  // grants the waiter, which now has to settle
        set_up = set_up && waiter.grants == 1;
        set_up_failures += set_up ? 0 : 1;
        const bool last = round == rounds || std::chrono::steady_clock::now() > deadline;
        if (last) {
            last_round.store(round, std::memory_order_release);
        }
        current.store(&gate, std::memory_order_release);
        started.store(round, std::memory_order_release);
        gate.settle();
        wait_for(finished, round);
        current.store(nullptr, std::memory_order_release);
        miscounted += gate.waiting() != 0 ? 1 : 0;
        if (last) {
            break;
        }
    }
    closer.join();
    INFO(round << " rounds");
    CHECK(set_up_failures == 0);
    CHECK(miscounted == 0);
}

TEST_CASE("capacity gate: credits one thread holds never make another thread's acquisition fail while room is free",
          "[capacity]")
{
    constexpr std::size_t capacity = 4 * bq::detail::capacity_gate::refill_floor;
    bq::detail::capacity_gate gate(capacity);
    std::size_t taken_elsewhere = 0;
    std::thread other([&] {
        for (int index = 0; index < 3; ++index) {  // refills this thread's slot: it holds credits now
            taken_elsewhere += gate.try_acquire(1) ? 1 : 0;
        }
    });
    other.join();
    REQUIRE(taken_elsewhere == 3);
    CHECK(gate.used() == 3);  // the credits are not counted as used
    std::size_t taken_here = 0;
    while (gate.try_acquire(1)) {
        ++taken_here;
    }
    // Every unit of room went to an acquisition: none stayed behind in the other thread's slot.
    CHECK(taken_here == capacity - 3);
    CHECK(gate.used() == capacity);
    gate.release(capacity);
    CHECK(gate.used() == 0);
    CHECK(gate.try_acquire(capacity));  // all of it is free again, also for one acquisition
}

TEST_CASE("capacity gate: a batch that fits only with the room that credits hold is admitted at once", "[capacity]")
{
    constexpr std::size_t capacity = 4 * bq::detail::capacity_gate::refill_floor;
    bq::detail::capacity_gate gate(capacity);
    REQUIRE(gate.try_acquire(1));  // reserves credits for this thread
    REQUIRE(gate.try_acquire(capacity - 2 - bq::detail::capacity_gate::credit_chunk));
    recording_waiter waiter(bq::detail::capacity_gate::credit_chunk + 1);  // fits only with the credits
    CHECK(gate.acquire_or_enqueue(waiter));
    CHECK(gate.used() == capacity);
    CHECK(waiter.aborts == 0);
}

// The property bench_memory's bounded 12-thread row found broken while the credits were written
// (a try_produce refused while credits were on their way between a slot and the shared count).
// This test did not reproduce that race here; it checks the property on every run.
TEST_CASE("memory topic: producers on twelve threads fill a bounded topic to exactly its capacity with none "
          "refused, round after round",
          "[memory][capacity][concurrency]")
{
    constexpr int threads_count = 12;
    constexpr int per_thread = 700;
    constexpr std::size_t capacity = threads_count * per_thread;  // exactly what they produce
    static_assert(capacity > 4 * bq::detail::capacity_gate::refill_floor);
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(bq::memory_topic_options<int>{
        .name = topic_name, .partitions = 4, .bounded_capacity = capacity, .full_mode = bq::full_mode::fail});
    auto producer = queue.producer<int>(topic_name);
    auto consumer =
        queue.create_pull_consumer<int>({.topic = topic_name, .group = "g", .auto_commit = true, .batch_size = 1000});
    for (int round = 0; round < 200; ++round) {
        std::atomic<std::size_t> admitted{0};
        std::vector<std::thread> threads;
        for (int thread = 0; thread < threads_count; ++thread) {
            threads.emplace_back([&, thread] {
                for (int index = 0; index < per_thread; ++index) {
                    admitted += producer.try_produce(thread * per_thread + index) ? 1 : 0;
                }
            });
        }
        for (std::thread& each : threads) {
            each.join();
        }
        REQUIRE(admitted.load() == capacity);    // no produce was refused: the room was there
        REQUIRE_FALSE(producer.try_produce(0));  // and none beyond it
        std::size_t drained = 0;
        while (auto batch = consumer.try_consume()) {
            drained += batch->size();
        }
        REQUIRE(drained == capacity);
    }
}

TEST_CASE("memory topic: a produce waiting for room is cancelled through its stop_token and stores nothing",
          "[memory][capacity][cancellation]")
{
    bounded_topic topic(1, 2, bq::full_mode::wait);
    auto consumer = topic.consumer("readers");
    REQUIRE(topic.try_batch({1, 2}));

    std::stop_source stop;
    bq::producer<int> cancellable = topic.producer.with_cancellation(stop.get_token());
    outcome cancelled;
    cancellable.produce(3, cancelled.handler());
    outcome behind;
    topic.producer.produce(4, behind.handler());
    drain(topic.io);
    REQUIRE_FALSE(cancelled.code);

    stop.request_stop();
    drain(topic.io);
    REQUIRE(cancelled.code);
    CHECK(*cancelled.code == boost::asio::error::operation_aborted);
    CHECK_FALSE(behind.code);

    // The room goes to the producer behind it; the cancelled item never appears.
    REQUIRE(next_batch(consumer) == items{1, 2});
    topic.commit(consumer);
    REQUIRE(behind.code);
    CHECK_FALSE(*behind.code);
    CHECK(next_batch(consumer) == items{4});

    // A produce through the handle that has to wait after the stop completes at once; one that fits stores.
    topic.commit(consumer);
    CHECK(cancellable.try_produce(5));
    outcome fits;
    cancellable.produce(6, fits.handler());
    drain(topic.io);
    REQUIRE(fits.code);
    CHECK_FALSE(*fits.code);
    outcome late;
    cancellable.produce(7, late.handler());
    drain(topic.io);
    REQUIRE(late.code);
    CHECK(*late.code == boost::asio::error::operation_aborted);
    CHECK(next_batch(consumer) == items{5, 6});
}

TEST_CASE("memory topic: cancelling an oversized waiting batch keeps the slices already stored",
          "[memory][capacity][cancellation]")
{
    bounded_topic topic(1, 2, bq::full_mode::wait);
    auto consumer = topic.consumer("readers");
    std::stop_source stop;
    outcome result;
    topic.producer.with_cancellation(stop.get_token()).produce(items{1, 2, 3, 4, 5}, result.handler());
    drain(topic.io);
    REQUIRE(next_batch(consumer) == items{1, 2});
    topic.commit(consumer);
    REQUIRE(next_batch(consumer) == items{3, 4});
    REQUIRE_FALSE(result.code);

    stop.request_stop();
    drain(topic.io);
    REQUIRE(result.code);
    CHECK(*result.code == boost::asio::error::operation_aborted);
    topic.commit(consumer);
    CHECK(next_batch(consumer).empty());
    CHECK(topic.try_batch({6, 7}));
}

TEST_CASE("memory topic: cancelling the head waiting produce hands the free room to the produce behind it",
          "[memory][capacity][cancellation]")
{
    bounded_topic topic(1, 2, bq::full_mode::wait);
    auto consumer = topic.consumer("readers");
    REQUIRE(topic.producer.try_produce(1));

    std::stop_source stop;
    outcome head;
    topic.producer.with_cancellation(stop.get_token()).produce(items{2, 3}, head.handler());
    outcome behind;
    topic.producer.produce(4, behind.handler());
    drain(topic.io);
    REQUIRE_FALSE(head.code);
    REQUIRE_FALSE(behind.code);  // one unit is free, but FIFO keeps it for the head

    stop.request_stop();
    drain(topic.io);
    REQUIRE(head.code);
    CHECK(*head.code == boost::asio::error::operation_aborted);
    REQUIRE(behind.code);
    CHECK_FALSE(*behind.code);
    CHECK(next_batch(consumer) == items{1, 4});
}

TEST_CASE("memory topic: a produce granted room but not yet stored keeps its place before a later produce",
          "[memory][capacity]")
{
    // The waiting produce completes on an executor of its own, which has not run yet when the room
    // comes back: its items are admitted, not stored. A produce issued after it from the same thread
    // must not be stored ahead of it (FIFO: nobody barges).
    bounded_topic topic(1, 3, bq::full_mode::wait);
    auto consumer = topic.consumer("readers", 10);
    REQUIRE(topic.try_batch({1, 2, 3}));

    boost::asio::io_context elsewhere;
    outcome first;
    topic.producer.produce(4, boost::asio::bind_executor(elsewhere, first.handler()));
    drain(topic.io);
    drain(elsewhere);
    REQUIRE_FALSE(first.code);

    REQUIRE(next_batch(consumer) == items{1, 2, 3});
    topic.commit(consumer);  // three units come back; the waiting produce is granted one of them
    outcome second;
    topic.producer.produce(5, second.handler());
    CHECK_FALSE(topic.producer.try_produce(6));  // the granted produce has not stored: nobody barges
    drain(topic.io);
    drain(elsewhere);
    drain(topic.io);
    REQUIRE(first.code);
    CHECK_FALSE(*first.code);
    REQUIRE(second.code);
    CHECK_FALSE(*second.code);
    CHECK(next_batch(consumer) == items{4, 5});
}

TEST_CASE("memory topic: produces issued back to back on a full topic are stored in issue order while two threads "
          "store them and another commits",
          "[memory][capacity][concurrency]")
{
    // One thread issues every produce at once, without waiting; their completions run on a
    // two-thread pool, so the stores of granted produces run on either thread; the consumer
    // commits from a third. One partition and one lane: the delivered order is the stored order.
    constexpr int count = 3000;
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(bq::memory_topic_options<int>{.name = topic_name,
                                                  .partitions = 1,
                                                  .bounded_capacity = 8,
                                                  .full_mode = bq::full_mode::wait,
                                                  .producer_lanes = 1});
    auto producer = queue.producer<int>(topic_name);
    auto consumer = queue.create_pull_consumer<int>({.topic = topic_name, .group = "g", .batch_size = 5});
    boost::asio::io_context stores;
    std::atomic<int> completed{0};
    std::atomic<int> failed{0};
    for (int index = 0; index < count; ++index) {
        producer.produce(index, boost::asio::bind_executor(stores, [&](error_code ec) {
                             failed += ec ? 1 : 0;
                             ++completed;
                         }));
    }
    std::vector<std::thread> store_threads;
    for (int thread = 0; thread < 2; ++thread) {
        store_threads.emplace_back([&] { stores.run(); });
    }
    std::vector<int> delivered;
    std::thread reader([&] {
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (delivered.size() < std::size_t{count} && std::chrono::steady_clock::now() < give_up) {
            const std::optional<bq::batch<int>> batch = consumer.try_consume();
            if (!batch) {
                std::this_thread::yield();
                continue;
            }
            delivered.insert(delivered.end(), batch->begin(), batch->end());
            outcome committed;  // Catch2 assertions stay on the test's thread: counted here
            consumer.commit(committed.handler());
            while (!committed.code && std::chrono::steady_clock::now() < give_up) {
                drain(io);
            }
            failed += !committed.code || *committed.code ? 1 : 0;
        }
    });
    reader.join();
    for (std::thread& each : store_threads) {
        each.join();
    }
    CHECK(completed.load() == count);
    CHECK(failed.load() == 0);
    CHECK(delivered == bq::test::range(0, count));
}

}  // namespace capacity_test
