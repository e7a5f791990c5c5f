// Real items: a 64-byte trivially copyable record and a ~100-byte std::string.
// - Producing, moved in: 8,192 per round from every hardware thread's chunk, into a memory topic
//   (try_produce(T&&), and try_produce(std::vector<T>&&) per chunk) beside moodycamel at its best
//   (capacity reserved, producer tokens, enqueue(token, T&&) and enqueue_bulk of move iterators)
//   and a mutex-guarded deque moving the same items. Only the moves are timed: both sides build
//   their input (allocating the strings) before the round and drain and free it after.
// - `co_await consume()`: consumer coroutines parked on io_context threads (one per hardware
//   thread and partition, auto commit); the round moves the 8,192 items in as one batch and ends
//   when the last one was seen, each item read (its id, or its size and first byte). The peer:
//   moodycamel::BlockingConcurrentQueue at its best (capacity, a producer token, a consumer token
//   per thread, `wait_dequeue_bulk` moving the items out into a buffer whose previous strings are
//   freed as they are overwritten). The input is built outside the timed region on both sides;
//   the strings are freed inside it on both (by the topic as its segments are recycled).
#include "bufferqueue/bufferqueue.hpp"

#include "awaited_consumers.hpp"
#include "bench_support.hpp"

#include <boost/asio/io_context.hpp>
#include <concurrentqueue/blockingconcurrentqueue.h>
#include <concurrentqueue/concurrentqueue.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace bq = bufferqueue;
using bq::bench::message_count;

namespace {

/// A 64-byte record: what a service buffers when its messages are small structs.
struct record64 {
    std::uint64_t id = 0;
    std::array<char, 56> payload{};
};
static_assert(sizeof(record64) == 64);

record64 make_record(std::size_t index)
{
    record64 made;
    made.id = index;
    made.payload.fill(static_cast<char>('a' + index % 26));
    return made;
}

std::string make_string(std::size_t index)
{
    return std::string(100, static_cast<char>('a' + index % 26));
}

template <class T>
T make_item(std::size_t index)
{
    if constexpr (std::is_same_v<T, record64>) {
        return make_record(index);
    } else {
        return make_string(index);
    }
}

enum class shape { single, batch };
enum class side { bufferqueue, moodycamel_best, mutex_deque };

/// Each thread's chunk of the round, rebuilt before every round (the last round moved it out).
template <class T>
void refill(std::vector<std::vector<T>>& chunks, std::size_t threads)
{
    for (std::size_t index = 0; index < threads; ++index) {
        const auto [first, last] = bq::bench::chunk_of(index, threads);
        chunks[index].clear();
        for (std::size_t i = first; i < last; ++i) {
            chunks[index].push_back(make_item<T>(i));
        }
    }
}

template <class T>
void produce_moved(benchmark::State& state, side who, shape kind)
{
    const std::size_t threads = bq::bench::hardware_threads();
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(bq::memory_topic_options<T>{.name = "items", .partitions = threads});
    bq::producer<T> producer = queue.producer<T>("items");
    bq::pull_consumer<T> drain = queue.create_pull_consumer<T>(
        {.topic = "items", .group = "drain", .auto_commit = true, .batch_size = message_count});
    moodycamel::ConcurrentQueue<T> moodycamel_queue(message_count * 4);
    std::vector<std::unique_ptr<moodycamel::ProducerToken>> tokens;
    for (std::size_t i = 0; i < threads; ++i) {
        tokens.push_back(std::make_unique<moodycamel::ProducerToken>(moodycamel_queue));
    }
    std::mutex mutex;
    std::deque<T> deque;

    std::vector<std::vector<T>> chunks(threads);
    std::atomic<bool> rejected{false};
    auto round = [&](std::size_t index) {
        std::vector<T>& chunk = chunks[index];
        switch (who) {
        case side::bufferqueue:
            if (kind == shape::batch) {
                if (!producer.try_produce(std::move(chunk))) {
                    rejected.store(true);
                }
            } else {
                for (T& item : chunk) {
                    if (!producer.try_produce(std::move(item))) {
                        rejected.store(true);
                    }
                }
            }
            break;
        case side::moodycamel_best:
            if (kind == shape::batch) {
                moodycamel_queue.enqueue_bulk(*tokens[index], std::make_move_iterator(chunk.begin()), chunk.size());
            } else {
                for (T& item : chunk) {
                    moodycamel_queue.enqueue(*tokens[index], std::move(item));
                }
            }
            break;
        case side::mutex_deque:
            if (kind == shape::batch) {
                std::lock_guard lock(mutex);
                deque.insert(deque.end(), std::make_move_iterator(chunk.begin()), std::make_move_iterator(chunk.end()));
            } else {
                for (T& item : chunk) {
                    std::lock_guard lock(mutex);
                    deque.push_back(std::move(item));
                }
            }
            break;
        }
    };
    bq::bench::team crew(threads);
    std::vector<T> taken;
    taken.reserve(message_count);
    for (auto _ : state) {
        refill(chunks, threads);
        state.SetIterationTime(crew.run(round));
        std::size_t drained = 0;
        switch (who) {
        case side::bufferqueue:
            while (auto batch = drain.try_consume()) {
                drained += batch->size();
            }
            break;
        case side::moodycamel_best:
            taken.clear();
            while (std::size_t count = moodycamel_queue.try_dequeue_bulk(std::back_inserter(taken), message_count)) {
                drained += count;
            }
            break;
        case side::mutex_deque:
            drained = deque.size();
            deque.clear();
            break;
        }
        if (rejected.load() || drained != message_count) {
            state.SkipWithError("the queue did not take and return all 8,192 items");
            break;
        }
    }
    bq::bench::set_items(state, message_count);
}

/// What a consumer reads of an item: a record's id and first byte, a string's size and first byte.
template <class T>
std::size_t touch(const T& item)
{
    if constexpr (std::is_same_v<T, record64>) {
        return static_cast<std::size_t>(item.id) + static_cast<unsigned char>(item.payload[0]);
    } else {
        return item.size() + static_cast<unsigned char>(item.empty() ? 0 : item[0]);
    }
}

/// The 8,192 items of one round, built outside the timed region.
template <class T>
std::vector<T> round_items()
{
    std::vector<T> items;
    items.reserve(message_count);
    for (std::size_t i = 0; i < message_count; ++i) {
        items.push_back(make_item<T>(i));
    }
    return items;
}

template <class T>
void awaited_consume_bufferqueue(benchmark::State& state, std::size_t batch_size)
{
    const std::size_t consumers = bq::bench::hardware_threads();
    bq::bench::round_tally tally(message_count);
    bq::bench::awaited_consumers<T> consumers_of(consumers);
    bq::buffer_queue& queue = consumers_of.queue();
    queue.add_topic(bq::memory_topic_options<T>{.name = "awaited", .partitions = consumers});
    bq::producer<T> producer = queue.producer<T>("awaited");
    consumers_of.start("awaited", batch_size, tally, [](const T& item) { return touch(item); });
    for (auto _ : state) {
        std::vector<T> items = round_items<T>();
        tally.start();
        const bool taken = producer.try_produce(std::move(items));
        state.SetIterationTime(tally.wait());
        if (!taken || tally.seen() != message_count) {
            state.SkipWithError("the consumers did not see all 8,192 items");
            break;
        }
    }
    bq::bench::set_items(state, message_count);  // the rig closes the queue and joins its threads
}

template <class T>
void awaited_consume_moodycamel(benchmark::State& state, std::size_t batch_size)
{
    const std::size_t consumers = bq::bench::hardware_threads();
    moodycamel::BlockingConcurrentQueue<T> queue(message_count * 4);
    moodycamel::ProducerToken producer_token(queue);
    bq::bench::round_tally tally(message_count);
    std::atomic<bool> stopping{false};
    std::vector<std::thread> threads;
    for (std::size_t index = 0; index < consumers; ++index) {
        threads.emplace_back([&, batch_size] {
            moodycamel::ConsumerToken token(queue);
            std::vector<T> buffer(batch_size);
            while (!stopping.load(std::memory_order_acquire)) {
                const std::size_t taken =
                    queue.wait_dequeue_bulk_timed(token, buffer.begin(), batch_size, std::chrono::milliseconds(50));
                std::size_t read = 0;
                for (std::size_t i = 0; i < taken; ++i) {
                    read += touch(buffer[i]);
                }
                benchmark::DoNotOptimize(read);
                if (taken > 0) {
                    tally.add(taken);
                }
            }
        });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (auto _ : state) {
        std::vector<T> items = round_items<T>();
        tally.start();
        const bool taken = queue.enqueue_bulk(producer_token, std::make_move_iterator(items.begin()), items.size());
        state.SetIterationTime(tally.wait());
        if (!taken || tally.seen() != message_count) {
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

void register_all()
{
    const std::string p = "/p:" + std::to_string(bq::bench::hardware_threads());
    const std::pair<const char*, side> sides[] = {{"bufferqueue", side::bufferqueue},
                                                  {"moodycamel_best", side::moodycamel_best},
                                                  {"mutex_deque", side::mutex_deque}};
    const std::pair<const char*, shape> shapes[] = {{"single", shape::single}, {"batch", shape::batch}};
    for (const auto& [shape_name, kind] : shapes) {
        for (const auto& [side_name, who] : sides) {
            const std::string suffix = std::string(shape_name) + "/" + side_name;
            benchmark::RegisterBenchmark(("items/produce/struct64/" + suffix + p).c_str(), produce_moved<record64>, who,
                                         kind)
                ->UseManualTime()
                ->Unit(benchmark::kMicrosecond);
            benchmark::RegisterBenchmark(("items/produce/string100/" + suffix + p).c_str(), produce_moved<std::string>,
                                         who, kind)
                ->UseManualTime()
                ->Unit(benchmark::kMicrosecond);
        }
    }
    const std::string c = "/c:" + std::to_string(bq::bench::hardware_threads());
    for (const std::size_t batch_size : {10, 100, 1000}) {
        const std::string suffix = "/batch:" + std::to_string(batch_size) + c;
        benchmark::RegisterBenchmark(("items/awaited_consume/struct64/bufferqueue" + suffix).c_str(),
                                     awaited_consume_bufferqueue<record64>, batch_size)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark(("items/awaited_consume/struct64/moodycamel_blocking_best" + suffix).c_str(),
                                     awaited_consume_moodycamel<record64>, batch_size)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark(("items/awaited_consume/string100/bufferqueue" + suffix).c_str(),
                                     awaited_consume_bufferqueue<std::string>, batch_size)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark(("items/awaited_consume/string100/moodycamel_blocking_best" + suffix).c_str(),
                                     awaited_consume_moodycamel<std::string>, batch_size)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
    }
}

const bool registered = (register_all(), true);

}  // namespace
