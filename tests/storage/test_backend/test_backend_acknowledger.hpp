// The test backend's stand-in for a broker that acknowledges appends later, from a thread of its
// own: the partitions of an acknowledging test backend topic (`test_backend_topic_options::
// acknowledger`) store each append at once and queue its acknowledgement here. Public headers only.
#pragma once

#include "bufferqueue/error.hpp"
#include "bufferqueue/storage/append_listener.hpp"

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace bufferqueue_test_backend {

/// Acknowledges the appends of one topic's partitions `delay` after they were taken, in the order
/// they were taken, on a thread of its own. Tests may hold the acknowledgements back, make the next
/// ones fail, and bound how many items may wait for theirs (a broker client's send queue).
/// Thread-safe. One per topic: the first of its partitions to close closes it.
class test_backend_acknowledger {
public:
    /// `max_unacknowledged`: the items that may wait for their acknowledgement at once; a call that
    /// would go over it is refused with `errc::queue_full`.
    explicit test_backend_acknowledger(std::chrono::microseconds delay = std::chrono::microseconds(200),
                                       std::size_t max_unacknowledged = std::numeric_limits<std::size_t>::max())
        : delay_(delay), max_unacknowledged_(max_unacknowledged), thread_([this] { run(); })
    {
    }

    test_backend_acknowledger(const test_backend_acknowledger&) = delete;
    test_backend_acknowledger& operator=(const test_backend_acknowledger&) = delete;

    ~test_backend_acknowledger() { close(); }

    /// Reserves room for `items` unacknowledged items of partition `partition` of topic `topic`;
    /// throws `bufferqueue::error` `errc::queue_full` when they do not fit, `errc::closed` after
    /// `close`. Call before storing them; then `enqueue` what was stored.
    void reserve(const std::string& topic, std::size_t partition, std::size_t items)
    {
        const std::lock_guard lock(mutex_);
        if (closed_) {
            throw bufferqueue::error(bufferqueue::errc::closed, "test backend topic '" + topic + "' is closed");
        }
        if (items > max_unacknowledged_ - unacknowledged_) {
            throw bufferqueue::error(bufferqueue::errc::queue_full, "test backend topic '" + topic + "', partition " +
                                                                        std::to_string(partition) +
                                                                        ": the send queue is full");
        }
        unacknowledged_ += items;
    }

    /// Queues the acknowledgement of `stored` of the `reserved` items reserved (`listener` null: an
    /// append that nobody awaits; a failure of it is only counted). Never throws.
    void enqueue(std::size_t reserved, std::size_t stored, bufferqueue::append_listener* listener) noexcept
    {
        bufferqueue::append_listener* closed_listener = nullptr;
        {
            const std::lock_guard lock(mutex_);
            unacknowledged_ -= reserved - stored;
            if (stored == 0) {
                return;
            }
            if (closed_) {  // closed between reserve and enqueue: answered at once
                unacknowledged_ -= stored;
                closed_listener = listener;
            } else {
                try {
                    pending_.push_back(
                        pending_acknowledgement{std::chrono::steady_clock::now() + delay_, stored, listener});
                } catch (...) {  // no memory for the entry: acknowledged as failed at once
                    unacknowledged_ -= stored;
                    closed_listener = listener;
                }
            }
        }
        if (closed_listener != nullptr) {
            closed_listener->acknowledged(stored, make_error_code(bufferqueue::errc::closed));
        }
        wake_.notify_one();
    }

    /// Holds every acknowledgement back until `release`.
    void hold()
    {
        const std::lock_guard lock(mutex_);
        held_ = true;
    }

    void release()
    {
        {
            const std::lock_guard lock(mutex_);
            held_ = false;
        }
        wake_.notify_one();
    }

    /// The next `count` acknowledgements report `code` instead of success.
    void fail_next(std::size_t count, bufferqueue::errc code)
    {
        const std::lock_guard lock(mutex_);
        failures_left_ = count;
        failure_ = code;
    }

    /// Items taken and not acknowledged yet.
    std::size_t unacknowledged() const
    {
        const std::lock_guard lock(mutex_);
        return unacknowledged_;
    }

    /// Acknowledgements that failed for appends nobody awaited (`try_produce`).
    std::uint64_t unawaited_failures() const
    {
        const std::lock_guard lock(mutex_);
        return unawaited_failures_;
    }

    /// Answers every pending acknowledgement with `errc::closed`, here, and stops the thread; later
    /// `reserve` calls throw `errc::closed`. Idempotent.
    void close() noexcept
    {
        std::deque<pending_acknowledgement> left;
        {
            const std::lock_guard lock(mutex_);
            if (closed_) {
                return;
            }
            closed_ = true;
            left.swap(pending_);
            unacknowledged_ = 0;
        }
        wake_.notify_one();
        for (const pending_acknowledgement& each : left) {
            if (each.listener != nullptr) {
                each.listener->acknowledged(each.items, make_error_code(bufferqueue::errc::closed));
            }
        }
        if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) {
            thread_.join();
        }
    }

private:
    struct pending_acknowledgement {
        std::chrono::steady_clock::time_point due;
        std::size_t items = 0;
        bufferqueue::append_listener* listener = nullptr;
    };

    void run()
    {
        std::unique_lock lock(mutex_);
        for (;;) {
            if (closed_) {
                return;
            }
            if (held_ || pending_.empty()) {
                wake_.wait(lock);
                continue;
            }
            if (const auto due = pending_.front().due; std::chrono::steady_clock::now() < due) {
                wake_.wait_until(lock, due);
                continue;
            }
            const pending_acknowledgement next = pending_.front();
            pending_.pop_front();
            unacknowledged_ -= next.items;
            boost::system::error_code outcome;
            if (failures_left_ != 0) {
                --failures_left_;
                outcome = make_error_code(failure_);
                unawaited_failures_ += next.listener == nullptr ? 1 : 0;
            }
            if (next.listener != nullptr) {
                lock.unlock();  // the listener may complete a produce; it never calls back in here
                next.listener->acknowledged(next.items, outcome);
                lock.lock();
            }
        }
    }

    const std::chrono::microseconds delay_;
    const std::size_t max_unacknowledged_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<pending_acknowledgement> pending_;              // guarded by mutex_, oldest first
    std::size_t unacknowledged_ = 0;                           // guarded by mutex_: reserved and pending items
    bool held_ = false;                                        // guarded by mutex_
    bool closed_ = false;                                      // guarded by mutex_
    std::size_t failures_left_ = 0;                            // guarded by mutex_
    bufferqueue::errc failure_ = bufferqueue::errc::io_error;  // guarded by mutex_
    std::uint64_t unawaited_failures_ = 0;                     // guarded by mutex_
    std::thread thread_;  // last: starts after the members it reads are initialized
};

}  // namespace bufferqueue_test_backend
