// The test backend (test_backend.hpp, public headers only) behind an unchanged registry:
// producers, pull and push consumers, commit and replay, bounds and waiting, close, and records
// appended from outside the process's producers waking a waiting consume.
#include "storage/test_backend/test_backend.hpp"

#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/push_consumer.hpp"
#include "catch.hpp"
#include "queue_test_support.hpp"
#include "storage/test_backend/test_backend_fixture.hpp"
#include "test_support.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace test_backend_test {

namespace {

namespace bq = bufferqueue;
namespace tb = bufferqueue_test_backend;
using namespace std::chrono_literals;
using bufferqueue::test::run_until;

void rethrow_failure(std::exception_ptr failure)
{
    if (failure) {
        std::rethrow_exception(failure);
    }
}

bq::pull_consumer_options options_of(std::string topic, std::string group, bool auto_commit, std::size_t batch_size)
{
    return {.topic = std::move(topic), .group = std::move(group), .auto_commit = auto_commit, .batch_size = batch_size};
}

// Everything `consumer` can read now, batch by batch (auto-commit consumers).
template <class T>
std::vector<T> drain(bq::pull_consumer<T>& consumer)
{
    std::vector<T> items;
    while (std::optional<bq::batch<T>> delivered = consumer.try_consume()) {
        items.insert(items.end(), delivered->begin(), delivered->end());
    }
    return items;
}

// A fixture spec with the fields of the conformance suite's `conformance_topic<T>`.
template <class T>
struct spec_topic {
    std::string name;
    std::size_t partitions = 1;
    bq::key_selector<T> partition_key{};
    std::optional<std::size_t> bounded_capacity{};
    bq::full_mode full_mode = bq::full_mode::wait;
};

}  // namespace

TEST_CASE("test backend: a topic registers with add_topic, and bad options and duplicates are refused",
          "[test_backend][registry]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(tb::test_backend_topic_options<int>{.name = "numbers", .partitions = 3});
    queue.add_topic(tb::test_backend_topic_options<std::string>{.name = "numbers"});  // another item type

    const auto duplicate =
        bufferqueue::test::error_from([&] { queue.add_topic(tb::test_backend_topic_options<int>{.name = "numbers"}); });
    REQUIRE(duplicate);
    CHECK(duplicate->code() == bq::errc::topic_exists);

    const auto unnamed = bufferqueue::test::error_from([&] { queue.add_topic(tb::test_backend_topic_options<int>{}); });
    REQUIRE(unnamed);
    CHECK(unnamed->code() == bq::errc::invalid_argument);
    CHECK(std::string(unnamed->what()).find("test backend topic '': option 'name'") != std::string::npos);

    const auto no_partitions = bufferqueue::test::error_from(
        [&] { queue.add_topic(tb::test_backend_topic_options<int>{.name = "empty", .partitions = 0}); });
    REQUIRE(no_partitions);
    CHECK(no_partitions->code() == bq::errc::invalid_argument);

    CHECK(queue.create_pull_consumer<int>(options_of("numbers", "g", true, 10)).partitions().size() == 3);
    queue.close();
    const auto closed =
        bufferqueue::test::error_from([&] { queue.add_topic(tb::test_backend_topic_options<int>{.name = "late"}); });
    REQUIRE(closed);
    CHECK(closed->code() == bq::errc::closed);
}

TEST_CASE("test backend: producers route round-robin and by key, and pull consumers read every partition",
          "[test_backend][producer][consumer]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(tb::test_backend_topic_options<int>{.name = "spread", .partitions = 3});
    queue.add_topic(tb::test_backend_topic_options<int>{
        .name = "keyed", .partitions = 4, .partition_key = bq::key_selector<int>([](int value) { return value % 2; })});
    auto spread = queue.create_pull_consumers<int>(options_of("spread", "g", true, 100), 3);
    auto keyed = queue.create_pull_consumer<int>(options_of("keyed", "g", true, 100));

    auto producer = queue.producer<int>("spread");
    const std::vector<int> batch{0, 1, 2, 3, 4, 5, 6};
    boost::asio::co_spawn(
        io,
        [&]() -> boost::asio::awaitable<void> {
            co_await producer.produce(std::span<const int>(batch));
            co_await producer.produce(7);
        },
        rethrow_failure);
    io.run();
    CHECK(drain(spread[0]) == std::vector<int>{0, 3, 6});
    CHECK(drain(spread[1]) == std::vector<int>{1, 4, 7});
    CHECK(drain(spread[2]) == std::vector<int>{2, 5});

    auto by_key = queue.producer<int>("keyed");
    REQUIRE(by_key.try_produce(std::vector<int>{1, 2, 3, 4, 5, 6}));
    std::vector<std::vector<int>> partitions(4);
    while (std::optional<bq::batch<int>> delivered = keyed.try_consume()) {
        auto& into = partitions.at(delivered->partition());
        into.insert(into.end(), delivered->begin(), delivered->end());
    }
    // Equal keys reach one partition, in input order.
    CHECK(partitions[bq::partition_for_key(0, 4)] == std::vector<int>{2, 4, 6});
    CHECK(partitions[bq::partition_for_key(1, 4)] == std::vector<int>{1, 3, 5});
}

TEST_CASE("test backend: an uncommitted batch is delivered again and a committed one is not", "[test_backend][commit]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(tb::test_backend_topic_options<int>{.name = "replay"});
    auto producer = queue.producer<int>("replay");
    REQUIRE(producer.try_produce(std::vector<int>{1, 2, 3, 4, 5}));

    const auto manual = options_of("replay", "g", false, 3);
    {
        auto consumer = queue.create_pull_consumer<int>(manual);
        const auto first = consumer.try_consume();
        REQUIRE(first);
        CHECK(std::vector<int>(first->begin(), first->end()) == std::vector<int>{1, 2, 3});
    }  // closed without committing
    {
        auto consumer = queue.create_pull_consumer<int>(manual);
        const auto again = consumer.try_consume();
        REQUIRE(again);
        CHECK(std::vector<int>(again->begin(), again->end()) == std::vector<int>{1, 2, 3});
        CHECK(bufferqueue::test::commit_now(consumer, io) == boost::system::error_code());
    }
    auto consumer = queue.create_pull_consumer<int>(manual);
    const auto rest = consumer.try_consume();
    REQUIRE(rest);
    CHECK(std::vector<int>(rest->begin(), rest->end()) == std::vector<int>{4, 5});

    // A new group starts at the oldest record still held: every group had committed past 1, 2, 3.
    auto other = queue.create_pull_consumer<int>(options_of("replay", "other", true, 10));
    CHECK(drain(other) == std::vector<int>{4, 5});
    CHECK(queue.remove_group<int>("replay", "missing") == false);
}

TEST_CASE("test backend: a bounded topic fails when full in fail mode and waits for room in wait mode",
          "[test_backend][capacity]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(tb::test_backend_topic_options<int>{
        .name = "failing", .partitions = 2, .bounded_capacity = 2, .full_mode = bq::full_mode::fail});
    queue.add_topic(tb::test_backend_topic_options<int>{.name = "waiting", .bounded_capacity = 2});

    auto failing_consumer = queue.create_pull_consumer<int>(options_of("failing", "g", false, 10));
    auto failing = queue.producer<int>("failing");
    REQUIRE(failing.try_produce(1));
    REQUIRE(failing.try_produce(2));
    CHECK_FALSE(failing.try_produce(3));
    CHECK(bufferqueue::test::produce_now(failing, 3, io) == bq::errc::queue_full);
    // Committing gives the room back.
    const auto delivered = failing_consumer.try_consume();
    REQUIRE(delivered);
    CHECK(delivered->size() == 1);
    CHECK(bufferqueue::test::commit_now(failing_consumer, io) == boost::system::error_code());
    CHECK(failing.try_produce(3));
    CHECK_FALSE(failing.try_produce(4));

    auto waiting_consumer = queue.create_pull_consumer<int>(options_of("waiting", "g", true, 1));
    auto waiting = queue.producer<int>("waiting");
    REQUIRE(waiting.try_produce(std::vector<int>{10, 11}));
    bool produced = false;
    waiting.produce(12, [&](boost::system::error_code error) {
        CHECK_FALSE(error);
        produced = true;
    });
    io.poll();
    io.restart();
    CHECK_FALSE(produced);                              // waits for room
    const auto first = waiting_consumer.try_consume();  // auto commit: the room comes back
    REQUIRE(first);
    CHECK(run_until(io, [&] { return produced; }));
    CHECK(drain(waiting_consumer) == std::vector<int>{11, 12});
}

TEST_CASE("test backend: a waiting consume completes when an item is produced and is aborted by close",
          "[test_backend][consumer][close]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(tb::test_backend_topic_options<int>{.name = "waits", .partitions = 2});
    auto consumer = queue.create_pull_consumer<int>(options_of("waits", "g", true, 10));
    auto producer = queue.producer<int>("waits");

    std::vector<int> received;
    boost::asio::co_spawn(
        io,
        [&]() -> boost::asio::awaitable<void> {
            const bq::batch<int> items = co_await consumer.consume();
            received.assign(items.begin(), items.end());
        },
        rethrow_failure);
    io.poll();
    io.restart();
    CHECK(received.empty());
    REQUIRE(producer.try_produce(42));
    CHECK(run_until(io, [&] { return !received.empty(); }));
    CHECK(received == std::vector<int>{42});

    boost::system::error_code aborted;
    bool completed = false;
    consumer.consume([&](boost::system::error_code error, bq::batch<int>) {
        aborted = error;
        completed = true;
    });
    io.poll();
    io.restart();
    CHECK_FALSE(completed);
    queue.close();
    CHECK(run_until(io, [&] { return completed; }));
    CHECK(aborted == boost::asio::error::operation_aborted);
    CHECK_THROWS_AS(producer.try_produce(1), bq::error);
}

TEST_CASE("test backend: records appended from outside, not through a producer, wake a waiting consume",
          "[test_backend][consumer][wake][concurrency]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    const auto log = std::make_shared<tb::test_backend_log<int>>();
    queue.add_topic(tb::test_backend_topic_options<int>{.name = "fed", .partitions = 2, .log = log});
    REQUIRE(log->attached() == 2);
    auto consumer = queue.create_pull_consumer<int>(options_of("fed", "g", false, 10));

    std::optional<bq::batch<int>> received;
    boost::asio::co_spawn(
        io, [&]() -> boost::asio::awaitable<void> { received = co_await consumer.consume(); }, rethrow_failure);
    io.poll();  // the consume finds nothing and waits
    io.restart();
    REQUIRE_FALSE(received);

    std::thread outside([&] {
        const std::vector<int> records{7, 8, 9};
        CHECK(log->publish(1, records));
    });
    outside.join();
    REQUIRE(run_until(io, [&] { return received.has_value(); }));
    CHECK(received->partition() == 1);
    CHECK(std::vector<int>(received->begin(), received->end()) == std::vector<int>{7, 8, 9});
    CHECK(bufferqueue::test::commit_now(consumer, io) == boost::system::error_code());

    // While another thread publishes continuously, a consumer receives everything, in order.
    std::vector<int> seen;
    bool done = false;
    boost::asio::co_spawn(
        io,
        [&]() -> boost::asio::awaitable<void> {
            while (seen.size() < 200) {
                const bq::batch<int> items = co_await consumer.consume();
                seen.insert(seen.end(), items.begin(), items.end());
                co_await consumer.commit();
            }
            done = true;
        },
        rethrow_failure);
    std::thread writer([&] {
        for (int value = 0; value < 200; ++value) {
            const int record = value;
            log->publish(0, std::span<const int>(&record, 1));
            if (value % 50 == 0) {
                std::this_thread::sleep_for(1ms);
            }
        }
    });
    const bool finished = run_until(io, [&] { return done; });
    writer.join();
    REQUIRE(finished);
    std::vector<int> expected(200);
    for (int value = 0; value < 200; ++value) {
        expected[static_cast<std::size_t>(value)] = value;
    }
    CHECK(seen == expected);
}

TEST_CASE("test backend: records published from outside hold no bounded capacity", "[test_backend][capacity][wake]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    const auto log = std::make_shared<tb::test_backend_log<int>>();
    queue.add_topic(tb::test_backend_topic_options<int>{
        .name = "mixed", .bounded_capacity = 1, .full_mode = bq::full_mode::fail, .log = log});
    auto consumer = queue.create_pull_consumer<int>(options_of("mixed", "g", true, 10));
    auto producer = queue.producer<int>("mixed");
    REQUIRE(log->publish(0, std::vector<int>{1, 2, 3}));
    REQUIRE(producer.try_produce(4));
    CHECK_FALSE(producer.try_produce(5));  // the one admitted item fills the topic
    CHECK(drain(consumer) == std::vector<int>{1, 2, 3, 4});
    // Committing the published records gave back only the produced item's room.
    REQUIRE(producer.try_produce(5));
    CHECK_FALSE(producer.try_produce(6));
    CHECK(drain(consumer) == std::vector<int>{5});
}

TEST_CASE("test backend: push consumers receive what is produced", "[test_backend][push]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(tb::test_backend_topic_options<int>{.name = "pushed", .partitions = 2});
    std::vector<int> handled;
    queue.add_push_consumer({.topic = "pushed", .group = "auto", .batch_size = 3, .concurrency = 2},
                            [&handled](bq::batch<int> items) -> boost::asio::awaitable<void> {
                                handled.insert(handled.end(), items.begin(), items.end());
                                co_return;
                            });
    std::size_t committed = 0;
    queue.add_push_consumer<int>({.topic = "pushed", .group = "manual", .lifetime = bq::lifetime::per_batch},
                                 [&committed](auto items, bq::committer& committer) -> boost::asio::awaitable<void> {
                                     co_await committer.commit();
                                     committed += items.size();
                                 });
    queue.start();
    auto producer = queue.producer<int>("pushed");
    REQUIRE(producer.try_produce(std::vector<int>{1, 2, 3, 4, 5, 6, 7}));
    CHECK(run_until(io, [&] { return handled.size() == 7 && committed == 7; }));
    bool stopped = false;
    queue.stop([&] { stopped = true; });
    CHECK(run_until(io, [&] { return stopped; }));
    std::sort(handled.begin(), handled.end());
    CHECK(handled == std::vector<int>{1, 2, 3, 4, 5, 6, 7});
}

TEST_CASE("test backend: a blocking partition is called on the queue's blocking pool, a non-blocking one inline",
          "[test_backend][blocking]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    const auto inline_log = std::make_shared<tb::test_backend_log<int>>();
    const auto blocking_log = std::make_shared<tb::test_backend_log<int>>();
    queue.add_topic(tb::test_backend_topic_options<int>{.name = "inline", .log = inline_log});
    queue.add_topic(tb::test_backend_topic_options<int>{.name = "blocking", .log = blocking_log, .blocking = true});
    auto inline_producer = queue.producer<int>("inline");
    auto blocking_producer = queue.producer<int>("blocking");
    auto blocking_consumer = queue.create_pull_consumer<int>(options_of("blocking", "g", false, 10));

    CHECK(bufferqueue::test::produce_now(inline_producer, 1, io) == boost::system::error_code());
    CHECK(inline_log->last_append_thread(0) == std::this_thread::get_id());
    CHECK(bufferqueue::test::produce_now(blocking_producer, 2, io) == boost::system::error_code());
    CHECK(blocking_log->last_append_thread(0) != std::this_thread::get_id());
    CHECK(blocking_log->last_append_thread(0) != std::thread::id());

    std::optional<bq::batch<int>> received;
    bool committed = false;
    boost::asio::co_spawn(
        io,
        [&]() -> boost::asio::awaitable<void> {
            received = co_await blocking_consumer.consume();
            co_await blocking_consumer.commit();
            committed = true;
        },
        rethrow_failure);
    REQUIRE(run_until(io, [&] { return committed; }));
    CHECK(std::vector<int>(received->begin(), received->end()) == std::vector<int>{2});
}

TEST_CASE("test backend: a network partition appends inline, and its topic reads on a pool of its own while the "
          "queue's shared pool is held by a stalled storage",
          "[test_backend][blocking]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    const auto stalled_log = std::make_shared<tb::test_backend_log<int>>();
    const auto network_log = std::make_shared<tb::test_backend_log<int>>();
    queue.add_topic(
        tb::test_backend_topic_options<int>{.name = "stalled", .partitions = 2, .log = stalled_log, .blocking = true});
    queue.add_topic(tb::test_backend_topic_options<int>{.name = "network", .log = network_log, .network = true});
    struct resume_on_exit {
        const std::shared_ptr<tb::test_backend_log<int>>& log;
        ~resume_on_exit() { log->resume_pulls(); }  // a failed check must not leave pool threads waiting
    } resume{stalled_log};

    // Both threads of the queue's shared blocking pool wait in a stalled pull.
    auto stalled_producer = queue.producer<int>("stalled");
    auto stalled_consumers = queue.create_pull_consumers<int>(options_of("stalled", "g", true, 10), 2);
    REQUIRE(stalled_producer.try_produce(std::vector<int>{1, 2}));  // one item per partition
    stalled_log->stall_pulls();
    std::size_t stalled_received = 0;
    for (auto& consumer : stalled_consumers) {
        consumer.consume([&](boost::system::error_code error, bq::batch<int> items) {
            CHECK_FALSE(error);
            stalled_received += items.size();
        });
    }
    REQUIRE(run_until(io, [&] { return stalled_log->stalled_pulls() == 2; }));

    // The network topic's produce calls its partition inline; its consume runs on its own pool.
    auto network_producer = queue.producer<int>("network");
    auto network_consumer = queue.create_pull_consumer<int>(options_of("network", "g", false, 10));
    boost::system::error_code produced = bq::errc::invalid_argument;
    bool produce_completed = false;
    network_producer.produce(5, [&](boost::system::error_code error) {
        produced = error;
        produce_completed = true;
    });
    REQUIRE(run_until(io, [&] { return produce_completed; }));  // io.run() would wait for the stalled consumes
    CHECK_FALSE(produced);
    CHECK(network_log->last_append_thread(0) == std::this_thread::get_id());
    std::optional<bq::batch<int>> received;
    bool committed = false;
    boost::asio::co_spawn(
        io,
        [&]() -> boost::asio::awaitable<void> {
            received = co_await network_consumer.consume();
            co_await network_consumer.commit();
            committed = true;
        },
        rethrow_failure);
    CHECK(run_until(io, [&] { return committed; }));
    CHECK(stalled_log->stalled_pulls() == 2);  // the shared pool is still held all along
    REQUIRE(received);
    CHECK(std::vector<int>(received->begin(), received->end()) == std::vector<int>{5});
    CHECK(network_log->last_pull_thread(0) != std::this_thread::get_id());
    CHECK(network_log->last_pull_thread(0) != std::thread::id());

    stalled_log->resume_pulls();
    CHECK(run_until(io, [&] { return stalled_received == 2; }));
}

TEST_CASE("test backend: a partition reports its statistics in items", "[test_backend][statistics]")
{
    tb::test_backend_partition<int> partition(nullptr, 0);
    auto& slow = partition.open_cursor("slow");
    auto& fast = partition.open_cursor("fast");
    const std::vector<int> items{1, 2, 3, 4};
    std::size_t appended = 0;
    partition.append(bq::item_source<int>{items.data(), items.size()}, appended);
    CHECK(appended == 4);
    CHECK(partition.end_items() == 4);
    CHECK(partition.earliest_items() == 0);

    const bq::pull_result<int> pulled = partition.pull(fast, 3);
    CHECK(pulled.items.size() == 3);
    CHECK(partition.commit(fast, pulled.next_offset) == 0);  // "slow" still holds every item
    CHECK(partition.committed_items(fast) == 3);
    CHECK(partition.committed_items(slow) == 0);
    CHECK(partition.commit(slow, 2) == 2);
    CHECK(partition.earliest_items() == 2);
    CHECK(partition.remove_group("slow") == 1);  // "fast" was at 3
    CHECK(partition.earliest_items() == 3);
    CHECK(partition.end_items() - partition.committed_items(fast) == 1);  // the lag
    partition.close();
    CHECK(partition.pull(fast, 10).items.empty());
    CHECK_THROWS_AS(partition.append(bq::item_source<int>{items.data(), 1}, appended), bq::error);
}

TEST_CASE("test backend: the conformance fixture registers the suite's topics", "[test_backend][conformance]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    tb::test_backend_fixture fixture;
    STATIC_REQUIRE(tb::test_backend_fixture::name == "test_backend");
    STATIC_REQUIRE(tb::test_backend_fixture::bounded);
    fixture.add_topic(queue, spec_topic<int>{.name = "suite", .partitions = 2, .bounded_capacity = 4});
    fixture.add_topic<std::string>(queue, spec_topic<std::string>{.name = "suite"});
    CHECK(queue.create_pull_consumer<int>(options_of("suite", "g", true, 10)).partitions().size() == 2);
    auto producer = queue.producer<int>("suite");
    REQUIRE(producer.try_produce(std::vector<int>{1, 2, 3, 4}));
    CHECK_FALSE(producer.try_produce(5));
    auto words = queue.producer<std::string>("suite");
    CHECK(words.try_produce(std::string("a")));
}

}  // namespace test_backend_test
