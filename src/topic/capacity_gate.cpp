// capacity_gate's waiting side and credit moves (topic/detail/capacity_gate.hpp): compiled once;
// the producer's common path (try_acquire with credits, release) stays inline in the header.
#include "bufferqueue/topic/detail/capacity_gate.hpp"

#include <mutex>
#include <thread>

namespace bufferqueue::detail {

bool capacity_gate::acquire_or_enqueue(capacity_waiter& waiter)
{
    if (try_acquire(waiter.requested())) {
        return true;
    }
    bool queued = false;
    {
        std::lock_guard lock(mutex_);
        // `cancel` sets the flag before it looks for the waiter under this lock, so either it
        // finds the waiter queued or the flag is visible here.
        if (!closed_ && !waiter.cancel_requested()) {
            waiters_.push_back(&waiter);
            waiting_.fetch_add(1, std::memory_order_seq_cst);
            queued = true;
        }
    }
    if (!queued) {
        // Closed or cancelled before it could queue: nobody else saw this waiter, so abort it here.
        waiter.aborted();
        return false;
    }
    // Once queued, `close()` or `cancel` aborts the waiter unless it is granted first.
    grant_waiters();
    return false;
}

void capacity_gate::settle() noexcept
{
    {
        // Both under the lock: `close()` stores the count of waiters still to settle, and a
        // decrement after it would take one away twice (wrapping the count to SIZE_MAX).
        std::lock_guard lock(mutex_);
        grant_outstanding_ = false;
        waiting_.fetch_sub(1, std::memory_order_seq_cst);
    }
    grant_waiters();
}

bool capacity_gate::remove(capacity_waiter& waiter) noexcept
{
    bool removed = false;
    {
        std::lock_guard lock(mutex_);
        for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
            if (*it == &waiter) {
                waiters_.erase(it);
                waiting_.fetch_sub(1, std::memory_order_seq_cst);
                removed = true;
                break;
            }
        }
    }
    if (removed) {
        grant_waiters();
    }
    return removed;
}

void capacity_gate::close() noexcept
{
    std::deque<capacity_waiter*> aborted;
    {
        std::lock_guard lock(mutex_);
        closed_ = true;
        aborted.swap(waiters_);
        waiting_.store(grant_outstanding_ ? 1 : 0, std::memory_order_seq_cst);  // it settles later
    }
    for (capacity_waiter* waiter : aborted) {
        waiter->aborted();
    }
}

bool capacity_gate::refill(credit_slot& slot, std::size_t count) noexcept
{
    if (capacity_ - used_.load(std::memory_order_relaxed) < refill_floor) {
        return false;
    }
    moving_.fetch_add(1, std::memory_order_seq_cst);
    const bool reserved = reserve(count + credit_chunk, refill_floor);
    if (reserved) {
        slot.credits.fetch_add(credit_chunk, std::memory_order_seq_cst);
    }
    moving_.fetch_sub(1, std::memory_order_seq_cst);
    return reserved;
}

bool capacity_gate::reserve_exactly(std::size_t count) noexcept
{
    for (unsigned spins = 0;; ++spins) {
        if (reserve(count)) {
            return true;
        }
        moving_.fetch_add(1, std::memory_order_seq_cst);
        std::size_t reclaimed = 0;
        for (credit_slot& slot : slots_) {
            reclaimed += slot.credits.exchange(0, std::memory_order_seq_cst);
        }
        if (reclaimed != 0) {
            used_.fetch_sub(reclaimed, std::memory_order_seq_cst);
        }
        moving_.fetch_sub(1, std::memory_order_seq_cst);
        if (reclaimed == 0 && moving_.load(std::memory_order_seq_cst) == 0) {
            return reserve(count);  // no credit anywhere, none in transit: the count is exact
        }
        if (reclaimed == 0) {  // as spin_mutex waits: briefly, then yielding the CPU
            if (spins < 64) {
                cpu_relax();
            } else {
                std::this_thread::yield();
            }
        }
    }
}

void capacity_gate::grant_waiters() noexcept
{
    capacity_waiter* granted = nullptr;
    {
        std::lock_guard lock(mutex_);
        if (grant_outstanding_ || waiters_.empty() || !reserve_exactly(waiters_.front()->requested())) {
            return;
        }
        granted = waiters_.front();
        waiters_.pop_front();
        grant_outstanding_ = true;
    }
    granted->granted();
}

}  // namespace bufferqueue::detail
