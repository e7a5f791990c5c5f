// Issue 16, section 1: the paths users run, beside each peer at its best, in one binary so the
// ratios come from one run with interleaved repetitions.
// - `co_await consume()`: consumer coroutines already parked on io_context threads when a round
//   starts; the round produces the 8,192 ints as one batch and ends when the last one was seen
//   (batch sizes 10, 100 and 1000: issue 28, target 2).
//   The peer: moodycamel::BlockingConcurrentQueue (its waiting consumer) constructed with capacity,
//   a producer token, a consumer token per thread, `wait_dequeue_bulk`.
// - batch produce into a topic just created (segments not yet allocated), against enqueue_bulk with
//   a producer token into a moodycamel queue just constructed with capacity.
// - the seed's shape: 12 producers and 12 consumers over 12 partitions (oversubscribed here).
// - the physical limit: memcpy of the 32 KiB.
#include "bufferqueue/bufferqueue.hpp"

#include "awaited_consumers.hpp"
#include "bench_support.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <concurrentqueue/blockingconcurrentqueue.h>
#include <concurrentqueue/concurrentqueue.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace bq = bufferqueue;
using bq::bench::message_count;
using bq::bench::messages;

namespace {

using bq::bench::round_tally;

/// `co_await consume()` rounds: `consumers` consumers of one group over as many partitions, each
/// looping in a coroutine on its own io_context thread; `producers` threads produce the round
/// (`single`: one item per call, else each thread's chunk as one span). Auto commit.
void awaited_bufferqueue(benchmark::State& state, std::size_t producers, std::size_t consumers, std::size_t batch_size,
                         bool single)
{
    round_tally tally(message_count);
    bq::bench::awaited_consumers<int> consumers_of(consumers);
    bq::buffer_queue& queue = consumers_of.queue();
    queue.add_topic(bq::memory_topic_options<int>{.name = "awaited", .partitions = consumers});
    bq::producer<int> producer = queue.producer<int>("awaited");
    consumers_of.start("awaited", batch_size, tally, [](int value) { return static_cast<std::size_t>(value); });
    const std::vector<int>& items = messages();
    bq::bench::team crew(producers);
    auto produce = [&](std::size_t index) {
        const auto [first, last] = bq::bench::chunk_of(index, producers);
        if (!single) {
            producer.try_produce(std::span<const int>(items.data() + first, last - first));
            return;
        }
        for (std::size_t i = first; i < last; ++i) {
            producer.try_produce(items[i]);
        }
    };
    for (auto _ : state) {
        tally.start();
        if (producers == 1) {
            produce(0);
        } else {
            crew.run(produce);
        }
        state.SetIterationTime(tally.wait());
        if (tally.seen() != message_count) {
            state.SkipWithError("the consumers did not see all 8,192 items");
            break;
        }
    }
    bq::bench::set_items(state, message_count);  // the rig closes the queue and joins its threads
}

/// The same rounds over moodycamel::BlockingConcurrentQueue at its best: constructed with capacity,
/// producer tokens, a consumer token per consumer thread, `wait_dequeue_bulk` of `batch_size`.
void awaited_moodycamel(benchmark::State& state, std::size_t producers, std::size_t consumers, std::size_t batch_size,
                        bool single)
{
    moodycamel::BlockingConcurrentQueue<int> queue(message_count * 4);
    std::vector<std::unique_ptr<moodycamel::ProducerToken>> tokens;
    for (std::size_t index = 0; index < producers; ++index) {
        tokens.push_back(std::make_unique<moodycamel::ProducerToken>(queue));
    }
    round_tally tally(message_count);
    std::atomic<bool> stopping{false};
    std::vector<std::thread> threads;
    for (std::size_t index = 0; index < consumers; ++index) {
        threads.emplace_back([&, batch_size] {
            moodycamel::ConsumerToken token(queue);
            std::vector<int> buffer(batch_size);
            while (!stopping.load(std::memory_order_acquire)) {
                const std::size_t taken =
                    queue.wait_dequeue_bulk_timed(token, buffer.data(), batch_size, std::chrono::milliseconds(50));
                long long sum = 0;
                for (std::size_t i = 0; i < taken; ++i) {
                    sum += buffer[i];
                }
                benchmark::DoNotOptimize(sum);
                if (taken > 0) {
                    tally.add(taken);
                }
            }
        });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const std::vector<int>& items = messages();
    bq::bench::team crew(producers);
    auto produce = [&](std::size_t index) {
        const auto [first, last] = bq::bench::chunk_of(index, producers);
        if (!single) {
            queue.enqueue_bulk(*tokens[index], items.data() + first, last - first);
            return;
        }
        for (std::size_t i = first; i < last; ++i) {
            queue.enqueue(*tokens[index], items[i]);
        }
    };
    for (auto _ : state) {
        tally.start();
        if (producers == 1) {
            produce(0);
        } else {
            crew.run(produce);
        }
        state.SetIterationTime(tally.wait());
        if (tally.seen() != message_count) {
            state.SkipWithError("the consumers did not see all 8,192 items");
            break;
        }
    }
    stopping.store(true, std::memory_order_release);
    for (std::thread& thread : threads) {
        thread.join();
    }
    bq::bench::set_items(state, message_count);
}

/// Batch produce into a topic created for this iteration (outside the timed region): `threads`
/// threads, each its chunk as one span, one partition per thread.
void fresh_produce_bufferqueue(benchmark::State& state, std::size_t threads)
{
    const std::vector<int>& items = messages();
    bq::bench::team crew(threads);
    for (auto _ : state) {
        boost::asio::io_context io;
        bq::buffer_queue queue(io.get_executor());
        queue.add_topic(bq::memory_topic_options<int>{.name = "fresh", .partitions = threads});
        bq::producer<int> producer = queue.producer<int>("fresh");
        bq::pull_consumer<int> drain = queue.create_pull_consumer<int>(
            {.topic = "fresh", .group = "drain", .auto_commit = true, .batch_size = message_count});
        std::atomic<bool> rejected{false};
        auto round = [&](std::size_t index) {
            const auto [first, last] = bq::bench::chunk_of(index, threads);
            if (!producer.try_produce(std::span<const int>(items.data() + first, last - first))) {
                rejected.store(true);
            }
        };
        state.SetIterationTime(crew.run(round));
        std::size_t drained = 0;
        while (auto batch = drain.try_consume()) {
            drained += batch->size();
        }
        if (rejected.load() || drained != message_count) {
            state.SkipWithError("the topic did not take and return all 8,192 items");
            break;
        }
    }
    bq::bench::set_items(state, message_count);
}

/// enqueue_bulk with a producer token into a moodycamel queue constructed with capacity for this
/// iteration (outside the timed region, with the tokens).
void fresh_produce_moodycamel(benchmark::State& state, std::size_t threads)
{
    const std::vector<int>& items = messages();
    bq::bench::team crew(threads);
    std::vector<int> buffer(message_count);
    for (auto _ : state) {
        moodycamel::ConcurrentQueue<int> queue(message_count * 4);
        std::vector<std::unique_ptr<moodycamel::ProducerToken>> tokens;
        for (std::size_t index = 0; index < threads; ++index) {
            tokens.push_back(std::make_unique<moodycamel::ProducerToken>(queue));
        }
        std::atomic<bool> rejected{false};
        auto round = [&](std::size_t index) {
            const auto [first, last] = bq::bench::chunk_of(index, threads);
            if (!queue.enqueue_bulk(*tokens[index], items.data() + first, last - first)) {
                rejected.store(true);
            }
        };
        state.SetIterationTime(crew.run(round));
        std::size_t drained = 0;
        while (std::size_t taken = queue.try_dequeue_bulk(buffer.data(), buffer.size())) {
            drained += taken;
        }
        if (rejected.load() || drained != message_count) {
            state.SkipWithError("the peer did not take and return all 8,192 items");
            break;
        }
    }
    bq::bench::set_items(state, message_count);
}

/// Awaited single-item produce into a bounded topic that stays full: 4 producer coroutines each
/// `co_await produce(item)` their quarter of the round, one auto-commit consumer coroutine frees
/// room batch by batch, all on one io_context run by 2 threads. At capacity 256 nearly every
/// produce waits for room (granted one waiter at a time, in order: the cost of the order guarantee
/// of docs/memory-storage.md); at 4,096 few do. The round ends when the consumer saw every item.
void bounded_wait_bufferqueue(benchmark::State& state, std::size_t capacity)
{
    constexpr std::size_t producers = 4;
    boost::asio::io_context io(2);
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(bq::memory_topic_options<int>{
        .name = "bounded", .partitions = 4, .bounded_capacity = capacity, .full_mode = bq::full_mode::wait});
    bq::producer<int> producer = queue.producer<int>("bounded");
    bq::pull_consumer<int> consumer =
        queue.create_pull_consumer<int>({.topic = "bounded", .group = "drain", .auto_commit = true, .batch_size = 256});
    round_tally tally(message_count);
    boost::asio::co_spawn(
        io,
        [&]() -> boost::asio::awaitable<void> {
            for (;;) {
                bq::batch<int> delivered = co_await consumer.consume();
                tally.add(delivered.size());
            }
        },
        boost::asio::detached);
    auto work = boost::asio::make_work_guard(io);
    std::vector<std::thread> threads;
    for (int index = 0; index < 2; ++index) {
        threads.emplace_back([&io] { io.run(); });
    }
    const std::vector<int>& items = messages();
    std::atomic<bool> failed{false};
    for (auto _ : state) {
        tally.start();
        for (std::size_t index = 0; index < producers; ++index) {
            boost::asio::co_spawn(
                io,
                [&, index]() -> boost::asio::awaitable<void> {
                    const auto [first, last] = bq::bench::chunk_of(index, producers);
                    for (std::size_t i = first; i < last; ++i) {
                        co_await producer.produce(items[i]);
                    }
                },
                [&failed](std::exception_ptr error) {
                    if (error) {
                        failed.store(true);
                    }
                });
        }
        state.SetIterationTime(tally.wait());
        if (failed.load() || tally.seen() != message_count) {
            state.SkipWithError("the consumer did not see all 8,192 items");
            break;
        }
    }
    queue.close();  // ends the consumer loop
    work.reset();
    for (std::thread& thread : threads) {
        thread.join();
    }
    bq::bench::set_items(state, message_count);
}

void register_all()
{
    const std::size_t hardware = bq::bench::hardware_threads();
    auto configure = [](benchmark::internal::Benchmark* benchmark) {
        benchmark->UseManualTime()->Unit(benchmark::kMicrosecond);
    };
    const std::string c = "/c:" + std::to_string(hardware);
    for (std::size_t batch_size : {10, 100, 1000}) {
        const std::string b = "/batch:" + std::to_string(batch_size);
        configure(benchmark::RegisterBenchmark(("user/awaited_consume/bufferqueue" + b + c).c_str(),
                                               awaited_bufferqueue, 1, hardware, batch_size, false));
        configure(benchmark::RegisterBenchmark(("user/awaited_consume/moodycamel_blocking_best" + b + c).c_str(),
                                               awaited_moodycamel, 1, hardware, batch_size, false));
    }
    const std::string p = "/p:" + std::to_string(hardware);
    configure(benchmark::RegisterBenchmark(("user/fresh_batch_produce/bufferqueue" + p).c_str(),
                                           fresh_produce_bufferqueue, hardware));
    configure(benchmark::RegisterBenchmark(("user/fresh_batch_produce/moodycamel_best_enqueue_bulk" + p).c_str(),
                                           fresh_produce_moodycamel, hardware));
    // The seed's own shape: 12 producers of single items, 12 consumers, 12 partitions, batch 100.
    configure(
        benchmark::RegisterBenchmark("user/seed_shape/bufferqueue/p:12/c:12", awaited_bufferqueue, 12, 12, 100, true));
    configure(benchmark::RegisterBenchmark("user/seed_shape/moodycamel_blocking_best/p:12/c:12", awaited_moodycamel, 12,
                                           12, 100, true));
    for (std::size_t capacity : {256, 4096}) {
        configure(benchmark::RegisterBenchmark(
            ("user/bounded_wait/bufferqueue/capacity:" + std::to_string(capacity) + "/p:4").c_str(),
            bounded_wait_bufferqueue, capacity));
    }
    configure(benchmark::RegisterBenchmark("user/limit/memcpy_32KiB", bq::bench::copy_limit));
}

const bool registered = (register_all(), true);

}  // namespace
