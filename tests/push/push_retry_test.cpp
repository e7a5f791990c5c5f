// Tests of push subscriptions' retries: attempts counted exactly, growing backoff delays, giving up
// after max_attempts (reported once, nothing committed past the batch, also on an mmap topic),
// stop and close during a backoff wait, and invalid retry options.
#include "bufferqueue/push_consumer.hpp"

#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/memory/memory_topic.hpp"
#include "bufferqueue/mmap/mmap_topic.hpp"
#include "bufferqueue/retry_backoff.hpp"

#include "catch.hpp"
#include "push/push_test_support.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <limits>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace push_retry_test {

namespace {

namespace asio = boost::asio;
namespace bq = bufferqueue;
using bq::test::error_from;
using bq::test::int_topic;
using bq::test::items_of;
using bq::test::missing_from;
using bq::test::run_until_then_stop;
using bq::test::sink_log;
using std::chrono::milliseconds;
constexpr auto hang_guard = bq::test::push_hang_guard;

/// Every delivery, in order: its items and when it began.
struct delivery_record {
    std::vector<std::vector<int>> batches;
    std::vector<std::chrono::steady_clock::time_point> times;

    void record(const bq::batch<int>& items)
    {
        batches.push_back(items_of(items));
        times.push_back(std::chrono::steady_clock::now());
    }

    std::size_t deliveries_starting_at(int first) const
    {
        std::size_t count = 0;
        for (const auto& each : batches) {
            count += !each.empty() && each.front() == first ? 1 : 0;
        }
        return count;
    }
};

using numbers_queue = bq::test::numbers_queue<delivery_record>;

constexpr bq::retry_backoff quick = bq::test::quick_backoff;
constexpr bq::retry_backoff endless{
    .initial = milliseconds(600000), .multiplier = 1.0, .maximum = milliseconds(600000)};

// ---------------------------------------------------------------------------------------- tests

TEST_CASE("push retry: a handler that throws 3 times then succeeds gets the same batch 4 times, in order",
          "[push][retry][memory]")
{
    numbers_queue fixture;
    int failures_left = 3;
    // max_attempts 4: the fourth delivery is still allowed, so the batch must not be given up.
    fixture.queue.add_push_consumer(
        {.topic = "numbers", .group = "flaky", .batch_size = 5, .max_attempts = 4, .retry_backoff = quick},
        [&](bq::batch<int> items, bq::committer& committer) -> asio::awaitable<void> {
            fixture.log.record(items);
            if (items.front() == 0 && failures_left > 0) {
                --failures_left;
                throw std::runtime_error("transient failure");
            }
            co_await committer.commit();
        });
    fixture.start(15);
    REQUIRE(run_until_then_stop(fixture.io, fixture.queue, [&] { return fixture.log.batches.size() == 6; }));

    const std::vector<std::vector<int>> expected{{0, 1, 2, 3, 4}, {0, 1, 2, 3, 4}, {0, 1, 2, 3, 4},
                                                 {0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {10, 11, 12, 13, 14}};
    CHECK(fixture.log.batches == expected);
    REQUIRE(fixture.errors.size() == 3);  // each failed attempt, no give-up
    for (const std::string& message : fixture.errors.lines) {
        CHECK(message == "numbers|flaky|transient failure|exception");
    }
}

TEST_CASE("push retry: the delays between attempts are at least the configured, growing backoff",
          "[push][retry][memory]")
{
    numbers_queue fixture;
    fixture.queue.add_push_consumer(
        {.topic = "numbers",
         .group = "slow",
         .batch_size = 5,
         .retry_backoff = {.initial = milliseconds(10), .multiplier = 2.0, .maximum = milliseconds(25)}},
        [&](bq::batch<int> items, bq::committer& committer) -> asio::awaitable<void> {
            fixture.log.record(items);
            if (fixture.log.batches.size() <= 4) {
                throw std::runtime_error("not yet");
            }
            co_await committer.commit();
        });
    fixture.start(5);
    REQUIRE(run_until_then_stop(fixture.io, fixture.queue, [&] { return fixture.log.batches.size() == 5; }));

    REQUIRE(fixture.log.times.size() == 5);
    const std::vector<milliseconds> at_least{milliseconds(10), milliseconds(20), milliseconds(25), milliseconds(25)};
    for (std::size_t gap = 0; gap < at_least.size(); ++gap) {
        CAPTURE(gap);
        CHECK(fixture.log.times[gap + 1] - fixture.log.times[gap] >= at_least[gap]);  // lower bounds only
    }
    CHECK(fixture.log.deliveries_starting_at(0) == 5);
}

TEST_CASE("push retry: after max_attempts failed deliveries the batch is reported once and the loop stops",
          "[push][retry][memory]")
{
    numbers_queue fixture;
    fixture.queue.add_push_consumer(
        {.topic = "numbers", .group = "doomed", .batch_size = 5, .max_attempts = 3, .retry_backoff = quick},
        [&](bq::batch<int> items, bq::committer&) -> asio::awaitable<void> {
            fixture.log.record(items);
            throw std::runtime_error("permanent failure");
            co_return;
        });
    fixture.start(15);
    REQUIRE(run_until_then_stop(fixture.io, fixture.queue, [&] { return fixture.errors.size() >= 4; }));

    CHECK(fixture.log.batches.size() == 3);  // 3 attempts, then nothing: not the next batches either
    CHECK(fixture.log.deliveries_starting_at(0) == 3);
    REQUIRE(fixture.errors.size() == 4);  // 3 attempts and the give-up, once
    const std::string& given_up = fixture.errors.lines.back();
    CHECK(missing_from(given_up, {"numbers|doomed|", "topic 'numbers'", "group 'doomed'", "partition 0",
                                  "batch of 5 items", "after 3 failed attempts", "max_attempts", "uncommitted",
                                  "permanent failure", "|exception"}) == "");
    // Nothing was committed: the whole topic is still the group's lag.
    const bq::topic_stats stats = fixture.queue.stats<int>("numbers");
    REQUIRE(stats.groups.size() == 1);
    CHECK(stats.groups.front().name == "doomed");
    CHECK(stats.groups.front().lag == 15);
}

TEST_CASE("push retry: a batch given up on an mmap topic is delivered again from its start after a restart",
          "[push][retry][mmap]")
{
    bq::test::temporary_directory directory;
    const auto topic_options = [&] {
        return bq::mmap_topic_options<int>{
            .name = "durable", .partitions = 1, .data_directory = directory.path(), .segment_size = 64 * 1024};
    };
    const auto items = bq::test::range(0, 20);
    {
        asio::io_context io;
        bq::buffer_queue queue{io.get_executor()};
        queue.add_topic(topic_options());
        sink_log errors;
        queue.set_push_error_sink(errors.sink());
        int calls = 0;
        queue.add_push_consumer(
            {.topic = "durable", .group = "g", .batch_size = 10, .max_attempts = 2, .retry_backoff = quick},
            [&](bq::batch<int> batch, bq::committer& committer) -> asio::awaitable<void> {
                ++calls;
                if (batch.front() == 10) {
                    throw std::runtime_error("cannot handle the second batch");
                }
                co_await committer.commit();
            });
        queue.start();
        REQUIRE(queue.producer<int>("durable").try_produce(std::span<const int>(items)));
        REQUIRE(run_until_then_stop(io, queue, [&] { return errors.size() >= 3; }));
        CHECK(calls == 3);  // the first batch once, the second twice
        CHECK(errors.size() == 3);
    }
    // The next process resumes at the given-up batch: items 10.. arrive, 0..9 do not.
    delivery_record log;
    {
        asio::io_context io;
        bq::buffer_queue queue{io.get_executor()};
        queue.add_topic(topic_options());
        queue.add_push_consumer({.topic = "durable", .group = "g", .batch_size = 100},
                                [&](bq::batch<int> batch, bq::committer& committer) -> asio::awaitable<void> {
                                    log.record(batch);
                                    co_await committer.commit();
                                });
        queue.start();
        REQUIRE(run_until_then_stop(io, queue, [&] { return !log.batches.empty(); }));
    }
    REQUIRE(log.batches.size() == 1);
    CHECK(log.batches.front() == std::vector<int>(items.begin() + 10, items.end()));
}

TEST_CASE("push retry: stopping or closing the queue during a backoff wait completes at once", "[push][retry][memory]")
{
    const bool close_first = GENERATE(false, true);
    CAPTURE(close_first);
    numbers_queue fixture;
    fixture.queue.add_push_consumer({.topic = "numbers", .group = "waiting", .batch_size = 5, .retry_backoff = endless},
                                    [&](bq::batch<int> items, bq::committer&) -> asio::awaitable<void> {
                                        fixture.log.record(items);
                                        throw std::runtime_error("fails, then waits ten minutes");
                                        co_return;
                                    });
    fixture.start(5);
    // A backoff that was not cancelled would outlast the hang guard, so the stop would not complete.
    REQUIRE(run_until_then_stop(
        fixture.io, fixture.queue, [&] { return fixture.errors.size() == 1; },
        [&] {
            if (close_first) {
                fixture.queue.close();
            }
        }));
    CHECK(fixture.log.batches.size() == 1);
    CHECK(fixture.errors.size() == 1);
}

TEST_CASE("push retry: on a multi-threaded executor, stop() from another thread ends loops waiting out a backoff",
          "[push][retry][memory][concurrency]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("numbers", 2));
    sink_log errors;
    queue.set_push_error_sink(errors.sink());
    std::atomic<int> calls{0};
    queue.add_push_consumer(
        {.topic = "numbers", .group = "pool", .batch_size = 5, .concurrency = 2, .retry_backoff = endless},
        [&](bq::batch<int>, bq::committer&) -> asio::awaitable<void> {
            ++calls;
            throw std::runtime_error("always fails");
            co_return;
        });
    queue.start();
    const auto items = bq::test::range(0, 10);
    REQUIRE(queue.producer<int>("numbers").try_produce(std::span<const int>(items)));
    auto work = asio::make_work_guard(io);
    std::thread first([&] { io.run(); });
    std::thread second([&] { io.run(); });
    const auto give_up_at = std::chrono::steady_clock::now() + hang_guard;
    while (errors.size() == 0 && std::chrono::steady_clock::now() < give_up_at) {
        std::this_thread::sleep_for(milliseconds(1));  // the test thread, not an executor thread
    }
    std::promise<void> stopped;
    queue.stop([&] { stopped.set_value(); });
    const auto status = stopped.get_future().wait_for(hang_guard);
    work.reset();
    io.stop();
    first.join();
    second.join();
    CHECK(errors.size() >= 1);
    CHECK(status == std::future_status::ready);
    CHECK(calls.load() == static_cast<int>(errors.size()));  // one delivery per report: nobody retried yet
}

TEST_CASE("push retry: under auto commit a throwing handler is not retried, whatever max_attempts says",
          "[push][retry][memory]")
{
    numbers_queue fixture;
    fixture.queue.add_push_consumer(
        {.topic = "numbers", .group = "lossy", .batch_size = 5, .max_attempts = 3, .retry_backoff = quick},
        [&](bq::batch<int> items) -> asio::awaitable<void> {
            fixture.log.record(items);
            if (items.front() == 0) {
                throw std::runtime_error("lost");
            }
            co_return;
        });
    fixture.start(10);
    REQUIRE(run_until_then_stop(fixture.io, fixture.queue, [&] { return fixture.log.batches.size() == 2; }));
    CHECK(fixture.log.deliveries_starting_at(0) == 1);
    CHECK(fixture.errors.size() == 1);
}

TEST_CASE("push retry: invalid retry options are refused, naming topic, group and option", "[push][retry][memory]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("numbers", 1));
    const auto handler = [](bq::batch<int>, bq::committer&) -> asio::awaitable<void> { co_return; };

    struct expectation {
        bq::retry_backoff backoff;
        std::string_view option;
    };
    const std::vector<expectation> cases{
        {{.initial = milliseconds(-1), .multiplier = 2.0, .maximum = milliseconds(10)}, "retry_backoff.initial"},
        {{.initial = milliseconds(10), .multiplier = 2.0, .maximum = milliseconds(5)}, "retry_backoff.maximum"},
        {{.initial = milliseconds(10), .multiplier = 0.5, .maximum = milliseconds(10)}, "retry_backoff.multiplier"},
        {{.initial = milliseconds(10),
          .multiplier = std::numeric_limits<double>::quiet_NaN(),
          .maximum = milliseconds(10)},
         "retry_backoff.multiplier"},
    };
    for (const expectation& each : cases) {
        CAPTURE(each.option);
        const auto failure = error_from([&] {
            queue.add_push_consumer({.topic = "numbers", .group = "g", .retry_backoff = each.backoff}, handler);
        });
        REQUIRE(failure);
        CHECK(failure->code() == bq::errc::invalid_argument);
        CHECK(missing_from(failure->what(), {"'numbers'", "'g'", each.option}) == "");
    }
    // Nothing was created by the refused calls: the group is still free.
    queue.add_push_consumer({.topic = "numbers", .group = "g", .max_attempts = 1, .retry_backoff = quick}, handler);
}

}  // namespace

}  // namespace push_retry_test
