// Producers and co_await consumers at the same time: sustained throughput, the latency from produce()
// to the suspended consumer's resumption beside a bare boost::asio::post to an idle io_context thread,
// and resident memory over a long produce/consume loop (segments must be recycled).
#include "bufferqueue/bufferqueue.hpp"

#include "bench_support.hpp"
#include "io_thread.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace bq = bufferqueue;
using bq::bench::message_count;
using bq::bench::messages;
using clock_type = std::chrono::steady_clock;

namespace {

using bq::bench::io_thread;
using bq::bench::report_latencies;

/// Runs `consumer` in a coroutine on `io` until the consumer is closed; counts what it receives and
/// stamps the time of each resumption.
struct consuming_coroutine {
    std::atomic<std::uint64_t> received{0};
    std::atomic<std::int64_t> resumed_at{0};
    std::atomic<bool> finished{false};

    void start(boost::asio::io_context& io, bq::pull_consumer<int>& consumer)
    {
        boost::asio::co_spawn(
            io,
            [this, &consumer]() -> boost::asio::awaitable<void> {
                try {
                    for (;;) {
                        bq::batch<int> batch = co_await consumer.consume();
                        resumed_at.store(clock_type::now().time_since_epoch().count(), std::memory_order_relaxed);
                        received.fetch_add(batch.size(), std::memory_order_release);
                    }
                } catch (const boost::system::system_error&) {
                    // closed
                }
                finished.store(true, std::memory_order_release);
            },
            boost::asio::detached);
    }
};

/// Sustained throughput: this thread produces the 8,192 items one at a time while a coroutine on
/// another thread consumes them (batch 1000, auto commit); a round ends when all arrived.
void end_to_end_throughput(benchmark::State& state, bool batches)
{
    io_thread consumer_thread;
    bq::buffer_queue queue(consumer_thread.context().get_executor());
    queue.add_topic(bq::memory_topic_options<int>{.name = "flow", .partitions = 1});
    bq::producer<int> producer = queue.producer<int>("flow");
    bq::pull_consumer<int> consumer =
        queue.create_pull_consumer<int>({.topic = "flow", .group = "g", .auto_commit = true, .batch_size = 1000});
    consuming_coroutine coroutine;
    coroutine.start(consumer_thread.context(), consumer);

    const std::vector<int>& items = messages();
    std::uint64_t expected = 0;
    for (auto _ : state) {
        const auto start = clock_type::now();
        if (batches) {
            constexpr std::size_t chunk = 64;
            for (std::size_t first = 0; first < items.size(); first += chunk) {
                producer.try_produce(std::span<const int>(items.data() + first, chunk));
            }
        } else {
            for (int value : items) {
                producer.try_produce(value);
            }
        }
        expected += message_count;
        bq::bench::spin_until([&] { return coroutine.received.load(std::memory_order_acquire) >= expected; });
        state.SetIterationTime(std::chrono::duration<double>(clock_type::now() - start).count());
    }
    consumer.close();
    bq::bench::spin_until([&] { return coroutine.finished.load(std::memory_order_acquire); });
    bq::bench::set_items(state, message_count);
}

constexpr auto idle_pause = std::chrono::microseconds(300);

/// Target 4, ours: one item produced while the consumer's coroutine is suspended in consume() on an
/// idle io_context thread; the time until that coroutine resumes.
void wakeup_bufferqueue(benchmark::State& state)
{
    io_thread consumer_thread;
    bq::buffer_queue queue(consumer_thread.context().get_executor());
    queue.add_topic(bq::memory_topic_options<int>{.name = "wake", .partitions = 1});
    bq::producer<int> producer = queue.producer<int>("wake");
    bq::pull_consumer<int> consumer =
        queue.create_pull_consumer<int>({.topic = "wake", .group = "g", .auto_commit = true, .batch_size = 1});
    consuming_coroutine coroutine;
    coroutine.start(consumer_thread.context(), consumer);

    std::vector<double> samples;
    std::uint64_t expected = 0;
    for (auto _ : state) {
        std::this_thread::sleep_for(idle_pause);  // the coroutine suspends, its thread goes idle
        const auto start = clock_type::now();
        producer.try_produce(static_cast<int>(expected));
        ++expected;
        bq::bench::spin_until([&] { return coroutine.received.load(std::memory_order_acquire) >= expected; });
        const auto resumed = clock_type::time_point(clock_type::duration(coroutine.resumed_at.load()));
        const double seconds = std::chrono::duration<double>(resumed - start).count();
        samples.push_back(seconds);
        state.SetIterationTime(seconds);
    }
    consumer.close();
    bq::bench::spin_until([&] { return coroutine.finished.load(std::memory_order_acquire); });
    report_latencies(state, samples);
}

/// Target 4, the floor: boost::asio::post of a handler to an idle io_context thread; the time until
/// the handler runs.
void wakeup_asio_post(benchmark::State& state)
{
    io_thread handler_thread;
    std::vector<double> samples;
    std::atomic<std::int64_t> ran_at{0};
    std::atomic<std::uint64_t> ran{0};
    std::uint64_t expected = 0;
    for (auto _ : state) {
        std::this_thread::sleep_for(idle_pause);
        const auto start = clock_type::now();
        boost::asio::post(handler_thread.context(), [&] {
            ran_at.store(clock_type::now().time_since_epoch().count(), std::memory_order_relaxed);
            ran.fetch_add(1, std::memory_order_release);
        });
        ++expected;
        bq::bench::spin_until([&] { return ran.load(std::memory_order_acquire) >= expected; });
        const double seconds =
            std::chrono::duration<double>(clock_type::time_point(clock_type::duration(ran_at.load())) - start).count();
        samples.push_back(seconds);
        state.SetIterationTime(seconds);
    }
    report_latencies(state, samples);
}

/// Resident set size in KiB.
double resident_kib()
{
    std::ifstream statm("/proc/self/statm");
    std::size_t total_pages = 0;
    std::size_t resident_pages = 0;
    statm >> total_pages >> resident_pages;
    return static_cast<double>(resident_pages) * 4.0;
}

/// Growth of the resident set beyond which the loop counts as leaking.
constexpr double flat_limit_kib = 8 * 1024;

/// Target 6: a bounded topic (65,536 items) under a producer thread and a co_await consumer for
/// BUFFERQUEUE_BENCH_RSS_SECONDS (default 60). Resident memory after the first tenth of the run
/// against the end.
void resident_memory_loop(benchmark::State& state)
{
    const double seconds = bq::bench::environment_number("BUFFERQUEUE_BENCH_RSS_SECONDS", 60);
    io_thread consumer_thread;
    bq::buffer_queue queue(consumer_thread.context().get_executor());
    queue.add_topic(bq::memory_topic_options<int>{.name = "loop", .partitions = 2, .bounded_capacity = 65536});
    bq::producer<int> producer = queue.producer<int>("loop");
    bq::pull_consumer<int> consumer =
        queue.create_pull_consumer<int>({.topic = "loop", .group = "g", .auto_commit = true, .batch_size = 1000});
    consuming_coroutine coroutine;
    coroutine.start(consumer_thread.context(), consumer);

    const std::vector<int>& items = messages();
    double early = 0;
    double late = 0;
    double peak = 0;
    std::uint64_t produced = 0;
    for (auto _ : state) {
        const auto start = clock_type::now();
        const auto warm = start + std::chrono::duration<double>(seconds / 10);
        const auto stop = start + std::chrono::duration<double>(seconds);
        bool warmed = false;
        for (auto now = start; now < stop; now = clock_type::now()) {
            for (int repeat = 0; repeat < 16; ++repeat) {
                if (producer.try_produce(std::span<const int>(items.data(), 256))) {
                    produced += 256;
                } else {
                    std::this_thread::yield();
                }
            }
            if (!warmed && now >= warm) {
                early = resident_kib();
                warmed = true;
            }
            peak = std::max(peak, resident_kib());
        }
        late = resident_kib();
        state.SetIterationTime(std::chrono::duration<double>(clock_type::now() - start).count());
    }
    bq::bench::spin_until([&] { return coroutine.received.load(std::memory_order_acquire) >= produced; });
    consumer.close();
    bq::bench::spin_until([&] { return coroutine.finished.load(std::memory_order_acquire); });
    if (late - early > flat_limit_kib) {
        state.SkipWithError("resident memory grew during the produce/consume loop");
    }
    state.counters["rss_early_kib"] = early;
    state.counters["rss_end_kib"] = late;
    state.counters["rss_peak_kib"] = peak;
    state.counters["rss_growth_kib"] = late - early;
    state.counters["items"] = static_cast<double>(produced);
    state.SetItemsProcessed(static_cast<std::int64_t>(produced));
}

const bool registered = [] {
    benchmark::RegisterBenchmark("end_to_end/single/bufferqueue", end_to_end_throughput, false)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark("end_to_end/batch64/bufferqueue", end_to_end_throughput, true)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
    const auto iterations =
        static_cast<benchmark::IterationCount>(bq::bench::environment_number("BUFFERQUEUE_BENCH_WAKEUPS", 1000));
    benchmark::RegisterBenchmark("wakeup/bufferqueue", wakeup_bufferqueue)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond)
        ->Iterations(iterations);
    benchmark::RegisterBenchmark("wakeup/asio_post", wakeup_asio_post)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond)
        ->Iterations(iterations);
    benchmark::RegisterBenchmark("memory/rss_loop", resident_memory_loop)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1)
        ->Repetitions(1);
    return true;
}();

}  // namespace
