// The statistics API - buffer_queue::stats<T>(topic), buffer_queue::stats() and pull_consumer::lag() -
// over memory, mmap (across a restart and retention) and the test backend.
#include "bufferqueue/bufferqueue.hpp"

#include "catch.hpp"
#include "queue_test_support.hpp"
#include "storage/test_backend/test_backend.hpp"
#include "test_support.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace stats_test {

namespace {

namespace bq = bufferqueue;
using bq::test::commit_now;
using bq::test::error_from;
using bq::test::int_topic;
using bq::test::temporary_directory;

std::vector<int> numbers(int count)
{
    return bq::test::range(0, count);
}

const bq::group_stats& group_named(const bq::topic_stats& stats, const std::string& name)
{
    for (const bq::group_stats& group : stats.groups) {
        if (group.name == name) {
            return group;
        }
    }
    FAIL("no group '" << name << "' in the statistics of topic '" << stats.topic << "'");
    throw;  // unreachable
}

// Consumes (auto commit) and drops `batches` batches from `consumer`; returns how many items they held.
template <class T>
std::uint64_t take(bq::pull_consumer<T>& consumer, int batches)
{
    std::uint64_t items = 0;
    for (int each = 0; each < batches; ++each) {
        const auto delivered = consumer.try_consume();
        REQUIRE(delivered);
        items += delivered->size();
    }
    return items;
}

}  // namespace

TEST_CASE("a memory topic reports end, earliest, group lag and counters in items", "[stats][memory]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("orders", 2, 4));
    auto fast =
        queue.create_pull_consumer<int>({.topic = "orders", .group = "fast", .auto_commit = true, .batch_size = 3});
    auto idle =
        queue.create_pull_consumer<int>({.topic = "orders", .group = "idle", .auto_commit = true, .batch_size = 3});

    bq::topic_stats empty = queue.stats<int>("orders");
    CHECK(empty.topic == "orders");
    CHECK(empty.backend == "memory");
    CHECK(empty.item_type == "int");
    REQUIRE(empty.partitions.size() == 2);
    CHECK(empty.produced == 0);
    CHECK(empty.consumed == 0);
    REQUIRE(empty.groups.size() == 2);
    CHECK(group_named(empty, "idle").lag == 0);

    auto producer = queue.producer<int>("orders");
    REQUIRE(producer.try_produce(numbers(10)));      // round-robin: 5 per partition
    const std::uint64_t fast_taken = take(fast, 2);  // auto commit
    REQUIRE(fast_taken >= 4);

    const bq::topic_stats s = queue.stats<int>("orders");
    CHECK(s.partitions[0].partition == 0);
    CHECK(s.partitions[0].end == 5);
    CHECK(s.partitions[1].end == 5);
    CHECK(s.produced == 10);
    CHECK(s.consumed == fast_taken);
    const bq::group_stats& idle_group = group_named(s, "idle");
    CHECK(idle_group.lag == 10);
    REQUIRE(idle_group.partitions.size() == 2);
    CHECK(idle_group.partitions[1].committed == 0);
    CHECK(idle_group.partitions[1].lag == 5);
    CHECK_FALSE(idle_group.oldest_uncommitted_age);
    const bq::group_stats& fast_group = group_named(s, "fast");
    CHECK(fast_group.lag == 10 - fast_taken);
    CHECK(fast_group.partitions[0].committed + fast_group.partitions[1].committed == fast_taken);
    CHECK(fast.lag() == 10 - fast_taken);
    CHECK(idle.lag() == 10);
    CHECK(s.waiting_producers == 0);
    CHECK(s.waiting_consumers == 0);

    // Recycling moves earliest once every group committed past a segment (4 items each).
    std::uint64_t idle_taken = 0;
    std::uint64_t more_fast = 0;
    while (idle_taken < 10) {
        idle_taken += take(idle, 1);
    }
    while (fast_taken + more_fast < 10) {
        more_fast += take(fast, 1);
    }
    const bq::topic_stats later = queue.stats<int>("orders");
    CHECK(later.consumed == 20);  // both groups took all 10: counted per group
    CHECK(group_named(later, "idle").lag == 0);
    CHECK(later.partitions[0].earliest + later.partitions[1].earliest > 0);
    CHECK(later.partitions[0].earliest <= later.partitions[0].end);
}

TEST_CASE("the consumed counter keeps what a removed group committed", "[stats][memory]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("orders", 1));
    {
        auto consumer =
            queue.create_pull_consumer<int>({.topic = "orders", .group = "gone", .auto_commit = true, .batch_size = 4});
        REQUIRE(queue.producer<int>("orders").try_produce(numbers(6)));
        take(consumer, 1);
        consumer.close();
    }
    CHECK(queue.stats<int>("orders").consumed == 4);
    REQUIRE(queue.remove_group<int>("orders", "gone"));
    const bq::topic_stats s = queue.stats<int>("orders");
    CHECK(s.consumed == 4);
    CHECK(s.groups.empty());
}

TEST_CASE("statistics count waiting producers and waiting consumers", "[stats][memory]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    bq::memory_topic_options<int> options = int_topic("bounded", 2);
    options.bounded_capacity = 2;
    queue.add_topic(options);
    auto consumer = queue.create_pull_consumer<int>({.topic = "bounded", .group = "g", .batch_size = 10});
    bool consumed = false;
    consumer.consume([&](boost::system::error_code, bq::batch<int>) { consumed = true; });
    CHECK(queue.stats<int>("bounded").waiting_consumers == 1);  // one consumer, on both partitions

    auto producer = queue.producer<int>("bounded");
    REQUIRE(producer.try_produce(numbers(2)));
    io.poll();
    io.restart();
    REQUIRE(consumed);
    bool produced = false;
    producer.produce(7, [&](boost::system::error_code) { produced = true; });
    const bq::topic_stats s = queue.stats<int>("bounded");
    CHECK(s.waiting_producers == 1);
    CHECK(s.waiting_consumers == 0);
    REQUIRE(!commit_now(consumer, io));
    CHECK(produced);
    CHECK(queue.stats<int>("bounded").waiting_producers == 0);
}

TEST_CASE("statistics count a parked consumer of 1,024 partitions once, and an idle one not at all",
          "[stats][memory][ready_set]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("wide", 1024));
    auto consumers = queue.create_pull_consumers<int>({.topic = "wide", .group = "g", .auto_commit = true}, 2);
    for (auto& consumer : consumers) {
        CHECK_FALSE(consumer.try_consume());  // every partition found empty: the consumer watches them
    }
    CHECK(queue.stats<int>("wide").waiting_consumers == 0);  // nobody waits

    int completed = 0;
    for (auto& consumer : consumers) {
        consumer.consume([&](boost::system::error_code, bq::batch<int>) { ++completed; });
    }
    io.poll();
    io.restart();
    CHECK(completed == 0);
    CHECK(queue.stats<int>("wide").waiting_consumers == 2);  // each parked consumer once, over 512 partitions

    REQUIRE(queue.producer<int>("wide").try_produce(numbers(1024)));
    io.poll();
    io.restart();
    CHECK(completed == 2);
    CHECK(queue.stats<int>("wide").waiting_consumers == 0);
}

TEST_CASE("statistics of an unknown topic or the wrong item type fail naming the topic", "[stats][registry]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("orders", 1));
    const auto missing = error_from([&] { (void)queue.stats<int>("nowhere"); });
    REQUIRE(missing);
    CHECK(missing->code() == bq::errc::no_such_topic);
    CHECK_THAT(missing->what(), Catch::Matchers::Contains("nowhere"));
    const auto mismatch = error_from([&] { (void)queue.stats<std::string>("orders"); });
    REQUIRE(mismatch);
    CHECK(mismatch->code() == bq::errc::type_mismatch);
    CHECK_THAT(mismatch->what(), Catch::Matchers::Contains("orders"));
}

TEST_CASE("buffer_queue::stats() lists every topic with its backend", "[stats][registry][mmap]")
{
    temporary_directory directory;
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("b-memory", 3));
    queue.add_topic(bq::mmap_topic_options<int>{.name = "a-mmap", .data_directory = directory.path()});
    queue.add_topic(bufferqueue_test_backend::test_backend_topic_options<int>{.name = "c-test", .partitions = 2});
    queue.add_topic(bufferqueue_test_backend::test_backend_topic_options<std::string>{
        .name = "c-test", .partitions = 1, .blocking = true});

    const std::vector<bq::topic_stats> all = queue.stats();
    REQUIRE(all.size() == 4);
    CHECK(all[0].topic == "a-mmap");
    CHECK(all[0].backend == "mmap");
    CHECK(all[1].topic == "b-memory");
    CHECK(all[1].backend == "memory");
    CHECK(all[1].partitions.size() == 3);
    CHECK(all[2].topic == "c-test");
    CHECK(all[3].topic == "c-test");
    CHECK(all[2].backend != all[3].backend);
    CHECK((all[2].backend == "test" || all[2].backend == "test-blocking"));
}

TEST_CASE("a test backend topic reports through the same statistics", "[stats][test_backend]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bufferqueue_test_backend::test_backend_topic_options<int>{.name = "t", .partitions = 2});
    auto consumer = queue.create_pull_consumer<int>({.topic = "t", .group = "g", .auto_commit = true, .batch_size = 2});
    REQUIRE(queue.producer<int>("t").try_produce(numbers(8)));
    take(consumer, 1);
    const bq::topic_stats s = queue.stats<int>("t");
    CHECK(s.backend == "test");
    CHECK(s.produced == 8);
    CHECK(s.consumed == 2);
    CHECK(group_named(s, "g").lag == 6);
    CHECK(consumer.lag() == 6);
}

TEST_CASE("a persistent topic's end, earliest and committed survive a restart and retention", "[stats][mmap]")
{
    temporary_directory directory;
    // 4-byte json payloads ("123") in 8-byte-aligned records: a 128-byte segment holds a few records.
    const auto options = [&] {
        return bq::mmap_topic_options<int>{.name = "events",
                                           .partitions = 1,
                                           .data_directory = directory.path(),
                                           .segment_size = 128,
                                           .max_retained_consumed_segments = 0};
    };
    {
        boost::asio::io_context io;
        bq::buffer_queue queue{io.get_executor()};
        queue.add_topic(options());
        auto reader = queue.create_pull_consumer<int>(
            {.topic = "events", .group = "reader", .auto_commit = true, .batch_size = 100});
        auto lagging = queue.create_pull_consumer<int>(
            {.topic = "events", .group = "lagging", .auto_commit = true, .batch_size = 3});
        REQUIRE(queue.producer<int>("events").try_produce(numbers(20)));
        while (reader.try_consume()) {
        }
        take(lagging, 1);
        const bq::topic_stats s = queue.stats<int>("events");
        CHECK(s.backend == "mmap");
        CHECK(s.partitions[0].end == 20);
        CHECK(s.consumed == 23);
        CHECK(group_named(s, "reader").lag == 0);
        CHECK(group_named(s, "lagging").partitions[0].committed == 3);
        CHECK(group_named(s, "lagging").lag == 17);
        CHECK(lagging.lag() == 17);
    }
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(options());
    // No consumer opened yet: the groups come from disk.
    const bq::topic_stats reopened = queue.stats<int>("events");
    CHECK(reopened.partitions[0].end == 20);
    CHECK(reopened.produced == 20);
    CHECK(reopened.consumed == 0);  // counted per process
    REQUIRE(reopened.groups.size() == 2);
    CHECK(group_named(reopened, "lagging").partitions[0].committed == 3);
    CHECK(group_named(reopened, "lagging").lag == 17);
    CHECK(group_named(reopened, "reader").lag == 0);

    // Removing the lagging group lets retention delete the segments "reader" read past.
    REQUIRE(queue.remove_group<int>("events", "lagging"));
    auto reader =
        queue.create_pull_consumer<int>({.topic = "events", .group = "reader", .auto_commit = true, .batch_size = 100});
    REQUIRE(queue.producer<int>("events").try_produce(numbers(2)));
    REQUIRE(reader.try_consume());
    const bq::topic_stats retained = queue.stats<int>("events");
    CHECK(retained.partitions[0].end == 22);
    CHECK(retained.partitions[0].earliest > 0);
    CHECK(retained.partitions[0].earliest <= 22);
    CHECK(group_named(retained, "reader").partitions[0].committed == 22);
    CHECK(retained.consumed == 2);
    REQUIRE(retained.groups.size() == 1);
}

TEST_CASE("statistics snapshots run while producers and consumers work", "[stats][memory][concurrency]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("busy", 2, 64));
    auto consumer = queue.create_pull_consumer<int>({.topic = "busy", .group = "g", .auto_commit = true});
    constexpr int per_thread = 2'000;
    std::atomic<bool> producing{true};
    std::thread producer([&] {
        auto handle = queue.producer<int>("busy");
        for (int item = 0; item < per_thread; ++item) {
            handle.try_produce(item);
        }
        producing = false;
    });
    std::uint64_t consumed = 0;
    std::thread reader([&] {
        while (producing || consumed < per_thread) {
            if (const auto delivered = consumer.try_consume()) {
                consumed += delivered->size();
            }
        }
    });
    std::uint64_t last_produced = 0;
    std::uint64_t last_consumed = 0;
    bool monotonic = true;
    while (producing) {
        const bq::topic_stats s = queue.stats<int>("busy");
        monotonic = monotonic && s.produced >= last_produced && s.consumed >= last_consumed;
        monotonic = monotonic && s.groups.size() == 1 && s.groups[0].lag <= s.produced;
        last_produced = s.produced;
        last_consumed = s.consumed;
        (void)consumer.lag();
    }
    producer.join();
    reader.join();
    CHECK(monotonic);
    const bq::topic_stats s = queue.stats<int>("busy");
    CHECK(s.produced == per_thread);
    CHECK(s.consumed == per_thread);
    CHECK(s.groups[0].lag == 0);
}

}  // namespace stats_test
