// Internal: wakes consumers suspended on an empty partition.
#pragma once

#include "bufferqueue/detail/process_barrier.hpp"
#include "bufferqueue/detail/spin_mutex.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace bufferqueue::detail {

/// Something suspended until a partition receives data.
class data_waiter {
public:
    /// Runs under the signal's lock: must be short, must not block, must not touch other signals.
    /// Returns the waiter to `wake` (kept alive until then), or null when there is nothing to resume.
    virtual std::shared_ptr<data_waiter> data_arrived() noexcept = 0;

    /// Resumes what `data_arrived` claimed; runs on the notifying thread after the signal's lock is
    /// released, so the resumed thread never waits for the notifying one to leave it.
    virtual void wake() noexcept = 0;

    /// Whether this waiter is a parked `consume()` (counted by `topic_stats::waiting_consumers`),
    /// rather than a mark kept for a consumer that is not waiting (a ready set's watcher).
    virtual bool is_parked_consume() const noexcept { return true; }

protected:
    ~data_waiter() = default;
};

/// The waiters of one partition. A producer pays a compiler barrier and one load when nobody waits.
/// Lost wake-ups are impossible: a waiter registers (seq_cst) and then, after `heavy_fence`,
/// re-checks the partition, while a producer publishes and then, after `light_fence`, checks for
/// waiters, so at least one of them sees the other. Thread-safe.
class partition_signal {
public:
    /// Registers `waiter` until `notify` wakes it or `remove` takes it back. Takes the signal's lock
    /// briefly; may throw `std::bad_alloc`.
    void add(data_waiter& waiter);

    /// Unregisters `waiter` if `notify` has not woken it yet. Takes the signal's lock briefly.
    void remove(data_waiter& waiter) noexcept;

    /// Call after publishing data: wakes (and unregisters) every waiter.
    void notify() noexcept
    {
        light_fence();
        if (waiting_.load(std::memory_order_relaxed) != 0) {
            wake_waiters();
        }
    }

    /// Whether anything was registered at the last look: a hint (relaxed, no fence) for a producer
    /// choosing how to store a long batch, never a substitute for `notify`. Lock-free.
    bool has_waiters() const noexcept { return waiting_.load(std::memory_order_relaxed) != 0; }

    /// Appends the parked consumes registered now to `out` (statistics: a consumer waiting on
    /// several partitions is registered with each; watchers are left out). Takes the signal's lock
    /// briefly; allocates into `out`.
    void append_waiters(std::vector<const data_waiter*>& out);

private:
    static constexpr std::size_t inline_wakes = 4;  // waiters woken without allocating

    // Out of line (src/detail/partition_signal.cpp), so the producer's common case (nobody waits)
    // stays a few inlined instructions.
    void wake_waiters() noexcept;

    alignas(64) std::atomic<std::uint32_t> waiting_{0};
    spin_mutex mutex_;
    std::vector<data_waiter*> waiters_;  // guarded by mutex_
};

}  // namespace bufferqueue::detail
