// Test helpers shared by the push consumer tests: the error sink's record, running an io_context
// until a condition holds and the push consumers stopped, and a queue over an int topic.
#pragma once

#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/retry_backoff.hpp"

#include "catch.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <utility>  // before the Asio coroutine headers (GCC 12)

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace bufferqueue::test {

/// How long a push test runs its io_context at most: a hang fails the test instead of CI.
inline constexpr auto push_hang_guard = std::chrono::seconds(60);

/// A 1 ms retry backoff, so retry tests run quickly.
inline constexpr bufferqueue::retry_backoff quick_backoff{
    .initial = std::chrono::milliseconds(1), .multiplier = 1.0, .maximum = std::chrono::milliseconds(1)};

/// Collects what the error sink receives, one "topic|group|message|exception-or-none" line each.
struct sink_log {
    std::mutex mutex;
    std::vector<std::string> lines;  // guarded by mutex

    bufferqueue::push_error_sink sink()
    {
        return [this](const bufferqueue::push_error& failure) {
            std::lock_guard lock(mutex);
            lines.push_back(std::string(failure.topic) + "|" + std::string(failure.group) + "|" +
                            std::string(failure.message) + "|" + (failure.exception ? "exception" : "none"));
        };
    }

    std::size_t size()
    {
        std::lock_guard lock(mutex);
        return lines.size();
    }

    /// How many lines received so far contain `text`.
    std::size_t count(const std::string& text)
    {
        std::lock_guard lock(mutex);
        std::size_t found = 0;
        for (const std::string& line : lines) {
            found += line.find(text) != std::string::npos ? 1 : 0;
        }
        return found;
    }
};

/// Runs `io` until `done()` holds (run_until), then runs `finish` and awaits `queue.stop()`, then runs
/// `io` until it is out of work; each at most `push_hang_guard`. Returns whether the stop completed.
inline bool run_until_then_stop(boost::asio::io_context& io, bufferqueue::buffer_queue& queue,
                                const std::function<bool()>& done, const std::function<void()>& finish = {})
{
    if (!run_until(io, done, push_hang_guard)) {
        return false;
    }
    if (finish) {
        finish();
    }
    bool stopped = false;
    boost::asio::co_spawn(
        io,
        [&]() -> boost::asio::awaitable<void> {
            co_await queue.stop();
            stopped = true;
        },
        [](std::exception_ptr failure) {
            if (failure) {
                std::rethrow_exception(failure);
            }
        });
    io.restart();
    io.run_for(push_hang_guard);
    return stopped;
}

/// A queue over the memory topic "numbers" of ints, recording what the error sink receives and,
/// in `log` (a `Log` of the test's own), what the handlers saw.
template <class Log>
struct numbers_queue {
    explicit numbers_queue(std::size_t partitions = 1)
    {
        queue.add_topic(int_topic("numbers", partitions));
        queue.set_push_error_sink(errors.sink());
    }

    /// Starts the loops and produces 0..count-1 in one batch.
    void start(int count)
    {
        queue.start();
        items = range(0, count);
        REQUIRE(queue.producer<int>("numbers").try_produce(std::span<const int>(items)));
    }

    /// `start(count)`, then stops once `done` holds.
    void run(int count, const std::function<bool()>& done)
    {
        start(count);
        REQUIRE(run_until_then_stop(io, queue, done));
    }

    boost::asio::io_context io;
    bufferqueue::buffer_queue queue{io.get_executor()};
    sink_log errors;
    Log log;
    std::vector<int> items;
};

}  // namespace bufferqueue::test
