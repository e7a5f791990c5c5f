// Internal: the topic-wide bound on items not yet committed by every group.
#pragma once

#include "bufferqueue/detail/spin_mutex.hpp"

#include <atomic>
#include <cstddef>
#include <deque>
#include <mutex>
#include <vector>

namespace bufferqueue::detail {

/// A producer waiting for room. `granted` runs once the room is reserved for it; `aborted` when
/// the gate closes first. Both may run on any thread and must not block.
class capacity_waiter {
public:
    explicit capacity_waiter(std::size_t requested) noexcept : requested_(requested) {}
    capacity_waiter(const capacity_waiter&) = delete;
    capacity_waiter& operator=(const capacity_waiter&) = delete;

    virtual void granted() noexcept = 0;
    virtual void aborted() noexcept = 0;

    std::size_t requested() const noexcept { return requested_; }
    void set_requested(std::size_t requested) noexcept { requested_ = requested; }

protected:
    ~capacity_waiter() = default;

private:
    std::size_t requested_;
};

/// Counts admitted items against a capacity. `try_acquire` is lock-free; waiting producers queue in
/// FIFO order and are granted room, in order, as `release` returns it, so a large batch is not
/// starved by small ones. Thread-safe.
class capacity_gate {
public:
    explicit capacity_gate(std::size_t capacity) noexcept : capacity_(capacity) {}

    std::size_t capacity() const noexcept { return capacity_; }
    std::size_t used() const noexcept { return used_.load(std::memory_order_acquire); }

    /// Reserves `count` items if they fit now. Never waits.
    bool try_acquire(std::size_t count) noexcept
    {
        std::size_t used = used_.load(std::memory_order_relaxed);
        do {
            if (count > capacity_ - used) {
                return false;
            }
        } while (
            !used_.compare_exchange_weak(used, used + count, std::memory_order_acq_rel, std::memory_order_relaxed));
        return true;
    }

    /// Reserves room for `waiter` now if nobody waits ahead of it and it fits (returns true), or
    /// queues it (returns false) to be granted later. After `close()`, `aborted` runs instead.
    bool acquire_or_enqueue(capacity_waiter& waiter)
    {
        if (waiting_.load(std::memory_order_acquire) == 0 && try_acquire(waiter.requested())) {
            return true;
        }
        bool queued = false;
        {
            std::lock_guard lock(mutex_);
            if (!closed_) {
                waiters_.push_back(&waiter);
                waiting_.fetch_add(1, std::memory_order_seq_cst);
                queued = true;
            }
        }
        if (!queued) {
            // Closed before it could queue: `close()` never saw this waiter, so abort it here.
            waiter.aborted();
            return false;
        }
        // Once queued, `close()` aborts the waiter unless it is granted first.
        grant_waiters();
        return false;
    }

    /// Returns `count` items of room and grants queued waiters that now fit.
    void release(std::size_t count) noexcept
    {
        if (count == 0) {
            return;
        }
        used_.fetch_sub(count, std::memory_order_seq_cst);
        if (waiting_.load(std::memory_order_seq_cst) != 0) {
            grant_waiters();
        }
    }

    /// Removes a queued waiter; false when it was already granted or aborted.
    bool remove(capacity_waiter& waiter) noexcept
    {
        std::lock_guard lock(mutex_);
        for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
            if (*it == &waiter) {
                waiters_.erase(it);
                waiting_.fetch_sub(1, std::memory_order_seq_cst);
                return true;
            }
        }
        return false;
    }

    /// Aborts every queued waiter; later waiters are aborted at once.
    void close() noexcept
    {
        std::deque<capacity_waiter*> aborted;
        {
            std::lock_guard lock(mutex_);
            closed_ = true;
            aborted.swap(waiters_);
            waiting_.store(0, std::memory_order_seq_cst);
        }
        for (capacity_waiter* waiter : aborted) {
            waiter->aborted();
        }
    }

    bool is_closed() const noexcept
    {
        std::lock_guard lock(mutex_);
        return closed_;
    }

private:
    void grant_waiters() noexcept
    {
        std::vector<capacity_waiter*> granted;
        {
            std::lock_guard lock(mutex_);
            while (!waiters_.empty() && try_acquire(waiters_.front()->requested())) {
                granted.push_back(waiters_.front());
                waiters_.pop_front();
                waiting_.fetch_sub(1, std::memory_order_seq_cst);
            }
        }
        for (capacity_waiter* waiter : granted) {
            waiter->granted();
        }
    }

    const std::size_t capacity_;
    alignas(64) std::atomic<std::size_t> used_{0};
    alignas(64) std::atomic<std::size_t> waiting_{0};
    mutable spin_mutex mutex_;
    std::deque<capacity_waiter*> waiters_;  // guarded by mutex_
    bool closed_ = false;                   // guarded by mutex_
};

}  // namespace bufferqueue::detail
