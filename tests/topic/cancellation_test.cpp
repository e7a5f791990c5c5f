// Per-operation cancellation through Asio cancellation slots (Boost 1.77 and later). Boost 1.74, which
// Debian 12 ships, has no slots: there a waiting consume is cancelled by pull_consumer::cancel() and a
// waiting produce through producer::with_cancellation(std::stop_token) (pull_consumer_test.cpp and
// capacity_test.cpp cover those on every Boost), or by closing the consumer or the queue.
#include "bufferqueue/pull_consumer.hpp"

#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/memory/memory_topic.hpp"
#include "bufferqueue/producer.hpp"

#include "catch.hpp"

#if BUFFERQUEUE_HAS_CANCELLATION_SLOTS

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>

#include <optional>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace cancellation_test {

namespace bq = bufferqueue;

TEST_CASE("pull consumer: a waiting consume is cancelled through its cancellation slot and loses nothing",
          "[consumer][memory][cancellation]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<int>{.name = "numbers", .partitions = 2});
    auto consumer = queue.create_pull_consumer<int>({.topic = "numbers", .group = "readers"});
    auto producer = queue.producer<int>("numbers");

    boost::asio::cancellation_signal signal;
    std::optional<boost::system::error_code> result;
    consumer.consume(boost::asio::bind_cancellation_slot(
        signal.slot(), [&](boost::system::error_code error, bq::batch<int>) { result = error; }));
    io.poll();
    REQUIRE_FALSE(result.has_value());

    signal.emit(boost::asio::cancellation_type::terminal);
    io.poll();
    REQUIRE(result.has_value());
    CHECK(*result == boost::asio::error::operation_aborted);

    // The consumer stays usable and the item produced afterwards is delivered once.
    REQUIRE(producer.try_produce(7));
    std::vector<int> received;
    consumer.consume([&](boost::system::error_code error, bq::batch<int> batch) {
        REQUIRE_FALSE(error);
        received.assign(batch.begin(), batch.end());
    });
    io.restart();
    io.poll();
    CHECK(received == std::vector<int>{7});
}

TEST_CASE("producer: a produce waiting for room is cancelled through its cancellation slot and stores nothing",
          "[producer][memory][capacity][cancellation]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<int>{.name = "bounded", .partitions = 1, .bounded_capacity = 2});
    auto consumer = queue.create_pull_consumer<int>({.topic = "bounded", .group = "readers", .batch_size = 10});
    auto producer = queue.producer<int>("bounded");
    REQUIRE(producer.try_produce(1));
    REQUIRE(producer.try_produce(2));

    boost::asio::cancellation_signal signal;
    std::optional<boost::system::error_code> result;
    producer.produce(3, boost::asio::bind_cancellation_slot(signal.slot(),
                                                            [&](boost::system::error_code error) { result = error; }));
    io.poll();
    REQUIRE_FALSE(result.has_value());

    signal.emit(boost::asio::cancellation_type::terminal);
    io.poll();
    REQUIRE(result.has_value());
    CHECK(*result == boost::asio::error::operation_aborted);

    // Committing returns the room; the cancelled item never appears.
    const auto batch = consumer.try_consume();
    REQUIRE(batch.has_value());
    CHECK(std::vector<int>(batch->begin(), batch->end()) == std::vector<int>{1, 2});
    bool committed = false;
    consumer.commit([&](boost::system::error_code error) { committed = !error; });
    io.restart();
    io.poll();
    CHECK(committed);
    CHECK_FALSE(consumer.try_consume().has_value());
}

TEST_CASE("producer: cancelling the head waiting produce through its slot hands the free room to the one behind",
          "[producer][memory][capacity][cancellation]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<int>{.name = "bounded", .partitions = 1, .bounded_capacity = 2});
    auto consumer = queue.create_pull_consumer<int>({.topic = "bounded", .group = "readers", .batch_size = 10});
    auto producer = queue.producer<int>("bounded");
    REQUIRE(producer.try_produce(1));

    boost::asio::cancellation_signal signal;
    std::optional<boost::system::error_code> head;
    producer.produce(
        std::vector<int>{2, 3},
        boost::asio::bind_cancellation_slot(signal.slot(), [&](boost::system::error_code error) { head = error; }));
    std::optional<boost::system::error_code> behind;
    producer.produce(4, [&](boost::system::error_code error) { behind = error; });
    io.poll();
    REQUIRE_FALSE(head.has_value());
    REQUIRE_FALSE(behind.has_value());

    signal.emit(boost::asio::cancellation_type::terminal);
    io.restart();
    io.poll();
    REQUIRE(head.has_value());
    CHECK(*head == boost::asio::error::operation_aborted);
    REQUIRE(behind.has_value());
    CHECK_FALSE(*behind);
    const auto batch = consumer.try_consume();
    REQUIRE(batch.has_value());
    CHECK(std::vector<int>(batch->begin(), batch->end()) == std::vector<int>{1, 4});
}

}  // namespace cancellation_test

#endif
