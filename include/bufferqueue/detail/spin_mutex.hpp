// Internal: a short-hold lock that never sleeps in the kernel.
#pragma once

#include <atomic>
#include <thread>

// x86's pause through the compiler's builtin: <immintrin.h> (_mm_pause) is 61,000 preprocessed lines
// that every file including the library would parse for this one instruction.
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__GNUC__)
#include <immintrin.h>
#endif

namespace bufferqueue::detail {

inline void cpu_relax() noexcept
{
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
    __builtin_ia32_pause();
#elif defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

/// A test-and-test-and-set lock for critical sections of a few dozen instructions. It spins
/// briefly, then yields the CPU, so oversubscribed threads still make progress; it never
/// parks a thread on a futex (a futex wake costs 30 us - 3 ms on the target machines).
/// Meets the standard Lockable requirements.
class spin_mutex {
public:
    void lock() noexcept
    {
        for (;;) {
            if (!locked_.exchange(true, std::memory_order_acquire)) {
                return;
            }
            for (unsigned spins = 0; locked_.load(std::memory_order_relaxed); ++spins) {
                if (spins < 64) {
                    cpu_relax();
                } else {
                    std::this_thread::yield();
                }
            }
        }
    }

    bool try_lock() noexcept
    {
        return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire);
    }

    void unlock() noexcept { locked_.store(false, std::memory_order_release); }

private:
    std::atomic<bool> locked_{false};
};

}  // namespace bufferqueue::detail
