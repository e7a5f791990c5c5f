// Conformance, close and cancellation: closing the queue aborts a parked consume and later calls
// report closed, pull_consumer::cancel() and close() abort a parked consume, and on bounded backends
// a produce waiting for room is aborted by the queue's close and by its handle's stop_token.
#include "conformance/conformance_support.hpp"

#include <bufferqueue/bufferqueue.hpp>

#include <cstddef>
#include <optional>
#include <stop_token>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace close_conformance_test {

using namespace conformance;
using bufferqueue::test::error_from;

TEMPLATE_LIST_TEST_CASE("conformance: closing the queue aborts a waiting consume and later calls report closed",
                        "[conformance][close]", conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue, conformance_topic<int>{.name = "closing", .partitions = 2});
    auto consumer = queue.create_pull_consumer<int>(manual("closing", "g"));
    auto producer = queue.producer<int>("closing");

    consume_outcome<int> waiting;
    consumer.consume(waiting.handler());
    settle(io);
    REQUIRE_FALSE(waiting.code);
    queue.close();
    CHECK(queue.is_closed());
    REQUIRE(run_until(io, [&] { return waiting.code.has_value(); }));
    CHECK(*waiting.code == boost::asio::error::operation_aborted);
    CHECK(waiting.items.empty());

    // Every later call reports closed.
    consume_outcome<int> later;
    consumer.consume(later.handler());
    REQUIRE(run_until(io, [&] { return later.code.has_value(); }));
    CHECK(*later.code == bq::errc::closed);
    const auto try_consume_failure = error_from([&] { (void)consumer.try_consume(); });
    REQUIRE(try_consume_failure);
    CHECK(try_consume_failure->code() == bq::errc::closed);
    const auto try_produce_failure = error_from([&] { (void)producer.try_produce(1); });
    REQUIRE(try_produce_failure);
    CHECK(try_produce_failure->code() == bq::errc::closed);
    CHECK(produce_now(producer, 2, io) == bq::errc::closed);
    CHECK(commit_now(consumer, io) == bq::errc::closed);
    const auto create_failure = error_from([&] { (void)queue.create_pull_consumer<int>(manual("closing", "h")); });
    REQUIRE(create_failure);
    CHECK(create_failure->code() == bq::errc::closed);
}

TEMPLATE_LIST_TEST_CASE("conformance: cancel() aborts a waiting consume and the consumer keeps working",
                        "[conformance][close][cancellation]", conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue, conformance_topic<int>{.name = "cancelling", .partitions = 2});
    auto consumer = queue.create_pull_consumer<int>(manual("cancelling", "g"));
    auto producer = queue.producer<int>("cancelling");

    consume_outcome<int> waiting;
    consumer.consume(waiting.handler());
    settle(io);
    REQUIRE_FALSE(waiting.code);
    // cancel() with no consume in progress does nothing, and a backend whose calls block may not have
    // started the consume yet: cancel until it completes (each call is harmless).
    for (int attempt = 0; attempt < 100 && !waiting.code; ++attempt) {
        consumer.cancel();
        settle(io);
    }
    REQUIRE(waiting.code);
    CHECK(*waiting.code == boost::asio::error::operation_aborted);
    CHECK(waiting.items.empty());

    // Still open: the next consume waits and receives the item produced afterwards, once.
    consume_outcome<int> next;
    consumer.consume(next.handler());
    settle(io);
    REQUIRE_FALSE(next.code);
    REQUIRE(producer.try_produce(7));
    REQUIRE(run_until(io, [&] { return next.code.has_value(); }));
    CHECK_FALSE(*next.code);
    CHECK(next.items == std::vector<int>{7});
    REQUIRE_FALSE(commit_now(consumer, io));
    CHECK_FALSE(consumer.try_consume().has_value());
}

TEMPLATE_LIST_TEST_CASE("conformance: closing a consumer aborts its waiting consume and later calls report closed",
                        "[conformance][close]", conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue, conformance_topic<int>{.name = "leaving", .partitions = 1});
    auto consumer = queue.create_pull_consumer<int>(manual("leaving", "g"));
    auto producer = queue.producer<int>("leaving");

    consume_outcome<int> waiting;
    consumer.consume(waiting.handler());
    settle(io);
    REQUIRE_FALSE(waiting.code);
    consumer.close();
    REQUIRE(run_until(io, [&] { return waiting.code.has_value(); }));
    CHECK(*waiting.code == boost::asio::error::operation_aborted);
    const auto failure = error_from([&] { (void)consumer.try_consume(); });
    REQUIRE(failure);
    CHECK(failure->code() == bq::errc::closed);

    // The queue and the topic keep working: the group opens again and gets the item.
    REQUIRE(producer.try_produce(3));
    auto again = queue.create_pull_consumer<int>(manual("leaving", "g"));
    CHECK(consumed_items(again, io) == std::vector<int>{3});
}

TEMPLATE_LIST_TEST_CASE("conformance: closing the queue aborts a produce waiting for room",
                        "[conformance][close][bounded]", bounded_conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue, conformance_topic<int>{.name = "full", .partitions = 1, .bounded_capacity = 1});
    auto consumer = queue.create_pull_consumer<int>(manual("full", "g"));
    auto producer = queue.producer<int>("full");
    REQUIRE(producer.try_produce(1));

    outcome waiting;
    producer.produce(2, waiting.handler());
    settle(io);
    REQUIRE_FALSE(waiting.code);
    queue.close();
    REQUIRE(run_until(io, [&] { return waiting.code.has_value(); }));
    CHECK(*waiting.code == boost::asio::error::operation_aborted);
    CHECK(produce_now(producer, 3, io) == bq::errc::closed);
}

TEMPLATE_LIST_TEST_CASE(
    "conformance: a produce waiting for room is cancelled through its stop_token and stores nothing",
    "[conformance][close][cancellation][bounded]", bounded_conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue, conformance_topic<int>{.name = "stoppable", .partitions = 1, .bounded_capacity = 1});
    auto consumer = queue.create_pull_consumer<int>(manual("stoppable", "g"));
    auto producer = queue.producer<int>("stoppable");
    REQUIRE(producer.try_produce(1));

    std::stop_source stop;
    bq::producer<int> cancellable = producer.with_cancellation(stop.get_token());
    outcome cancelled;
    cancellable.produce(2, cancelled.handler());
    outcome behind;  // an ordinary produce queued behind it
    producer.produce(3, behind.handler());
    settle(io);
    REQUIRE_FALSE(cancelled.code);
    REQUIRE_FALSE(behind.code);

    stop.request_stop();
    REQUIRE(run_until(io, [&] { return cancelled.code.has_value(); }));
    CHECK(*cancelled.code == boost::asio::error::operation_aborted);
    settle(io);
    CHECK_FALSE(behind.code);  // still waiting for room

    // The room a commit returns goes to the produce behind; the cancelled item never appears.
    CHECK(try_items(consumer) == std::vector<int>{1});
    REQUIRE_FALSE(commit_now(consumer, io));
    REQUIRE(run_until(io, [&] { return behind.code.has_value(); }));
    CHECK_FALSE(*behind.code);
    CHECK(try_items(consumer) == std::vector<int>{3});
    REQUIRE_FALSE(commit_now(consumer, io));
    CHECK_FALSE(consumer.try_consume().has_value());
}

}  // namespace close_conformance_test
