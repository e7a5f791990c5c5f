// Internal: the park/wake hand-over of a consumer's waiting consume between threads.
#pragma once

#include "bufferqueue/consumer/detail/consumer_base.hpp"
#include "bufferqueue/consumer/detail/operation_flag.hpp"
#include "bufferqueue/detail/completion.hpp"
#include "bufferqueue/detail/spin_mutex.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <utility>

namespace bufferqueue::detail {

/// The state a consumer's park/wake protocol shares between threads, under one short lock: the
/// parked completion, the one a wake-up claimed, and the flags that make a consume about to park
/// retry instead (data arrived, cancel, close, a new assignment). Thread-safe; never allocates.
class parked_consume {
public:
    using completion_ptr = std::unique_ptr<pending_completion<boost::system::error_code, untyped_batch>>;

    /// Takes `busy` for a new operation and forgets an earlier cancel; false when another operation
    /// holds `busy`. Under the lock with the reset, so a cancel that sees the operation busy is never
    /// lost.
    /// An adoption holding `busy` is waited out, outside the lock.
    bool begin_operation(operation_flag& busy) noexcept
    {
        for (unsigned spins = 0;; ++spins) {
            {
                std::lock_guard lock(mutex_);
                const operation_flag::attempt result = busy.try_begin_once();
                if (result == operation_flag::attempt::taken) {
                    cancel_requested_ = false;
                    return true;
                }
                if (result == operation_flag::attempt::busy) {
                    return false;
                }
            }
            operation_flag::pause(spins);
        }
    }

    /// Before registering with the signals: forgets earlier wake-ups.
    void prepare() noexcept
    {
        std::lock_guard lock(mutex_);
        notified_ = false;
    }

    /// Parks `completion` unless something arrived since `prepare` (or `retry` says so); true when
    /// parked (then `completion` is empty).
    bool park(completion_ptr& completion, bool retry) noexcept
    {
        if (retry) {
            return false;  // without the lock: the caller scans again anyway
        }
        std::lock_guard lock(mutex_);
        if (notified_ || cancel_requested_ || closed_.load(std::memory_order_relaxed)) {
            return false;
        }
        pending_ = std::move(completion);
        return true;
    }

    /// Data arrived (or the assignment changed): a parked completion moves to `claimed` and
    /// `claim()` - called under the lock, returning what to wake or null - decides whether it is
    /// woken; returns what `claim()` returned.
    template <class Claim>
    auto arrive(Claim&& claim) noexcept
    {
        std::lock_guard lock(mutex_);
        notified_ = true;
        decltype(claim()) woken{};
        if (pending_) {
            woken = claim();
            if (woken) {
                claimed_ = std::move(pending_);
            }
        }
        return woken;
    }

    /// What a wake-up claimed, to resume.
    completion_ptr take_claimed() noexcept
    {
        std::lock_guard lock(mutex_);
        return std::move(claimed_);
    }

    /// Closes for good; returns the parked completion, to abort.
    completion_ptr close() noexcept
    {
        std::lock_guard lock(mutex_);
        closed_.store(true, std::memory_order_seq_cst);
        return std::move(pending_);
    }

    /// Requests cancellation of the operation in progress (none when `busy` is clear); returns the
    /// parked completion, to abort.
    completion_ptr cancel(const operation_flag& busy) noexcept
    {
        std::lock_guard lock(mutex_);
        if (!busy.in_operation()) {
            return nullptr;
        }
        cancel_requested_ = true;
        return std::move(pending_);
    }

    bool cancel_requested() const noexcept
    {
        std::lock_guard lock(mutex_);
        return cancel_requested_;
    }

    bool closed(std::memory_order order = std::memory_order_acquire) const noexcept { return closed_.load(order); }

private:
    mutable spin_mutex mutex_;
    completion_ptr pending_;           // guarded by mutex_
    completion_ptr claimed_;           // guarded by mutex_: taken from pending_ by a wake-up until it is posted
    bool notified_ = false;            // guarded by mutex_
    bool cancel_requested_ = false;    // guarded by mutex_
    std::atomic<bool> closed_{false};  // written under mutex_
};

}  // namespace bufferqueue::detail
