// Helpers shared by the benchmark programs: the seed's workload and a team of threads that run one
// round of work at once without a thread wake-up being timed.
#pragma once

#include "bufferqueue/detail/spin_mutex.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace bufferqueue::bench {

/// The seed's workload: the 8,192 ints 0..8191.
inline constexpr std::size_t message_count = 8192;

inline const std::vector<int>& messages()
{
    static const std::vector<int> all = [] {
        std::vector<int> values(message_count);
        std::iota(values.begin(), values.end(), 0);
        return values;
    }();
    return all;
}

/// Thread `index` of `threads`: its contiguous chunk of the workload.
inline std::pair<std::size_t, std::size_t> chunk_of(std::size_t index, std::size_t threads)
{
    return {message_count * index / threads, message_count * (index + 1) / threads};
}

/// Hardware threads (at least 2, so every multi-thread row runs concurrently).
inline std::size_t hardware_threads()
{
    return std::max<std::size_t>(2, std::thread::hardware_concurrency());
}

/// Waits for `done()` spinning briefly, then yielding (never sleeping in the kernel).
template <class Done>
void spin_until(Done&& done)
{
    for (unsigned spins = 0; !done(); ++spins) {
        if (spins < 256) {
            detail::cpu_relax();
        } else {
            std::this_thread::yield();
        }
    }
}

/// `size` threads - the calling one plus `size - 1` workers that spin (yielding) between rounds - run
/// one round of work together. `run` returns the round's wall time in seconds, from releasing the
/// workers until the last thread finished its share.
class team {
public:
    explicit team(std::size_t size) : size_(size)
    {
        for (std::size_t index = 1; index < size; ++index) {
            workers_.emplace_back([this, index] { work(index); });
        }
    }

    team(const team&) = delete;
    team& operator=(const team&) = delete;

    ~team()
    {
        stopping_.store(true, std::memory_order_release);
        generation_.fetch_add(1, std::memory_order_acq_rel);
        for (std::thread& worker : workers_) {
            worker.join();
        }
    }

    std::size_t size() const noexcept { return size_; }

    /// Runs `round(thread_index)` on every thread of the team at once.
    template <class Round>
    double run(Round& round)
    {
        call_ = [](void* context, std::size_t index) { (*static_cast<Round*>(context))(index); };
        context_ = &round;
        finished_.store(0, std::memory_order_relaxed);
        const auto start = std::chrono::steady_clock::now();
        generation_.fetch_add(1, std::memory_order_acq_rel);
        round(0);
        spin_until([this] { return finished_.load(std::memory_order_acquire) == size_ - 1; });
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }

private:
    void work(std::size_t index)
    {
        std::uint64_t seen = 0;
        for (;;) {
            spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; });
            seen = generation_.load(std::memory_order_acquire);
            if (stopping_.load(std::memory_order_acquire)) {
                return;
            }
            call_(context_, index);
            finished_.fetch_add(1, std::memory_order_acq_rel);
        }
    }

    const std::size_t size_;
    std::vector<std::thread> workers_;
    void (*call_)(void*, std::size_t) = nullptr;
    void* context_ = nullptr;
    alignas(64) std::atomic<std::uint64_t> generation_{0};
    alignas(64) std::atomic<std::size_t> finished_{0};
    std::atomic<bool> stopping_{false};
};

/// Counts the items seen in a round; the thread that sees the last one records the time and wakes
/// the waiting main thread (which sleeps in `std::atomic::wait`: no spinning thread beside the
/// measured ones).
struct alignas(64) round_tally {
    explicit round_tally(std::size_t expected) : expected_(expected) {}

    void start()
    {
        seen_.store(0, std::memory_order_relaxed);
        finished_.store(false, std::memory_order_relaxed);
        started_ = std::chrono::steady_clock::now();
    }

    void add(std::size_t count)
    {
        if (seen_.fetch_add(count, std::memory_order_acq_rel) + count == expected_) {
            ended_ = std::chrono::steady_clock::now();
            finished_.store(true, std::memory_order_release);
            finished_.notify_one();
        }
    }

    /// Waits for the round's end; its duration in seconds.
    double wait()
    {
        finished_.wait(false, std::memory_order_acquire);
        return std::chrono::duration<double>(ended_ - started_).count();
    }

    std::size_t seen() const { return seen_.load(std::memory_order_acquire); }

private:
    const std::size_t expected_;
    alignas(64) std::atomic<std::size_t> seen_{0};
    alignas(64) std::atomic<bool> finished_{false};
    std::chrono::steady_clock::time_point started_{};
    std::chrono::steady_clock::time_point ended_{};  // written before finished_ is released
};

/// The physical limit of moving the workload (issue 16's moonshot): one memcpy of the 8,192 ints
/// (32 KiB) into a buffer. Manual time.
inline void copy_limit(benchmark::State& state)
{
    const std::vector<int>& items = messages();
    std::vector<int> target(items.size());
    for (auto _ : state) {
        const auto start = std::chrono::steady_clock::now();
        std::memcpy(target.data(), items.data(), items.size() * sizeof(int));
        benchmark::ClobberMemory();
        state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(items.size()));
}

/// Items per second for `per_iteration` items moved in each iteration.
inline void set_items(benchmark::State& state, std::size_t per_iteration)
{
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * per_iteration));
}

/// An environment variable as a number, or `fallback`.
inline double environment_number(const char* name, double fallback)
{
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') {
        return fallback;
    }
    return std::strtod(value, nullptr);
}

/// The `fraction` quantile (0..1) of `samples` (sorted in place).
inline double quantile(std::vector<double>& samples, double fraction)
{
    if (samples.empty()) {
        return 0;
    }
    std::sort(samples.begin(), samples.end());
    const auto index = static_cast<std::size_t>(fraction * static_cast<double>(samples.size() - 1) + 0.5);
    return samples[std::min(index, samples.size() - 1)];
}

}  // namespace bufferqueue::bench
