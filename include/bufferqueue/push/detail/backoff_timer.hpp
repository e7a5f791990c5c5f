// Internal: the push loop's backoff wait between failed deliveries, cancellable from any thread;
// compiled once (src/push/backoff_timer.cpp), so no user's file includes Asio's timers for it.
#pragma once

#include "bufferqueue/detail/config.hpp"

#include "bufferqueue/detail/spin_mutex.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <functional>

namespace bufferqueue::detail {

/// One push loop's backoff wait (push_loop.hpp): at most one `wait` at a time, which `cancel`,
/// from any thread, ends early. Both run under the loop's mutex (`wait` takes it itself where it
/// starts and ends the wait), so a cancel never races the wait's start. Not movable.
class backoff_timer {
public:
    backoff_timer() = default;
    backoff_timer(const backoff_timer&) = delete;
    backoff_timer& operator=(const backoff_timer&) = delete;

    /// Waits `delay` (a steady timer on the awaiting coroutine's executor, where it resumes), unless
    /// `must_end()`, asked under `mutex` as the wait starts, says the loop ends (then it completes at
    /// once). Completes when the delay passed or `cancel` ended it; never throws but `std::bad_alloc`.
    /// Allocates the coroutine frame and the timer's operation.
    boost::asio::awaitable<void> wait(std::chrono::steady_clock::duration delay, spin_mutex& mutex,
                                      const std::function<bool()>& must_end);

    /// Ends the wait in progress, if any. Call under the mutex given to `wait`. Never throws.
    void cancel() noexcept;

private:
    struct waiting;               // the timer of the wait in progress (src/push/backoff_timer.cpp)
    waiting* waiting_ = nullptr;  // guarded by the mutex given to `wait`
};

}  // namespace bufferqueue::detail
