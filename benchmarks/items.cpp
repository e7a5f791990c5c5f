// Producing real items, moved in: a 64-byte trivially copyable record and a ~100-byte std::string,
// 8,192 per round from every hardware thread's chunk, into a memory topic (try_produce(T&&), and
// try_produce(std::vector<T>&&) per chunk) beside moodycamel at its best (capacity reserved,
// producer tokens, enqueue(token, T&&) and enqueue_bulk of move iterators) and a mutex-guarded
// deque moving the same items. Only the moves are timed: both sides build their input (allocating
// the strings) before the round and drain and free it after, outside the timed region.
#include "bufferqueue/bufferqueue.hpp"

#include "bench_support.hpp"

#include <boost/asio/io_context.hpp>
#include <concurrentqueue/concurrentqueue.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
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
}

const bool registered = (register_all(), true);

}  // namespace
