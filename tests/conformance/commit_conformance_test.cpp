// Conformance, commit and replay: manual commit, redelivery of an uncommitted batch (to the same
// consumer and to a new consumer of the group), auto commit, the commit errors, and - on persistent
// backends - committed positions that survive a new buffer_queue.
#include "conformance/conformance_support.hpp"

#include <bufferqueue/bufferqueue.hpp>

#include <boost/system/system_error.hpp>

#include <cstddef>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace commit_conformance_test {

using namespace conformance;

namespace {

/// Awaits the consumer's next batch and copies its items out. (GCC 12 miscompiles a co_await inside
/// a Catch2 assertion, so the tests await first and assert on the result.)
template <class T>
asio::awaitable<std::vector<T>> next_items(bq::pull_consumer<T>& consumer)
{
    const bq::batch<T> delivered = co_await consumer.consume();
    co_return std::vector<T>(delivered.begin(), delivered.end());
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("conformance: manual commit advances the group and an uncommitted batch is delivered again",
                        "[conformance][commit]", conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue, conformance_topic<int>{.name = "manual", .partitions = 1});
    auto producer = queue.producer<int>("manual");
    auto consumer = queue.create_pull_consumer<int>(manual("manual", "g", 2));
    REQUIRE(producer.try_produce(std::span<const int>(range(1, 7))));

    // Each first delivery of a batch waits until it holds 2 items: over Kafka the mock serves one
    // produce request's records per fetch, and librdkafka may split the 6 items into several.
    std::vector<std::vector<int>> deliveries;
    const auto committed = [&] { run_coroutine(io, [&]() -> asio::awaitable<void> { co_await consumer.commit(); }); };
    deliveries.push_back(consumed_items(consumer, io, 2));
    run_coroutine(io, [&]() -> asio::awaitable<void> {
        // Not committed: the same batch again, as often as it is not committed.
        deliveries.push_back(co_await next_items(consumer));
        deliveries.push_back(co_await next_items(consumer));
        co_await consumer.commit();
    });
    deliveries.push_back(consumed_items(consumer, io, 2));
    committed();
    deliveries.push_back(consumed_items(consumer, io, 2));
    committed();
    CHECK(deliveries == std::vector<std::vector<int>>{{1, 2}, {1, 2}, {1, 2}, {3, 4}, {5, 6}});
    CHECK_FALSE(consumer.try_consume().has_value());
}

TEMPLATE_LIST_TEST_CASE("conformance: a batch delivered but not committed goes to the next consumer of the group",
                        "[conformance][commit]", conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue, conformance_topic<std::string>{.name = "replay", .partitions = 1});
    auto producer = queue.producer<std::string>("replay");
    REQUIRE(producer.try_produce(std::vector<std::string>{"a", "b", "c", "d", "e"}));
    {
        auto consumer = queue.create_pull_consumer<std::string>(manual("replay", "g", 2));
        CHECK(consumed_items(consumer, io, 2) == std::vector<std::string>{"a", "b"});
        REQUIRE_FALSE(commit_now(consumer, io));
        CHECK(consumed_items(consumer, io, 2) == std::vector<std::string>{"c", "d"});  // never committed
    }
    auto next = queue.create_pull_consumer<std::string>(manual("replay", "g", 2));
    CHECK(consumed_items(next, io, 2) == std::vector<std::string>{"c", "d"});
    REQUIRE_FALSE(commit_now(next, io));
    CHECK(consumed_items(next, io) == std::vector<std::string>{"e"});
}

TEMPLATE_LIST_TEST_CASE("conformance: auto commit commits each batch as it is pulled, so none is delivered again",
                        "[conformance][commit]", conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue, conformance_topic<int>{.name = "auto", .partitions = 1});
    auto producer = queue.producer<int>("auto");
    REQUIRE(producer.try_produce(std::span<const int>(range(1, 8))));
    std::size_t delivered_count = 0;
    {
        auto consumer = queue.create_pull_consumer<int>(automatic("auto", "g", 2));
        // Over Kafka a batch may hold fewer than 2 items (the mock serves one produce request's
        // records per fetch), so the check is on the items in order, not on the batches' sizes.
        std::vector<int> delivered;
        run_coroutine(io, [&]() -> asio::awaitable<void> {
            while (delivered.size() < 4) {
                // Each consume moves on: the previous batch is committed.
                const std::vector<int> items = co_await next_items(consumer);
                CHECK(items.size() <= 2);
                delivered.insert(delivered.end(), items.begin(), items.end());
            }
        });
        CHECK(delivered == range(1, 1 + static_cast<int>(delivered.size())));
        delivered_count = delivered.size();
    }
    // Also the last batch pulled was committed before it was handed out (at-most-once).
    auto reopened = queue.create_pull_consumer<int>(manual("auto", "g", 2));
    const int next = 1 + static_cast<int>(delivered_count);
    CHECK(consumed_items(reopened, io, 2) == std::vector<int>{next, next + 1});
}

TEMPLATE_LIST_TEST_CASE("conformance: commit fails with nothing_to_commit or auto_commit_enabled and moves nothing",
                        "[conformance][commit]", conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue, conformance_topic<int>{.name = "errors", .partitions = 1});
    auto producer = queue.producer<int>("errors");
    REQUIRE(producer.try_produce(std::span<const int>(range(1, 7))));

    SECTION("nothing_to_commit before any batch and after the latest batch was committed")
    {
        auto consumer = queue.create_pull_consumer<int>(manual("errors", "g", 2));
        CHECK(commit_now(consumer, io) == bq::errc::nothing_to_commit);
        CHECK(consumed_items(consumer, io, 2) == std::vector<int>{1, 2});
        CHECK_FALSE(commit_now(consumer, io));
        CHECK(commit_now(consumer, io) == bq::errc::nothing_to_commit);
        // An awaited commit throws the same code.
        std::optional<error_code> awaited;
        run_coroutine(io, [&]() -> asio::awaitable<void> {
            try {
                co_await consumer.commit();
            } catch (const boost::system::system_error& failure) {
                awaited = failure.code();
            }
        });
        REQUIRE(awaited);
        CHECK(*awaited == bq::errc::nothing_to_commit);
        // Nothing moved: the next batch follows the committed one.
        CHECK(consumed_items(consumer, io, 2) == std::vector<int>{3, 4});
    }

    SECTION("auto_commit_enabled on an auto-commit consumer, before and after a pull")
    {
        auto consumer = queue.create_pull_consumer<int>(automatic("errors", "g", 2));
        CHECK(commit_now(consumer, io) == bq::errc::auto_commit_enabled);
        // Items in order, batches of up to 2 (over Kafka a batch may hold 1: see the case above).
        const std::vector<int> first = consumed_items(consumer, io);
        CHECK(commit_now(consumer, io) == bq::errc::auto_commit_enabled);
        const std::vector<int> second = consumed_items(consumer, io);
        const int second_start = 1 + static_cast<int>(first.size());
        CHECK(first == range(1, second_start));
        CHECK(second == range(second_start, second_start + static_cast<int>(second.size())));
        CHECK(first.size() <= 2);
        CHECK(second.size() <= 2);
    }
}

TEMPLATE_LIST_TEST_CASE("conformance: committed positions and data survive a new buffer_queue over the same backend",
                        "[conformance][commit][persistence]", immediate_persistent_conformance_backends)
{
    // Not over Kafka: it needs consumer i to own partition i at once, and Kafka's group protocol
    // assigns the partitions seconds later, as its assignor decides (docs/kafka.md, "Pull
    // consumers"); the next case checks the same over Kafka with one consumer.
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    const conformance_topic<int> spec{.name = "durable", .partitions = 2, .partition_key = partition_by_block(100)};
    {
        asio::io_context io;
        bq::buffer_queue queue{io.get_executor()};
        backend.add_topic(queue, spec);
        auto consumers = queue.create_pull_consumers<int>(manual("durable", "g", 2), 2);
        REQUIRE(queue.producer<int>("durable").try_produce(std::vector<int>{0, 1, 2, 3, 4, 100, 101, 102}));
        CHECK(try_items(consumers[0]) == std::vector<int>{0, 1});
        REQUIRE_FALSE(commit_now(consumers[0], io));
        CHECK(try_items(consumers[0]) == std::vector<int>{2, 3});  // delivered, not committed
        CHECK(try_items(consumers[1]) == std::vector<int>{100, 101});
        REQUIRE_FALSE(commit_now(consumers[1], io));
        CHECK(try_items(consumers[1]) == std::vector<int>{102});
        REQUIRE_FALSE(commit_now(consumers[1], io));
    }
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue, spec);
    // The group resumes where it committed, in each partition; the uncommitted batch comes again.
    auto resumed = queue.create_pull_consumers<int>(manual("durable", "g", 10), 2);
    CHECK(drain(resumed, io) == std::map<std::size_t, std::vector<int>>{{0, {2, 3, 4}}});
    // A group new in this run reads everything that was stored.
    auto fresh = queue.create_pull_consumer<int>(manual("durable", "new", 10));
    CHECK(drain(fresh, io) == std::map<std::size_t, std::vector<int>>{{0, {0, 1, 2, 3, 4}}, {1, {100, 101, 102}}});
    // Producing goes on after what was stored.
    REQUIRE(queue.producer<int>("durable").try_produce(std::vector<int>{5, 103}));
    CHECK(drain(resumed, io) == std::map<std::size_t, std::vector<int>>{{0, {5}}, {1, {103}}});
}

TEMPLATE_LIST_TEST_CASE("conformance: a group resumes at its commit and a new group reads every stored item in a new "
                        "buffer_queue",
                        "[conformance][commit][persistence]", persistent_conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    const conformance_topic<int> spec{.name = "kept", .partitions = 1};
    {
        asio::io_context io;
        bq::buffer_queue queue{io.get_executor()};
        backend.add_topic(queue, spec);
        auto consumer = queue.create_pull_consumer<int>(manual("kept", "g", 2));
        // One awaited call: on Kafka, acknowledged by the broker before anything is consumed.
        outcome produced;
        queue.producer<int>("kept").produce(range(1, 6), produced.handler());
        REQUIRE(run_until(io, [&] { return produced.code.has_value(); }));
        REQUIRE_FALSE(*produced.code);
        CHECK(consumed_items(consumer, io, 2) == std::vector<int>{1, 2});
        REQUIRE_FALSE(commit_now(consumer, io));
        CHECK(consumed_items(consumer, io, 2) == std::vector<int>{3, 4});  // delivered, not committed
        consumer.close();
    }
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue, spec);
    // The group resumes after its commit: the uncommitted batch comes again, then the rest.
    auto resumed = queue.create_pull_consumer<int>(manual("kept", "g", 10));
    CHECK(collect(resumed, io, 3) == std::map<std::size_t, std::vector<int>>{{0, {3, 4, 5}}});
    // A group new in this run reads everything that was stored.
    auto fresh = queue.create_pull_consumer<int>(manual("kept", "new", 10));
    CHECK(collect(fresh, io, 5) == std::map<std::size_t, std::vector<int>>{{0, {1, 2, 3, 4, 5}}});
    // Producing goes on after what was stored.
    REQUIRE(queue.producer<int>("kept").try_produce(6));
    CHECK(collect(resumed, io, 1) == std::map<std::size_t, std::vector<int>>{{0, {6}}});
}

TEMPLATE_LIST_TEST_CASE("conformance: a new buffer_queue over a non-persistent backend starts empty",
                        "[conformance][commit][persistence]", volatile_conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    const conformance_topic<int> spec{.name = "transient", .partitions = 1};
    {
        asio::io_context io;
        bq::buffer_queue queue{io.get_executor()};
        backend.add_topic(queue, spec);
        auto consumer = queue.create_pull_consumer<int>(manual("transient", "g"));
        REQUIRE(queue.producer<int>("transient").try_produce(std::vector<int>{1, 2, 3}));
        CHECK(consumed_items(consumer, io, 3) == std::vector<int>{1, 2, 3});
    }
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue, spec);
    auto consumer = queue.create_pull_consumer<int>(manual("transient", "g"));
    await_assignment(consumer, io);
    CHECK_FALSE(consumer.try_consume().has_value());
}

}  // namespace commit_conformance_test
