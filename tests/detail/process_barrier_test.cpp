// Tests of the asymmetric fence pair behind the wake-up protocol.
#include "bufferqueue/detail/process_barrier.hpp"

#include "catch.hpp"

#include <atomic>
#include <cstddef>
#include <thread>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace process_barrier_test {

namespace {

namespace bq = bufferqueue;

TEST_CASE("process barrier: a light and a heavy fence never let both sides miss the other's store",
          "[process_barrier][concurrency]")
{
    // The store-buffering litmus test: each side stores its flag, fences, then loads the other's.
    // Without the fences x86 lets both loads see 0 (each store still in its core's buffer); with a
    // light fence on one side and a heavy one on the other, at least one load must see 1.
    WARN("membarrier available: " << bq::detail::process_barrier_available());
    constexpr int rounds = 20000;
    std::atomic<int> light_flag{0};
    std::atomic<int> heavy_flag{0};
    std::atomic<int> light_saw{0};
    std::atomic<int> heavy_saw{0};
    std::atomic<int> started{0};   // round r starts once both sides arrived: 2r + 2
    std::atomic<int> finished{0};  // both sides done: 3r + 2; checked and reset: 3r + 3
    int both_missed = 0;

    std::thread light_side([&] {
        for (int round = 0; round < rounds; ++round) {
            started.fetch_add(1);
            while (started.load() < 2 * round + 2) {
            }
            light_flag.store(1, std::memory_order_relaxed);
            bq::detail::light_fence();
            light_saw.store(heavy_flag.load(std::memory_order_relaxed), std::memory_order_relaxed);
            finished.fetch_add(1);
            while (finished.load() < 3 * round + 3) {  // the other side checks and resets meanwhile
            }
        }
    });
    for (int round = 0; round < rounds; ++round) {
        started.fetch_add(1);
        while (started.load() < 2 * round + 2) {
        }
        heavy_flag.store(1, std::memory_order_relaxed);
        bq::detail::heavy_fence();
        heavy_saw.store(light_flag.load(std::memory_order_relaxed), std::memory_order_relaxed);
        finished.fetch_add(1);
        while (finished.load() < 3 * round + 2) {
        }
        if (light_saw.load() == 0 && heavy_saw.load() == 0) {
            ++both_missed;
        }
        light_flag.store(0);
        heavy_flag.store(0);
        finished.fetch_add(1);  // lets the light side start the next round
    }
    light_side.join();
    CHECK(both_missed == 0);
}

}  // namespace

}  // namespace process_barrier_test
