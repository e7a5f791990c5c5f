// Internal: the topic-wide bound on items not yet committed by every group.
#pragma once

#include "bufferqueue/consumer/detail/capacity_release.hpp"
#include "bufferqueue/detail/spin_mutex.hpp"
#include "bufferqueue/detail/thread_number.hpp"

#include <atomic>
#include <cstddef>
#include <deque>

namespace bufferqueue::detail {

/// A producer waiting for room. `granted` runs once the room is reserved for it; `aborted` when
/// the gate closes or the waiter is cancelled first. Both may run on any thread and must not block.
/// A granted waiter calls `capacity_gate::settle()` once it has stored its items or given the room
/// back: until then nobody else is admitted, so stores happen in the order room was granted.
class capacity_waiter {
public:
    explicit capacity_waiter(std::size_t requested) noexcept : requested_(requested) {}
    capacity_waiter(const capacity_waiter&) = delete;
    capacity_waiter& operator=(const capacity_waiter&) = delete;

    virtual void granted() noexcept = 0;
    virtual void aborted() noexcept = 0;

    std::size_t requested() const noexcept { return requested_; }
    void set_requested(std::size_t requested) noexcept { requested_ = requested; }
    /// Set by `capacity_gate::cancel`, from any thread; never cleared.
    bool cancel_requested() const noexcept { return cancel_requested_.load(std::memory_order_acquire); }

protected:
    ~capacity_waiter() = default;

private:
    friend class capacity_gate;

    std::size_t requested_;
    std::atomic<bool> cancel_requested_{false};
};

/// Counts admitted items against a capacity. `try_acquire` is lock-free; waiting producers queue in
/// FIFO order and are granted room, in order, as `release` returns it, so a large batch is not
/// starved by small ones. Nobody takes room ahead of a queued waiter, nor ahead of a granted one
/// that has not stored yet: `try_acquire` fails until every such waiter has settled, and one
/// waiter at a time holds a grant, so items are stored in the order their room was granted (a
/// granted waiter's store runs later, on its own executor). Thread-safe.
///
/// Credits: while much room is free, a small `try_acquire` reserves `credit_chunk` items more than
/// it needs and keeps them in a slot of the calling thread (by its producer thread number), so the
/// thread's next acquisitions take room from its own cache line instead of the count every
/// producer shares. The bound stays exact: credits count as used in the shared count, and an
/// acquisition that the shared count refuses first takes every slot's credits back and tries
/// again, so it fails only when admitted items alone leave no room. Refills stop while less than
/// `refill_floor` is free, so near the bound every thread takes room from the shared count.
///
/// It is the `capacity_release` a bounded topic hands its consumers: their commits give room back
/// through one virtual call; the topic's own calls name this final class and are direct.
class capacity_gate final : public capacity_release {
public:
    /// Items a refill reserves beyond the acquisition; slots of credits (threads share a slot by
    /// their thread number modulo this).
    static constexpr std::size_t credit_chunk = 64;
    static constexpr std::size_t credit_slots = 8;
    /// Refills happen only while at least this much room is free.
    static constexpr std::size_t refill_floor = 2 * credit_slots * credit_chunk;

    explicit capacity_gate(std::size_t capacity) noexcept : capacity_(capacity) {}

    std::size_t capacity() const noexcept { return capacity_; }
    /// Items admitted and not released (the credits the slots hold are not counted). Lock-free.
    std::size_t used() const noexcept
    {
        std::size_t held = 0;
        for (const credit_slot& slot : slots_) {
            held += slot.credits.load(std::memory_order_acquire);
        }
        const std::size_t counted = used_.load(std::memory_order_acquire);
        return counted > held ? counted - held : 0;
    }
    /// Producers queued for room now, counting a granted one that has not settled yet (statistics).
    /// Lock-free.
    std::size_t waiting() const noexcept { return waiting_.load(std::memory_order_acquire); }

    /// Reserves `count` items if they fit now and no waiter is queued or granted and unsettled (FIFO:
    /// no barging). Never waits.
    bool try_acquire(std::size_t count) noexcept
    {
        if (waiting_.load(std::memory_order_acquire) != 0) {
            return false;
        }
        if (count <= credit_chunk) {
            credit_slot& slot = slots_[producer_thread_number() % credit_slots];
            if (take_credits(slot, count) || refill(slot, count)) {
                return true;
            }
        }
        return reserve_exactly(count);
    }

    /// Reserves room for `waiter` now if nobody waits ahead of it and it fits (returns true), or
    /// queues it (returns false) to be granted later. After `close()`, or once the waiter was
    /// cancelled, `aborted` runs instead.
    bool acquire_or_enqueue(capacity_waiter& waiter);

    /// Returns `count` items of room and grants queued waiters that now fit (see `capacity_release`).
    void release(std::size_t count) noexcept override
    {
        if (count == 0) {
            return;
        }
        used_.fetch_sub(count, std::memory_order_seq_cst);
        if (waiting_.load(std::memory_order_seq_cst) != 0) {
            grant_waiters();
        }
    }

    /// Ends the grant a waiter received in `granted`: it has stored its items or given the room
    /// back. Grants the next queued waiter that fits. Called once per `granted`, from any thread.
    void settle() noexcept;

    /// Cancels `waiter`: marks it (a later `acquire_or_enqueue` aborts it) and, when it is queued,
    /// removes it and runs `aborted`; the waiters behind it get the room it was holding up. True
    /// when it was queued. Any thread; `aborted` runs on the calling thread.
    bool cancel(capacity_waiter& waiter) noexcept
    {
        waiter.cancel_requested_.store(true, std::memory_order_release);
        if (!remove(waiter)) {
            return false;
        }
        waiter.aborted();
        return true;
    }

    /// Removes a queued waiter; false when it was already granted or aborted. Grants the waiters
    /// behind it that now fit: the removed one may have been the head that held them up.
    bool remove(capacity_waiter& waiter) noexcept;

    /// Aborts every queued waiter; later waiters are aborted at once.
    void close() noexcept;

private:
    struct alignas(64) credit_slot {
        std::atomic<std::size_t> credits{0};  // reserved in used_, not admitted yet
    };

    static bool take_credits(credit_slot& slot, std::size_t count) noexcept
    {
        std::size_t held = slot.credits.load(std::memory_order_relaxed);
        while (held >= count) {
            if (slot.credits.compare_exchange_weak(held, held - count, std::memory_order_acq_rel,
                                                   std::memory_order_relaxed)) {
                return true;
            }
        }
        return false;
    }

    // Reserves `count` and `credit_chunk` more for `slot`, while at least `refill_floor` is free.
    bool refill(credit_slot& slot, std::size_t count) noexcept;

    // Reserves `count` from the shared count, taking the slots' credits back while that would make
    // it fit: false only when the admitted items alone leave no room for `count`. Credits on their
    // way between a slot and the shared count (`moving_`: a refill or another reclaim between two
    // of its instructions) are waited for.
    bool reserve_exactly(std::size_t count) noexcept;

    // Reserves `count` items if they fit now with `spare` more left free, whoever waits.
    bool reserve(std::size_t count, std::size_t spare = 0) noexcept
    {
        std::size_t used = used_.load(std::memory_order_relaxed);
        do {
            if (count > capacity_ - used || capacity_ - used - count < spare) {
                return false;
            }
        } while (
            !used_.compare_exchange_weak(used, used + count, std::memory_order_acq_rel, std::memory_order_relaxed));
        return true;
    }

    // Grants the head waiter if it fits and no grant is outstanding. The granted waiter stays
    // counted in `waiting_` until it settles, which grants the next one.
    void grant_waiters() noexcept;

    const std::size_t capacity_;
    alignas(64) std::atomic<std::size_t> used_{0};  // admitted and not released, plus the slots' credits
    credit_slot slots_[credit_slots];
    alignas(64) std::atomic<std::size_t> moving_{0};  // threads moving credits between a slot and used_
    alignas(64) std::atomic<std::size_t> waiting_{0};
    mutable spin_mutex mutex_;
    std::deque<capacity_waiter*> waiters_;  // guarded by mutex_
    bool closed_ = false;                   // guarded by mutex_
    bool grant_outstanding_ = false;        // a waiter was granted and has not settled; guarded by mutex_
};

}  // namespace bufferqueue::detail
