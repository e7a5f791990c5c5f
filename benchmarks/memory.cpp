// Produce and consume throughput of memory topics beside peer queues, on the seed's workload (8,192
// ints), and the memory a backlog of 1,000,000 ints takes. Every row times one round: the team's
// threads move the 8,192 items once; setup and draining happen outside the timed region.
#include "bufferqueue/bufferqueue.hpp"

#include "bench_support.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/version.hpp>
#include <concurrentqueue/concurrentqueue.h>
#include <malloc.h>
#include <tbb/concurrent_queue.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#if BOOST_VERSION >= 108000 && __has_include(<boost/asio/experimental/concurrent_channel.hpp>)
#include <boost/asio/experimental/concurrent_channel.hpp>
#define BUFFERQUEUE_BENCH_HAS_CHANNEL 1
#else
#define BUFFERQUEUE_BENCH_HAS_CHANNEL 0
#endif

namespace bq = bufferqueue;
using bq::bench::message_count;
using bq::bench::messages;

namespace {

enum class produce_kind { single, batch };

/// Our side of the produce rows: `threads` threads sharing one producer of a topic with one partition
/// per thread, single items (try_produce(item)) or each thread's chunk as one span.
void produce_bufferqueue(benchmark::State& state, std::size_t threads, produce_kind kind, bool bounded)
{
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    bq::memory_topic_options<int> options{.name = "produce", .partitions = threads};
    if (bounded) {
        options.bounded_capacity = message_count;
    }
    queue.add_topic(options);
    bq::producer<int> producer = queue.producer<int>("produce");
    bq::pull_consumer<int> drain = queue.create_pull_consumer<int>(
        {.topic = "produce", .group = "drain", .auto_commit = true, .batch_size = message_count});

    const std::vector<int>& items = messages();
    std::atomic<bool> rejected{false};
    auto round = [&](std::size_t index) {
        const auto [first, last] = bq::bench::chunk_of(index, threads);
        if (kind == produce_kind::batch) {
            if (!producer.try_produce(std::span<const int>(items.data() + first, last - first))) {
                rejected.store(true);
            }
            return;
        }
        for (std::size_t i = first; i < last; ++i) {
            if (!producer.try_produce(items[i])) {
                rejected.store(true);
            }
        }
    };
    bq::bench::team crew(threads);
    for (auto _ : state) {
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

enum class peer_produce {
    moodycamel_enqueue,
    moodycamel_token_enqueue,
    moodycamel_enqueue_bulk,
    moodycamel_best_token_enqueue,  // constructed with capacity, producer tokens (issue 16)
    moodycamel_best_enqueue_bulk,   // the same, enqueue_bulk with the token
    tbb_push,
    mutex_deque_item,
    mutex_deque_chunk,
    channel_try_send,
};

void produce_peer(benchmark::State& state, std::size_t threads, peer_produce kind)
{
    const bool best =
        kind == peer_produce::moodycamel_best_token_enqueue || kind == peer_produce::moodycamel_best_enqueue_bulk;
    moodycamel::ConcurrentQueue<int> moodycamel_queue(best ? message_count * 4
                                                           : 6 * moodycamel::ConcurrentQueueDefaultTraits::BLOCK_SIZE);
    std::vector<std::unique_ptr<moodycamel::ProducerToken>> tokens;
    for (std::size_t i = 0; i < threads; ++i) {
        tokens.push_back(std::make_unique<moodycamel::ProducerToken>(moodycamel_queue));
    }
    tbb::concurrent_queue<int> tbb_queue;
    std::mutex mutex;
    std::deque<int> deque;
#if BUFFERQUEUE_BENCH_HAS_CHANNEL
    boost::asio::io_context io;
    boost::asio::experimental::concurrent_channel<void(boost::system::error_code, int)> channel(io, message_count);
#endif

    const std::vector<int>& items = messages();
    auto round = [&](std::size_t index) {
        const auto [first, last] = bq::bench::chunk_of(index, threads);
        switch (kind) {
        case peer_produce::moodycamel_enqueue:
            for (std::size_t i = first; i < last; ++i) {
                moodycamel_queue.enqueue(items[i]);
            }
            break;
        case peer_produce::moodycamel_token_enqueue:
            for (std::size_t i = first; i < last; ++i) {
                moodycamel_queue.enqueue(*tokens[index], items[i]);
            }
            break;
        case peer_produce::moodycamel_enqueue_bulk:
            moodycamel_queue.enqueue_bulk(items.data() + first, last - first);
            break;
        case peer_produce::moodycamel_best_token_enqueue:
            for (std::size_t i = first; i < last; ++i) {
                moodycamel_queue.enqueue(*tokens[index], items[i]);
            }
            break;
        case peer_produce::moodycamel_best_enqueue_bulk:
            moodycamel_queue.enqueue_bulk(*tokens[index], items.data() + first, last - first);
            break;
        case peer_produce::tbb_push:
            for (std::size_t i = first; i < last; ++i) {
                tbb_queue.push(items[i]);
            }
            break;
        case peer_produce::mutex_deque_item:
            for (std::size_t i = first; i < last; ++i) {
                std::lock_guard lock(mutex);
                deque.push_back(items[i]);
            }
            break;
        case peer_produce::mutex_deque_chunk: {
            std::lock_guard lock(mutex);
            deque.insert(deque.end(), items.begin() + static_cast<std::ptrdiff_t>(first),
                         items.begin() + static_cast<std::ptrdiff_t>(last));
            break;
        }
        case peer_produce::channel_try_send:
#if BUFFERQUEUE_BENCH_HAS_CHANNEL
            for (std::size_t i = first; i < last; ++i) {
                channel.try_send(boost::system::error_code(), items[i]);
            }
#endif
            break;
        }
    };
    bq::bench::team crew(threads);
    std::vector<int> buffer(message_count);
    for (auto _ : state) {
        state.SetIterationTime(crew.run(round));
        std::size_t drained = 0;
        switch (kind) {
        case peer_produce::moodycamel_enqueue:
        case peer_produce::moodycamel_token_enqueue:
        case peer_produce::moodycamel_enqueue_bulk:
        case peer_produce::moodycamel_best_token_enqueue:
        case peer_produce::moodycamel_best_enqueue_bulk:
            while (std::size_t taken = moodycamel_queue.try_dequeue_bulk(buffer.data(), buffer.size())) {
                drained += taken;
            }
            break;
        case peer_produce::tbb_push:
            for (int value = 0; tbb_queue.try_pop(value);) {
                ++drained;
            }
            break;
        case peer_produce::mutex_deque_item:
        case peer_produce::mutex_deque_chunk:
            drained = deque.size();
            deque.clear();
            break;
        case peer_produce::channel_try_send:
#if BUFFERQUEUE_BENCH_HAS_CHANNEL
            while (channel.try_receive([&](boost::system::error_code, int) { ++drained; })) {
            }
#endif
            break;
        }
        if (drained != message_count) {
            state.SkipWithError("the peer did not take and return all 8,192 items");
            break;
        }
    }
    bq::bench::set_items(state, message_count);
}

/// Our side of the consume rows: `threads` consumers of one group over `threads` partitions, prefilled
/// with the 8,192 items outside the timed region, drain with try_consume, auto commit.
void consume_bufferqueue(benchmark::State& state, std::size_t threads, std::size_t batch_size)
{
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(bq::memory_topic_options<int>{.name = "consume", .partitions = threads});
    bq::producer<int> producer = queue.producer<int>("consume");
    std::vector<bq::pull_consumer<int>> consumers = queue.create_pull_consumers<int>(
        {.topic = "consume", .group = "drain", .auto_commit = true, .batch_size = batch_size}, threads);

    std::vector<std::size_t> counts(threads * 8);  // one cache line apart
    auto round = [&](std::size_t index) {
        std::size_t count = 0;
        long long sum = 0;
        while (auto batch = consumers[index].try_consume()) {
            for (int value : *batch) {
                sum += value;
            }
            count += batch->size();
        }
        benchmark::DoNotOptimize(sum);
        counts[index * 8] = count;
    };
    bq::bench::team crew(threads);
    for (auto _ : state) {
        producer.try_produce(std::span<const int>(messages()));
        state.SetIterationTime(crew.run(round));
        std::size_t total = 0;
        for (std::size_t i = 0; i < threads; ++i) {
            total += counts[i * 8];
        }
        if (total != message_count) {
            state.SkipWithError("the consumers did not receive all 8,192 items");
            break;
        }
    }
    bq::bench::set_items(state, message_count);
}

enum class peer_consume {
    moodycamel_try_dequeue,
    moodycamel_try_dequeue_bulk,
    tbb_try_pop,
    mutex_deque_item,
    mutex_deque_chunk,
    channel_try_receive,
};

void consume_peer(benchmark::State& state, std::size_t threads, peer_consume kind, std::size_t batch_size)
{
    moodycamel::ConcurrentQueue<int> moodycamel_queue;
    tbb::concurrent_queue<int> tbb_queue;
    std::mutex mutex;
    std::deque<int> deque;
#if BUFFERQUEUE_BENCH_HAS_CHANNEL
    boost::asio::io_context io;
    boost::asio::experimental::concurrent_channel<void(boost::system::error_code, int)> channel(io, message_count);
#endif
    std::vector<std::vector<int>> buffers(threads, std::vector<int>(batch_size));
    std::vector<std::size_t> counts(threads * 8);

    auto round = [&](std::size_t index) {
        std::size_t count = 0;
        long long sum = 0;
        std::vector<int>& buffer = buffers[index];
        switch (kind) {
        case peer_consume::moodycamel_try_dequeue:
            for (int value = 0; moodycamel_queue.try_dequeue(value); ++count) {
                sum += value;
            }
            break;
        case peer_consume::moodycamel_try_dequeue_bulk:
            while (std::size_t taken = moodycamel_queue.try_dequeue_bulk(buffer.data(), batch_size)) {
                for (std::size_t i = 0; i < taken; ++i) {
                    sum += buffer[i];
                }
                count += taken;
            }
            break;
        case peer_consume::tbb_try_pop:
            for (int value = 0; tbb_queue.try_pop(value); ++count) {
                sum += value;
            }
            break;
        case peer_consume::mutex_deque_item:
            for (;;) {
                int value = 0;
                {
                    std::lock_guard lock(mutex);
                    if (deque.empty()) {
                        break;
                    }
                    value = deque.front();
                    deque.pop_front();
                }
                sum += value;
                ++count;
            }
            break;
        case peer_consume::mutex_deque_chunk:
            for (;;) {
                std::size_t taken = 0;
                {
                    std::lock_guard lock(mutex);
                    taken = std::min(batch_size, deque.size());
                    std::copy_n(deque.begin(), taken, buffer.begin());
                    deque.erase(deque.begin(), deque.begin() + static_cast<std::ptrdiff_t>(taken));
                }
                if (taken == 0) {
                    break;
                }
                for (std::size_t i = 0; i < taken; ++i) {
                    sum += buffer[i];
                }
                count += taken;
            }
            break;
        case peer_consume::channel_try_receive:
#if BUFFERQUEUE_BENCH_HAS_CHANNEL
            while (channel.try_receive([&](boost::system::error_code, int value) {
                sum += value;
                ++count;
            })) {
            }
#endif
            break;
        }
        benchmark::DoNotOptimize(sum);
        counts[index * 8] = count;
    };
    bq::bench::team crew(threads);
    const std::vector<int>& items = messages();
    for (auto _ : state) {
        switch (kind) {
        case peer_consume::moodycamel_try_dequeue:
        case peer_consume::moodycamel_try_dequeue_bulk:
            moodycamel_queue.enqueue_bulk(items.data(), items.size());
            break;
        case peer_consume::tbb_try_pop:
            for (int value : items) {
                tbb_queue.push(value);
            }
            break;
        case peer_consume::mutex_deque_item:
        case peer_consume::mutex_deque_chunk: deque.assign(items.begin(), items.end()); break;
        case peer_consume::channel_try_receive:
#if BUFFERQUEUE_BENCH_HAS_CHANNEL
            for (int value : items) {
                channel.try_send(boost::system::error_code(), value);
            }
#endif
            break;
        }
        state.SetIterationTime(crew.run(round));
        std::size_t total = 0;
        for (std::size_t i = 0; i < threads; ++i) {
            total += counts[i * 8];
        }
        if (total != message_count) {
            state.SkipWithError("the peer consumers did not receive all 8,192 items");
            break;
        }
    }
    bq::bench::set_items(state, message_count);
}

/// Heap bytes in use (every arena, including mmap'ed blocks).
std::size_t heap_in_use()
{
    const struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
}

/// Issue 16, section 3a: one consumer owning `partitions` partitions of which one is busy (every
/// item keyed to partition 0), or all of them (`all_busy`: round-robin), draining 1,024 items with
/// try_consume at batch 1, so every item costs a ring scan. Auto commit; the produce is outside the
/// timed region.
void scale_partitions(benchmark::State& state, std::size_t partitions, bool all_busy)
{
    constexpr std::size_t items = 1024;
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    bq::memory_topic_options<int> options{.name = "scale", .partitions = partitions};
    if (!all_busy) {
        options.partition_key = [](const int&) { return std::int64_t{1}; };
    }
    queue.add_topic(std::move(options));
    bq::producer<int> producer = queue.producer<int>("scale");
    bq::pull_consumer<int> consumer =
        queue.create_pull_consumer<int>({.topic = "scale", .group = "one", .auto_commit = true, .batch_size = 1});
    const std::span<const int> chunk(messages().data(), items);
    for (auto _ : state) {
        producer.try_produce(chunk);
        const auto start = std::chrono::steady_clock::now();
        std::size_t count = 0;
        while (auto batch = consumer.try_consume()) {
            count += batch->size();
        }
        state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        if (count != items) {
            state.SkipWithError("the consumer did not receive all 1,024 items");
            break;
        }
    }
    bq::bench::set_items(state, items);
}

/// Issue 16, section 3b: `groups` consumer groups (one consumer each) on one partition, in lockstep
/// (each group takes the next item in turn, try_consume at batch 1, auto commit), so every commit
/// is one of many groups'. Items per iteration: 256 per group; the rate is per item and group.
void scale_groups(benchmark::State& state, std::size_t groups)
{
    constexpr std::size_t items = 256;
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(bq::memory_topic_options<int>{.name = "scale", .partitions = 1});
    bq::producer<int> producer = queue.producer<int>("scale");
    std::vector<bq::pull_consumer<int>> consumers;
    for (std::size_t index = 0; index < groups; ++index) {
        consumers.push_back(queue.create_pull_consumer<int>(
            {.topic = "scale", .group = "group-" + std::to_string(index), .auto_commit = true, .batch_size = 1}));
    }
    const std::span<const int> chunk(messages().data(), items);
    for (auto _ : state) {
        producer.try_produce(chunk);
        const auto start = std::chrono::steady_clock::now();
        std::size_t count = 0;
        for (std::size_t item = 0; item < items; ++item) {
            for (bq::pull_consumer<int>& consumer : consumers) {
                if (auto batch = consumer.try_consume()) {
                    count += batch->size();
                }
            }
        }
        state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        if (count != items * groups) {
            state.SkipWithError("the groups did not each receive all 256 items");
            break;
        }
    }
    bq::bench::set_items(state, items * groups);
}

/// Target 6: the heap a memory topic needs for 1,000,000 pending ints, against their raw 4,000,000
/// bytes. Deterministic, so one iteration.
void pending_million_ints(benchmark::State& state)
{
    constexpr std::size_t pending = 1'000'000;
    std::vector<int> chunk(message_count);
    std::iota(chunk.begin(), chunk.end(), 0);
    double ratio = 0;
    double bytes = 0;
    for (auto _ : state) {
        boost::asio::io_context io;
        const std::size_t before = heap_in_use();
        {
            bq::buffer_queue queue(io.get_executor());
            queue.add_topic(bq::memory_topic_options<int>{.name = "backlog", .partitions = 2});
            bq::producer<int> producer = queue.producer<int>("backlog");
            const std::size_t empty_topic = heap_in_use() - before;
            for (std::size_t produced = 0; produced < pending;) {
                const std::size_t count = std::min(chunk.size(), pending - produced);
                producer.try_produce(std::span<const int>(chunk.data(), count));
                produced += count;
            }
            bytes = static_cast<double>(heap_in_use() - before - empty_topic);
        }
        ratio = bytes / static_cast<double>(pending * sizeof(int));
    }
    state.counters["bytes"] = bytes;
    state.counters["ratio_to_raw"] = ratio;
}

void register_all()
{
    const std::size_t hardware = bq::bench::hardware_threads();
    std::vector<std::size_t> producer_counts{hardware};
    if (hardware != 12) {
        producer_counts.push_back(12);
    }
    auto configure = [](benchmark::internal::Benchmark* benchmark) {
        benchmark->UseManualTime()->Unit(benchmark::kMicrosecond);
    };
    for (std::size_t threads : producer_counts) {
        const std::string p = "/p:" + std::to_string(threads);
        for (bool bounded : {false, true}) {
            const std::string mode = bounded ? "bounded" : "unbounded";
            configure(benchmark::RegisterBenchmark(("produce/single/bufferqueue_" + mode + p).c_str(),
                                                   produce_bufferqueue, threads, produce_kind::single, bounded));
            configure(benchmark::RegisterBenchmark(("produce/batch/bufferqueue_" + mode + p).c_str(),
                                                   produce_bufferqueue, threads, produce_kind::batch, bounded));
        }
        const std::pair<const char*, peer_produce> peers[] = {
            {"produce/single/moodycamel_enqueue", peer_produce::moodycamel_enqueue},
            {"produce/single/moodycamel_token_enqueue", peer_produce::moodycamel_token_enqueue},
            {"produce/single/tbb_push", peer_produce::tbb_push},
            {"produce/single/mutex_deque_item", peer_produce::mutex_deque_item},
            {"produce/batch/moodycamel_enqueue_bulk", peer_produce::moodycamel_enqueue_bulk},
            {"produce/single/moodycamel_best_token_enqueue", peer_produce::moodycamel_best_token_enqueue},
            {"produce/batch/moodycamel_best_enqueue_bulk", peer_produce::moodycamel_best_enqueue_bulk},
            {"produce/batch/mutex_deque_chunk", peer_produce::mutex_deque_chunk},
#if BUFFERQUEUE_BENCH_HAS_CHANNEL
            {"produce/single/asio_channel_try_send", peer_produce::channel_try_send},
#endif
        };
        for (const auto& [name, kind] : peers) {
            configure(benchmark::RegisterBenchmark((name + p).c_str(), produce_peer, threads, kind));
        }
    }

    const std::string c = "/c:" + std::to_string(hardware);
    for (std::size_t batch_size : {1, 10, 100, 1000}) {
        const std::string b = "/batch:" + std::to_string(batch_size);
        configure(benchmark::RegisterBenchmark(("consume/bufferqueue" + b + c).c_str(), consume_bufferqueue, hardware,
                                               batch_size));
        if (batch_size == 1) {
            configure(benchmark::RegisterBenchmark(("consume/moodycamel_try_dequeue" + b + c).c_str(), consume_peer,
                                                   hardware, peer_consume::moodycamel_try_dequeue, batch_size));
            configure(benchmark::RegisterBenchmark(("consume/tbb_try_pop" + b + c).c_str(), consume_peer, hardware,
                                                   peer_consume::tbb_try_pop, batch_size));
            configure(benchmark::RegisterBenchmark(("consume/mutex_deque_item" + b + c).c_str(), consume_peer, hardware,
                                                   peer_consume::mutex_deque_item, batch_size));
#if BUFFERQUEUE_BENCH_HAS_CHANNEL
            configure(benchmark::RegisterBenchmark(("consume/asio_channel_try_receive" + b + c).c_str(), consume_peer,
                                                   hardware, peer_consume::channel_try_receive, batch_size));
#endif
        } else {
            configure(benchmark::RegisterBenchmark(("consume/moodycamel_try_dequeue_bulk" + b + c).c_str(),
                                                   consume_peer, hardware, peer_consume::moodycamel_try_dequeue_bulk,
                                                   batch_size));
            configure(benchmark::RegisterBenchmark(("consume/mutex_deque_chunk" + b + c).c_str(), consume_peer,
                                                   hardware, peer_consume::mutex_deque_chunk, batch_size));
        }
    }

    for (std::size_t partitions : {4, 15, 64, 1024, 16384}) {
        configure(benchmark::RegisterBenchmark(("scale/partitions:" + std::to_string(partitions)).c_str(),
                                               scale_partitions, partitions, false));
    }
    // Every partition busy: what the ready set's marks cost when no partition is idle.
    for (std::size_t partitions : {16, 64, 255}) {
        configure(benchmark::RegisterBenchmark(("scale/busy_partitions:" + std::to_string(partitions)).c_str(),
                                               scale_partitions, partitions, true));
    }
    for (std::size_t groups : {10, 100, 1000}) {
        configure(
            benchmark::RegisterBenchmark(("scale/groups:" + std::to_string(groups)).c_str(), scale_groups, groups));
    }

    configure(benchmark::RegisterBenchmark("limit/memcpy_32KiB", bq::bench::copy_limit));
    benchmark::RegisterBenchmark("memory/pending_1M_ints", pending_million_ints)->Iterations(1)->Repetitions(1);
}

const bool registered = (register_all(), true);

}  // namespace
