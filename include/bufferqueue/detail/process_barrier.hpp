// Internal: the asymmetric fence of the wake-up protocol - nearly free for a producer, a system call
// for a consumer about to park.
#pragma once

#include <atomic>

namespace bufferqueue::detail {

/// Registers the process for expedited `membarrier` (Linux 4.14 and later) and checks that one
/// barrier goes through; false when that is unavailable (another system, a seccomp filter).
/// Defined in src/process_barrier.cpp.
bool register_process_barrier() noexcept;

/// Makes every thread of the process that is running now execute a full memory barrier before this
/// returns. Only after `register_process_barrier()` returned true.
void issue_process_barrier() noexcept;

/// Whether `light_fence` / `heavy_fence` use `membarrier`; decided once per process, so both sides
/// always agree.
inline bool process_barrier_available() noexcept
{
    static const bool available = register_process_barrier();
    return available;
}

/// The frequent side of a store-then-load handshake (a producer after publishing, before checking for
/// waiters): paired with `heavy_fence` on the other side, it orders this thread's earlier stores
/// before its later loads. Only a compiler barrier when `membarrier` is available, else a full fence.
inline void light_fence() noexcept
{
    if (process_barrier_available()) {
        std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
        std::atomic_thread_fence(std::memory_order_seq_cst);
    }
}

/// The rare side (a consumer after registering as a waiter, before re-checking for data): a
/// `membarrier` system call, which turns every other thread's `light_fence` into a full one at the
/// moment it runs; a full fence when `membarrier` is unavailable.
inline void heavy_fence() noexcept
{
    if (process_barrier_available()) {
        issue_process_barrier();
    } else {
        std::atomic_thread_fence(std::memory_order_seq_cst);
    }
}

}  // namespace bufferqueue::detail
