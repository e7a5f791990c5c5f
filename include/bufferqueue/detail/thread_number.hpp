// Internal: small process-wide numbers for producing threads, reused after a thread exits.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace bufferqueue::detail {

/// Hands out the numbers 0..capacity-1, lowest free first, so the threads alive at one time hold
/// small, distinct numbers. Lock-free; trivially destructible, so a thread that exits during
/// static destruction can still give its number back.
class thread_number_registry {
public:
    static constexpr std::size_t capacity = 1024;
    /// What `acquire` returns when every number is taken.
    static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();

    std::size_t acquire() noexcept
    {
        for (std::size_t word = 0; word < words; ++word) {
            std::uint64_t taken = used_[word].load(std::memory_order_relaxed);
            while (taken != ~std::uint64_t{0}) {
                const int bit = std::countr_one(taken);
                if (used_[word].compare_exchange_weak(taken, taken | (std::uint64_t{1} << bit),
                                                      std::memory_order_acq_rel, std::memory_order_relaxed)) {
                    return word * 64 + static_cast<std::size_t>(bit);
                }
            }
        }
        return none;
    }

    void release(std::size_t number) noexcept
    {
        used_[number / 64].fetch_and(~(std::uint64_t{1} << (number % 64)), std::memory_order_release);
    }

private:
    static constexpr std::size_t words = capacity / 64;
    std::atomic<std::uint64_t> used_[words]{};
};

inline thread_number_registry& producer_thread_numbers() noexcept
{
    static constinit thread_number_registry registry;
    return registry;
}

/// A number that no other living thread holds (`thread_number_registry::capacity` for a thread
/// without one: more than `capacity` producing threads, or a thread past its thread-exit cleanup).
inline constexpr std::size_t shared_thread_number = thread_number_registry::capacity;

inline constinit thread_local std::size_t current_producer_thread_number = thread_number_registry::none;

/// Gives the calling thread's number back when the thread exits.
struct producer_thread_number_owner {
    explicit producer_thread_number_owner(std::size_t owned) noexcept : number(owned) {}
    producer_thread_number_owner(const producer_thread_number_owner&) = delete;
    producer_thread_number_owner& operator=(const producer_thread_number_owner&) = delete;
    ~producer_thread_number_owner()
    {
        // Anything this thread produces from here on (another thread_local's destructor) uses the
        // shared number: the released one may already belong to another thread.
        current_producer_thread_number = shared_thread_number;
        if (number < thread_number_registry::capacity) {
            producer_thread_numbers().release(number);
        }
    }

    const std::size_t number;
};

[[gnu::noinline]] inline std::size_t assign_producer_thread_number() noexcept
{
    thread_local const producer_thread_number_owner owner{[] {
        const std::size_t acquired = producer_thread_numbers().acquire();
        return acquired == thread_number_registry::none ? shared_thread_number : acquired;
    }()};
    current_producer_thread_number = owner.number;
    return owner.number;
}

/// The calling thread's number: distinct among the living threads that have produced, small
/// (threads take the lowest free number) and reused after a thread exits. One thread-local load
/// after the first call.
inline std::size_t producer_thread_number() noexcept
{
    const std::size_t number = current_producer_thread_number;
    return number != thread_number_registry::none ? number : assign_producer_thread_number();
}

/// Stands for the calling thread where a producer thread number is expected (`topic_router::route`),
/// so its number is looked up only where a lane needs it. No thread holds this number.
inline constexpr std::size_t calling_producer_thread = std::numeric_limits<std::size_t>::max();

/// The lane of `lanes` that the thread numbered `number` appends to: with more than one lane, the
/// first `lanes - 1` thread numbers own a lane each and every other number shares the last one.
inline std::size_t producer_lane_of(std::size_t number, std::size_t lanes) noexcept
{
    return number < lanes - 1 ? number : lanes - 1;
}

/// The lane of `lanes` the calling thread appends to (see `producer_lane_of`): no other living
/// thread appends to an owned lane on its own behalf; a waiting produce completed by another
/// thread appends to its producer's lane (the storage then locks every lane, see
/// `memory_partition`).
inline std::size_t producer_lane(std::size_t lanes) noexcept
{
    if (lanes == 1) {
        return 0;
    }
    return producer_lane_of(producer_thread_number(), lanes);
}

}  // namespace bufferqueue::detail
