// Consumers parked in `co_await consume()` before a round starts, as services run them: shared by
// the awaited-consume rows of bench_user_path (ints) and bench_items (real items).
#pragma once

#include "bufferqueue/bufferqueue.hpp"

#include "bench_support.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace bufferqueue::bench {

/// `consumers` io_context threads and the queue on the first one's executor. Add a memory topic of
/// `consumers` partitions to `queue()`, then `start` the consumer loops; the destructor closes the
/// queue (every parked consume completes with operation_aborted) and joins the threads, so the
/// `round_tally` given to `start` must outlive this object.
template <class T>
class awaited_consumers {
public:
    explicit awaited_consumers(std::size_t consumers) : contexts_(make_contexts(consumers)), queue_(executor()) {}

    awaited_consumers(const awaited_consumers&) = delete;
    awaited_consumers& operator=(const awaited_consumers&) = delete;

    ~awaited_consumers()
    {
        queue_.close();
        for (std::thread& thread : threads_) {
            thread.join();
        }
    }

    buffer_queue& queue() noexcept { return queue_; }

    /// One consumer per io_context thread, of group "drain" of `topic` (auto commit, `batch_size`),
    /// each looping in a coroutine: `read(item)` for every item delivered (summed, kept from the
    /// optimizer), then `tally.add(batch size)`. Returns once every loop is parked in consume().
    template <class Read>
    void start(const std::string& topic, std::size_t batch_size, round_tally& tally, Read read)
    {
        group_ = queue_.create_pull_consumers<T>(
            {.topic = topic, .group = "drain", .auto_commit = true, .batch_size = batch_size}, contexts_.size());
        for (std::size_t index = 0; index < contexts_.size(); ++index) {
            boost::asio::co_spawn(
                *contexts_[index],
                [&consumer = group_[index], &tally, read]() -> boost::asio::awaitable<void> {
                    for (;;) {
                        batch<T> delivered = co_await consumer.consume();
                        std::size_t seen = 0;
                        for (const T& item : delivered) {
                            seen += read(item);
                        }
                        benchmark::DoNotOptimize(seen);
                        tally.add(delivered.size());
                    }
                },
                boost::asio::detached);
            threads_.emplace_back([&context = *contexts_[index]] { context.run(); });
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // every loop parked in consume()
    }

private:
    static std::vector<std::unique_ptr<boost::asio::io_context>> make_contexts(std::size_t count)
    {
        std::vector<std::unique_ptr<boost::asio::io_context>> made;
        for (std::size_t index = 0; index < count; ++index) {
            made.push_back(std::make_unique<boost::asio::io_context>(1));
        }
        return made;
    }

    boost::asio::any_io_executor executor() const { return contexts_.front()->get_executor(); }

    std::vector<std::unique_ptr<boost::asio::io_context>> contexts_;  // before queue_: it uses the first
    buffer_queue queue_;
    std::vector<pull_consumer<T>> group_;
    std::vector<std::thread> threads_;
};

}  // namespace bufferqueue::bench
