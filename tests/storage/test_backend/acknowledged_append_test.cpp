// Partitions that acknowledge appends later (`bufferqueue::acknowledging_partition`), through the
// test backend's stand-in broker (test_backend_acknowledger.hpp, public headers only): an awaited
// produce completes on the last acknowledgement of its items, with the first error reported,
// holding no thread meanwhile; `try_produce` hands items over without waiting; bounded topics admit
// first; close answers what still waits.
#include "storage/test_backend/test_backend.hpp"

#include "bufferqueue/buffer_queue.hpp"
#include "catch.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace acknowledged_append_test {

namespace {

namespace bq = bufferqueue;
namespace tb = bufferqueue_test_backend;
using namespace std::chrono_literals;
using bufferqueue::test::run_until;

// Runs `io` for `duration` (what a completion that must not come gets to show up).
void run_for(boost::asio::io_context& io, std::chrono::milliseconds duration)
{
    io.run_for(duration);
    io.restart();
}

// The outcome of one callback-completed produce.
struct outcome {
    bool done = false;
    boost::system::error_code error{};

    auto handler()
    {
        return [this](boost::system::error_code code) {
            error = code;
            done = true;
        };
    }
};

// Commits the consumer's latest batch and runs `io` until the commit completes (not until `io` runs
// out of work, as `bufferqueue::test::commit_now` does: a produce waiting for its acknowledgement
// keeps work outstanding).
boost::system::error_code commit_until_done(bq::pull_consumer<int>& consumer, boost::asio::io_context& io)
{
    outcome committed;
    consumer.commit(committed.handler());
    REQUIRE(run_until(io, [&] { return committed.done; }));
    return committed.error;
}

tb::test_backend_topic_options<int> acknowledged_topic(std::string name, std::size_t partitions,
                                                       std::shared_ptr<tb::test_backend_acknowledger> acknowledger)
{
    return {.name = std::move(name), .partitions = partitions, .acknowledger = std::move(acknowledger)};
}

}  // namespace

TEST_CASE("test backend: an awaited produce completes when the storage has acknowledged all its items, not before",
          "[test_backend][acknowledged]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    auto acknowledger = std::make_shared<tb::test_backend_acknowledger>();
    queue.add_topic(acknowledged_topic("acknowledged", 3, acknowledger));
    auto consumer = queue.create_pull_consumer<int>(
        {.topic = "acknowledged", .group = "g", .auto_commit = true, .batch_size = 100});
    auto producer = queue.producer<int>("acknowledged");

    acknowledger->hold();
    outcome produced;
    producer.produce(std::vector<int>{1, 2, 3, 4, 5, 6}, produced.handler());
    run_for(io, 50ms);
    CHECK_FALSE(produced.done);  // stored (readable), not acknowledged
    CHECK(acknowledger->unacknowledged() == 6);

    acknowledger->release();
    REQUIRE(run_until(io, [&] { return produced.done; }));
    CHECK_FALSE(produced.error);
    CHECK(acknowledger->unacknowledged() == 0);

    std::vector<int> received;
    while (const auto delivered = consumer.try_consume()) {
        received.insert(received.end(), delivered->begin(), delivered->end());
    }
    std::sort(received.begin(), received.end());
    CHECK(received == bufferqueue::test::range(1, 7));
}

TEST_CASE("test backend: a failed acknowledgement fails the awaited produce, once every item is answered",
          "[test_backend][acknowledged]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    auto acknowledger = std::make_shared<tb::test_backend_acknowledger>();
    queue.add_topic(acknowledged_topic("failing", 3, acknowledger));
    auto producer = queue.producer<int>("failing");

    // Six items over three partitions: three appends, three acknowledgements, the first one failed.
    acknowledger->hold();
    acknowledger->fail_next(1, bq::errc::io_error);
    outcome produced;
    producer.produce(std::vector<int>{1, 2, 3, 4, 5, 6}, produced.handler());
    run_for(io, 20ms);
    CHECK_FALSE(produced.done);
    acknowledger->release();
    REQUIRE(run_until(io, [&] { return produced.done; }));
    CHECK(produced.error == bq::errc::io_error);
    CHECK(acknowledger->unacknowledged() == 0);

    // The next produce is acknowledged as usual.
    outcome next;
    producer.produce(7, next.handler());
    REQUIRE(run_until(io, [&] { return next.done; }));
    CHECK_FALSE(next.error);
}

TEST_CASE("test backend: closing the queue answers produces still waiting for their acknowledgement with closed",
          "[test_backend][acknowledged][close]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    auto acknowledger = std::make_shared<tb::test_backend_acknowledger>();
    queue.add_topic(acknowledged_topic("closing", 2, acknowledger));
    auto producer = queue.producer<int>("closing");

    acknowledger->hold();
    outcome produced;
    producer.produce(std::vector<int>{1, 2, 3}, produced.handler());
    run_for(io, 20ms);
    CHECK_FALSE(produced.done);
    queue.close();
    REQUIRE(run_until(io, [&] { return produced.done; }));
    CHECK(produced.error == bq::errc::closed);

    outcome after;
    producer.produce(4, after.handler());
    REQUIRE(run_until(io, [&] { return after.done; }));
    CHECK(after.error == bq::errc::closed);
}

TEST_CASE("test backend: awaited produces waiting for their acknowledgements hold no thread",
          "[test_backend][acknowledged][coroutine]")
{
    // 500 coroutines on one thread, each in `co_await produce()`: none can complete before the
    // acknowledgements are released, and all are waiting at once, so none holds a thread.
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    auto acknowledger = std::make_shared<tb::test_backend_acknowledger>();
    queue.add_topic(acknowledged_topic("many", 4, acknowledger));
    auto producer = queue.producer<int>("many");

    constexpr int producers = 500;
    int started = 0;
    int completed = 0;
    acknowledger->hold();
    for (int index = 0; index < producers; ++index) {
        boost::asio::co_spawn(
            io,
            [&, index]() -> boost::asio::awaitable<void> {
                ++started;
                co_await producer.produce(index, boost::asio::use_awaitable);
                ++completed;
            },
            boost::asio::detached);
    }
    REQUIRE(run_until(io, [&] { return started == producers && acknowledger->unacknowledged() == producers; }));
    run_for(io, 20ms);
    CHECK(completed == 0);

    acknowledger->release();
    REQUIRE(run_until(io, [&] { return completed == producers; }));
    CHECK(acknowledger->unacknowledged() == 0);
}

TEST_CASE("test backend: try_produce hands items over without waiting and returns false when the send queue is full",
          "[test_backend][acknowledged][capacity]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    auto acknowledger = std::make_shared<tb::test_backend_acknowledger>(200us, 3);
    queue.add_topic(acknowledged_topic("queue", 2, acknowledger));
    auto consumer =
        queue.create_pull_consumer<int>({.topic = "queue", .group = "g", .auto_commit = true, .batch_size = 100});
    auto producer = queue.producer<int>("queue");

    acknowledger->hold();
    CHECK(producer.try_produce(std::vector<int>{1, 2}));
    CHECK(producer.try_produce(3));  // handed over, not acknowledged: try_produce does not wait
    CHECK(acknowledger->unacknowledged() == 3);
    CHECK_FALSE(producer.try_produce(4));  // the send queue is full
    outcome refused;
    producer.produce(5, refused.handler());
    REQUIRE(run_until(io, [&] { return refused.done; }));
    CHECK(refused.error == bq::errc::queue_full);

    acknowledger->release();
    REQUIRE(run_until(io, [&] { return acknowledger->unacknowledged() == 0; }));
    // A failure found after try_produce returned is the backend's to report.
    acknowledger->fail_next(1, bq::errc::io_error);
    CHECK(producer.try_produce(6));
    REQUIRE(run_until(io, [&] { return acknowledger->unawaited_failures() == 1; }));

    std::vector<int> received;
    while (const auto delivered = consumer.try_consume()) {
        received.insert(received.end(), delivered->begin(), delivered->end());
    }
    std::sort(received.begin(), received.end());
    CHECK(received == std::vector<int>{1, 2, 3, 6});
}

TEST_CASE("test backend: a bounded topic admits an acknowledged produce first and completes it on the acknowledgement",
          "[test_backend][acknowledged][capacity]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    auto acknowledger = std::make_shared<tb::test_backend_acknowledger>();
    auto options = acknowledged_topic("bounded", 1, acknowledger);
    options.bounded_capacity = 2;
    queue.add_topic(std::move(options));
    auto consumer =
        queue.create_pull_consumer<int>({.topic = "bounded", .group = "g", .auto_commit = false, .batch_size = 10});
    auto producer = queue.producer<int>("bounded");

    REQUIRE(producer.try_produce(std::vector<int>{1, 2}));  // the topic is full
    acknowledger->hold();
    outcome produced;
    producer.produce(std::vector<int>{3, 4, 5}, produced.handler());  // waits for room, in slices of 2
    run_for(io, 20ms);
    CHECK_FALSE(produced.done);

    // Reading and committing gives the room back; the waiting produce stores its slices.
    std::vector<int> received;
    REQUIRE(run_until(io, [&] {
        if (const auto delivered = consumer.try_consume()) {
            received.insert(received.end(), delivered->begin(), delivered->end());
            CHECK(commit_until_done(consumer, io) == boost::system::error_code());
        }
        return received.size() == 5;
    }));
    CHECK(received == bufferqueue::test::range(1, 6));
    CHECK_FALSE(produced.done);  // stored, not acknowledged

    acknowledger->release();
    REQUIRE(run_until(io, [&] { return produced.done; }));
    CHECK_FALSE(produced.error);
}

}  // namespace acknowledged_append_test
