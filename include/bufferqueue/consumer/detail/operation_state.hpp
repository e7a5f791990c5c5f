// Internal: a pull consumer's operation state - who owns it, whether its operation was cancelled,
// the consume that waits and its hand-over between threads, and close - in one class.
#pragma once

#include "bufferqueue/consumer/detail/partition_reader.hpp"
#include "bufferqueue/detail/completion.hpp"
#include "bufferqueue/detail/spin_mutex.hpp"

#include <boost/system/error_code.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

namespace bufferqueue::detail {

/// The one-operation-at-a-time rule of a pull consumer, its parked consume and the cancel and
/// close that end it.
///
/// Who owns the consumer's operation state is one atomic word: nobody, one operation (a consume
/// from its start to its completion, a commit, a skip, close's detach) - with whether `cancel()`
/// was requested for it -, or a reassignment adopting a new set for an idle consumer on the
/// rebalancing thread. An operation that finds an adoption in progress waits for it (a bounded
/// critical section: it spins, then yields) rather than failing; one that finds another operation
/// fails at once, as the handle's "one operation at a time" contract says. A cancel marks only the
/// operation that holds the word, and the word's next owner starts unmarked, so a cancel is never
/// lost nor left for the next operation. Every transition of the word is seq_cst: callers pair it
/// with the assignment's `reassigned()` flag. The adopting holder never blocks or takes another
/// lock while it holds the word, so waiting for it cannot deadlock.
///
/// The park/wake protocol shares one short lock between threads: the parked completion, the one a
/// wake-up claimed, and what makes a consume about to park retry instead (data arrived, cancel,
/// close; a new assignment is the caller's `retry`). Taking and giving back the word takes no lock.
///
/// Thread-safe; never allocates, never throws.
class operation_state {
public:
    using completion_ptr = std::unique_ptr<pending_completion<boost::system::error_code, untyped_batch>>;

    /// What one attempt to take the word found.
    enum class attempt : std::uint8_t {
        taken,     ///< the caller owns the word now
        busy,      ///< another operation holds it
        adopting,  ///< a reassignment holds it for a moment: try again (`pause`)
    };

    /// Tries once to take the word for an operation.
    attempt try_begin_once() noexcept
    {
        owner expected = owner::idle;
        if (owner_.compare_exchange_strong(expected, owner::operation, std::memory_order_seq_cst)) {
            return attempt::taken;
        }
        return expected == owner::adopting ? attempt::adopting : attempt::busy;
    }

    /// Takes the word for an operation, waiting out an adoption; false when another operation holds it.
    bool try_begin() noexcept
    {
        for (unsigned spins = 0;; ++spins) {
            const attempt result = try_begin_once();
            if (result != attempt::adopting) {
                return result == attempt::taken;
            }
            pause(spins);
        }
    }

    /// Takes the word to adopt a set for an idle consumer; false when anyone holds it (then the
    /// holder adopts the set as its operation scans or ends).
    bool try_adopt() noexcept
    {
        owner expected = owner::idle;
        return owner_.compare_exchange_strong(expected, owner::adopting, std::memory_order_seq_cst);
    }

    /// Gives the word back (after `try_begin`, `try_begin_once` or `try_adopt` took it); forgets a
    /// cancel of the operation that ends.
    void end() noexcept { owner_.store(owner::idle, std::memory_order_seq_cst); }

    /// Requests cancellation of the operation in progress (none when nobody or an adoption holds
    /// the word); returns the parked completion, to abort.
    completion_ptr cancel() noexcept
    {
        std::lock_guard lock(mutex_);
        owner expected = owner::operation;
        if (!owner_.compare_exchange_strong(expected, owner::cancelled, std::memory_order_seq_cst)) {
            return nullptr;  // no operation, or one cancelled already (nothing parks after that)
        }
        return std::move(pending_);
    }

    /// `cancel()` marked the operation in progress (asked by that operation).
    bool cancel_requested() const noexcept { return owner_.load(std::memory_order_seq_cst) == owner::cancelled; }

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
        if (notified_ || cancel_requested() || closed_.load(std::memory_order_relaxed)) {
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

    /// `close()` ran.
    bool closed(std::memory_order order = std::memory_order_acquire) const noexcept { return closed_.load(order); }

    /// Between two `try_begin_once` calls that found an adoption: spins, then yields.
    static void pause(unsigned spins) noexcept
    {
        if (spins < 64) {
            cpu_relax();
        } else {
            std::this_thread::yield();  // the adopting thread was preempted
        }
    }

private:
    enum class owner : std::uint8_t {
        idle,
        operation,
        cancelled,  ///< an operation, which `cancel()` marked
        adopting,
    };

    std::atomic<owner> owner_{owner::idle};
    mutable spin_mutex mutex_;
    completion_ptr pending_;           // guarded by mutex_
    completion_ptr claimed_;           // guarded by mutex_: taken from pending_ by a wake-up until it is posted
    bool notified_ = false;            // guarded by mutex_
    std::atomic<bool> closed_{false};  // written under mutex_
};

}  // namespace bufferqueue::detail
