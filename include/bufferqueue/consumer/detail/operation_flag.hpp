// Internal: who owns a consumer's operation state at a time.
#pragma once

#include "bufferqueue/detail/spin_mutex.hpp"

#include <atomic>
#include <cstdint>
#include <thread>

namespace bufferqueue::detail {

/// Who owns a consumer's operation state: nobody, one operation (a consume, a commit, close's
/// detach), or a reassignment adopting a new set for an idle consumer on the rebalancing thread.
/// An operation that finds an adoption in progress waits for it (a bounded critical section: it
/// spins, then yields) rather than failing; one that finds another operation fails at once, as
/// the handle's "one operation at a time" contract says. Thread-safe, lock-free, never allocates.
/// Every transition is seq_cst: callers pair it with the assignment's `reassigned()` flag. The
/// adopting holder never blocks or takes another lock while it holds the flag, so waiting for it
/// cannot deadlock.
class operation_flag {
public:
    enum class attempt : std::uint8_t {
        taken,     ///< the caller owns the flag now
        busy,      ///< another operation holds it
        adopting,  ///< a reassignment holds it for a moment: try again (`pause`)
    };

    /// Tries once to take the flag for an operation.
    attempt try_begin_once() noexcept
    {
        state expected = state::idle;
        if (state_.compare_exchange_strong(expected, state::operation, std::memory_order_seq_cst)) {
            return attempt::taken;
        }
        return expected == state::operation ? attempt::busy : attempt::adopting;
    }

    /// Takes the flag for an operation, waiting out an adoption; false when another operation holds it.
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

    /// Between two `try_begin_once` calls that found an adoption: spins, then yields.
    static void pause(unsigned spins) noexcept
    {
        if (spins < 64) {
            cpu_relax();
        } else {
            std::this_thread::yield();  // the adopting thread was preempted
        }
    }

    /// Takes the flag to adopt a set for an idle consumer; false when anyone holds it (then the
    /// holder adopts the set as its operation scans or ends).
    bool try_adopt() noexcept
    {
        state expected = state::idle;
        return state_.compare_exchange_strong(expected, state::adopting, std::memory_order_seq_cst);
    }

    /// Gives the flag back (after `try_begin` or `try_adopt` returned true).
    void end() noexcept { state_.store(state::idle, std::memory_order_seq_cst); }

    /// An operation holds the flag (an adoption does not count).
    bool in_operation() const noexcept { return state_.load(std::memory_order_seq_cst) == state::operation; }

private:
    enum class state : std::uint8_t { idle, operation, adopting };
    std::atomic<state> state_{state::idle};
};

}  // namespace bufferqueue::detail
