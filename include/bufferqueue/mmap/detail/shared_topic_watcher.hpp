// Internal: the one thread per process and process-shared topic that hears other processes' appends
// (issue 27): it sleeps on the shared header's wake-up event (a futex, no polling for data) and
// calls back after every notification, and at least once per period - the bound on how long a
// member that died unnoticed (whose leases the kernel released silently) keeps its partitions.
#pragma once

#include "bufferqueue/mmap/detail/process_shared_sync.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>

namespace bufferqueue::detail {

/// Calls `on_wake` on a thread of its own after notifications of `event` by any process (several
/// notifications in a row may be heard as one) and when `period` passed without one. Not copyable
/// or movable; destroying it stops the thread and waits for a callback in progress.
class shared_topic_watcher {
public:
    /// Starts the thread. `on_wake` must not throw (a throw ends the process, as from any thread)
    /// and must not destroy the watcher. Throws `std::system_error` when the thread cannot start.
    shared_topic_watcher(process_shared_event event, std::chrono::nanoseconds period, std::function<void()> on_wake)
        : event_(event), period_(period), on_wake_(std::move(on_wake)), first_seen_(event_.sequence()),
          thread_([this] { run(); })
    {
    }

    shared_topic_watcher(const shared_topic_watcher&) = delete;
    shared_topic_watcher& operator=(const shared_topic_watcher&) = delete;

    /// Stops the thread: it hears a notification (the other processes' watchers hear it too, as a
    /// spurious wake-up) and ends. Never throws.
    ~shared_topic_watcher()
    {
        stopping_.store(true, std::memory_order_release);
        event_.notify();
        thread_.join();
    }

private:
    void run()
    {
        // The sequence as the constructor saw it: a notification between construction and the thread's
        // start is heard, not taken for the starting point.
        std::uint32_t seen = first_seen_;
        while (!stopping_.load(std::memory_order_acquire)) {
            event_.wait(seen, period_);
            seen = event_.sequence();
            if (stopping_.load(std::memory_order_acquire)) {
                return;
            }
            on_wake_();
        }
    }

    process_shared_event event_;
    const std::chrono::nanoseconds period_;
    const std::function<void()> on_wake_;
    const std::uint32_t first_seen_;
    std::atomic<bool> stopping_{false};
    std::thread thread_;  // last: starts once every other member is ready
};

}  // namespace bufferqueue::detail
