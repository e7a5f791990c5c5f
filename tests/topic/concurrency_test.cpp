// Concurrency tests: waiting and wake-up across threads, many producers and consumer groups on
// several executors, bounded admission under load, and closing while operations wait. They also
// run under ThreadSanitizer, so sizes stay moderate. Catch2 assertions are not thread-safe: worker
// threads only record what they see, and the test thread asserts after joining them.
#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/detail/thread_number.hpp"
#include "bufferqueue/memory/detail/memory_partition.hpp"
#include "bufferqueue/memory/memory_topic.hpp"
#include "bufferqueue/producer.hpp"
#include "bufferqueue/pull_consumer.hpp"
#include "bufferqueue/topic/detail/capacity_gate.hpp"

#include "catch.hpp"
#include "topic/held_items_support.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace concurrency_test {

namespace {

namespace asio = boost::asio;
namespace bq = bufferqueue;

/// A hang guard, never a timing assertion: generous enough for ThreadSanitizer on a loaded machine.
constexpr auto hang_guard = std::chrono::seconds(60);

/// An item that says which producer made it and its position in that producer's sequence.
struct stamped {
    std::uint32_t producer = 0;
    std::uint32_t seq = 0;
};

/// Collects exceptions that escaped coroutines on worker threads, for the test thread to report.
class failure_sink {
public:
    void operator()(std::exception_ptr failure)
    {
        if (!failure) {
            return;
        }
        std::lock_guard lock(mutex_);
        if (failures_.empty()) {
            try {
                std::rethrow_exception(failure);
            } catch (const std::exception& error) {
                first_message_ = error.what();
            } catch (...) {
                first_message_ = "unknown exception";
            }
        }
        failures_.push_back(failure);
    }

    std::size_t count() const
    {
        std::lock_guard lock(mutex_);
        return failures_.size();
    }

    std::string first_message() const
    {
        std::lock_guard lock(mutex_);
        return first_message_;
    }

private:
    mutable std::mutex mutex_;
    std::vector<std::exception_ptr> failures_;
    std::string first_message_;
};

/// Counts finished coroutines; the test thread waits (bounded by the hang guard) for all of them.
class finish_line {
public:
    explicit finish_line(std::size_t expected) : expected_(expected) {}

    void arrive()
    {
        if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == expected_) {
            promise_.set_value();
        }
    }

    /// False when some coroutine never finished (then the caller stops its executors).
    bool wait() { return future_.wait_for(hang_guard) == std::future_status::ready; }

    std::size_t arrived() const { return arrived_.load(std::memory_order_acquire); }

private:
    const std::size_t expected_;
    std::atomic<std::size_t> arrived_{0};
    std::promise<void> promise_;
    std::future<void> future_ = promise_.get_future();
};

/// A co_spawn completion handler that reports into a `failure_sink` and arrives at a `finish_line`.
struct report_to {
    failure_sink* sink;
    finish_line* finished;

    void operator()(std::exception_ptr failure) const
    {
        (*sink)(failure);
        finished->arrive();
    }
};

/// What one consumer group received. Every item is counted; the order per (partition, producer)
/// is checked by the consumer that owns the partition, which is the only one touching that row.
class delivery_log {
public:
    delivery_log(std::size_t producers, std::uint32_t per_producer, std::size_t partitions)
        : per_producer_(per_producer), counts_(producers * per_producer),
          last_seen_(partitions, std::vector<std::int64_t>(producers, -1))
    {
    }

    /// Checks and counts the items of `delivered`.
    void record(const bq::batch<stamped>& delivered)
    {
        std::vector<std::int64_t>& last = last_seen_[delivered.partition()];
        for (const stamped& item : delivered) {
            counts_[static_cast<std::size_t>(item.producer) * per_producer_ + item.seq].fetch_add(
                1, std::memory_order_relaxed);
            if (static_cast<std::int64_t>(item.seq) <= last[item.producer]) {
                order_violations_.fetch_add(1, std::memory_order_relaxed);
            }
            last[item.producer] = item.seq;
        }
    }

    /// Counts `count` items as done (committed); true for the call that completes the group.
    bool complete(std::size_t count)
    {
        const std::size_t before = done_.fetch_add(count, std::memory_order_acq_rel);
        return before < counts_.size() && before + count >= counts_.size();
    }

    /// A consume loop ended with `ec`; anything but closing is unexpected.
    void ended(boost::system::error_code ec)
    {
        if (ec != asio::error::operation_aborted && ec != bq::errc::closed) {
            unexpected_errors_.fetch_add(1, std::memory_order_relaxed);
        }
    }

    std::size_t missing() const
    {
        return static_cast<std::size_t>(std::count_if(counts_.begin(), counts_.end(), [](const auto& count) {
            return count.load(std::memory_order_relaxed) == 0;
        }));
    }
    std::size_t duplicated() const
    {
        return static_cast<std::size_t>(std::count_if(counts_.begin(), counts_.end(), [](const auto& count) {
            return count.load(std::memory_order_relaxed) > 1;
        }));
    }
    std::size_t order_violations() const { return order_violations_.load(); }
    std::size_t unexpected_errors() const { return unexpected_errors_.load(); }

private:
    const std::uint32_t per_producer_;
    std::vector<std::atomic<std::uint32_t>> counts_;
    std::vector<std::vector<std::int64_t>> last_seen_;
    std::atomic<std::size_t> done_{0};
    std::atomic<std::size_t> order_violations_{0};
    std::atomic<std::size_t> unexpected_errors_{0};
};

/// Fulfilled once `groups` groups have received and committed everything.
class all_groups_done {
public:
    explicit all_groups_done(int groups) : left_(groups) {}

    void group_done()
    {
        if (left_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            promise_.set_value();
        }
    }

    /// Waits (bounded by the hang guard); false when the groups never finished.
    bool wait() { return future_.wait_for(hang_guard) == std::future_status::ready; }

private:
    std::atomic<int> left_;
    std::promise<void> promise_;
    std::future<void> future_ = promise_.get_future();
};

/// Consumes until the consumer or queue is closed, committing each batch under manual commit.
asio::awaitable<void> consume_until_closed(bq::pull_consumer<stamped>& consumer, delivery_log& log, bool manual,
                                           all_groups_done& done)
{
    for (;;) {
        boost::system::error_code ec;
        const bq::batch<stamped> delivered = co_await consumer.consume(asio::redirect_error(asio::use_awaitable, ec));
        if (ec) {
            log.ended(ec);
            co_return;
        }
        log.record(delivered);
        if (manual) {
            co_await consumer.commit(asio::redirect_error(asio::use_awaitable, ec));
            if (ec) {
                log.ended(ec);
                co_return;
            }
        }
        if (log.complete(delivered.size())) {
            done.group_done();
        }
    }
}

/// Produces `count` items of producer `id` with try_produce: singles and spans of up to 8.
void produce_with_try(bq::producer<stamped> producer, std::uint32_t id, std::uint32_t count,
                      std::atomic<std::size_t>& rejected)
{
    std::mt19937 random(id);
    std::vector<stamped> chunk;
    for (std::uint32_t seq = 0; seq < count;) {
        const std::uint32_t length = std::min<std::uint32_t>(random() % 8 + 1, count - seq);
        chunk.clear();
        for (std::uint32_t i = 0; i < length; ++i) {
            chunk.push_back({id, seq + i});
        }
        const bool accepted =
            length == 1 ? producer.try_produce(chunk.front()) : producer.try_produce(std::span<const stamped>(chunk));
        if (!accepted) {
            rejected.fetch_add(1, std::memory_order_relaxed);
        }
        seq += length;
    }
}

bq::memory_topic_options<stamped> stamped_options(std::string name, std::size_t partitions, bool keyed,
                                                  std::size_t segment_size = 64)
{
    bq::memory_topic_options<stamped> options;
    options.name = std::move(name);
    options.partitions = partitions;
    options.segment_size = segment_size;
    if (keyed) {
        options.partition_key = [](const stamped& item) {
            return static_cast<std::int64_t>(item.seq % 13) * 7 + static_cast<std::int64_t>(item.producer);
        };
    }
    return options;
}

/// Joins every thread in `threads`.
void join_all(std::vector<std::thread>& threads)
{
    for (std::thread& thread : threads) {
        thread.join();
    }
    threads.clear();
}

/// Spins for up to `most` microseconds, to vary where a racing operation lands. Not synchronization:
/// nothing waits for anything here.
void jitter(std::mt19937& random, unsigned most)
{
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(random() % most);
    while (std::chrono::steady_clock::now() < until) {
    }
}

/// An item that counts its live instances, to find operations that leak their items.
struct counted {
    static std::atomic<long>& live()
    {
        static std::atomic<long> instances{0};
        return instances;
    }
    explicit counted(int initial) : value(initial) { live().fetch_add(1); }
    counted(const counted& other) : value(other.value) { live().fetch_add(1); }
    counted& operator=(const counted&) = default;
    ~counted() { live().fetch_sub(1); }
    int value;
};

}  // namespace

TEST_CASE("concurrency: a waiting consumer wakes for data produced on another thread without lost wake-ups",
          "[concurrency]")
{
    // Many partitions widen the window between the consumer's last empty check of a partition and
    // its suspension; most items go to partition 0, which the consumer checks first.
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    bq::memory_topic_options<int> options;
    options.name = "numbers";
    options.partitions = 1024;
    options.partition_key = [](int value) { return value % 8 == 7 ? value : 1; };
    queue.add_topic(std::move(options));
    auto producer = queue.producer<int>("numbers");
    auto consumer = queue.create_pull_consumer<int>({.topic = "numbers", .group = "g", .auto_commit = true});

    auto guard = asio::make_work_guard(io);
    std::thread consumer_thread([&io] { io.run(); });

    struct outcome {
        boost::system::error_code error;
        std::vector<int> items;
        bool timed_out = false;
    };
    std::mt19937 random(2024);
    constexpr int iterations = 2000;
    int completed = 0;
    std::optional<outcome> failed;
    for (int iteration = 0; iteration < iterations; ++iteration) {
        // The coroutine owns the promise: it may still be unwinding when get() returns.
        auto finished = std::make_shared<std::promise<outcome>>();
        auto result = finished->get_future();
        std::atomic<bool> starting{false};
        asio::co_spawn(
            io,
            [&io, &consumer, &starting, finished]() -> asio::awaitable<void> {
                // The deadline turns a lost wake-up into a failure instead of a hang.
                auto timed_out = std::make_shared<bool>(false);
                asio::steady_timer deadline(io, std::chrono::seconds(30));
                deadline.async_wait([&consumer, timed_out](boost::system::error_code ec) {
                    if (!ec) {
                        *timed_out = true;
                        consumer.close();
                    }
                });
                outcome seen;
                starting.store(true, std::memory_order_release);
                const bq::batch<int> delivered =
                    co_await consumer.consume(asio::redirect_error(asio::use_awaitable, seen.error));
                deadline.cancel();
                seen.items.assign(delivered.begin(), delivered.end());
                seen.timed_out = *timed_out;
                finished->set_value(std::move(seen));
            },
            asio::detached);
        // Produce at a random moment of the consume: during its scan, its registration, the window
        // before its suspension, or after it.
        while (!starting.load(std::memory_order_acquire)) {
        }
        jitter(random, 10U << (iteration % 6));  // up to 10..320 us: fits fast and slow machines
        if (!producer.try_produce(iteration)) {
            break;
        }
        outcome seen = result.get();
        if (seen.error || seen.timed_out || seen.items != std::vector<int>{iteration}) {
            failed = std::move(seen);
            break;
        }
        ++completed;
    }
    guard.reset();
    consumer.close();
    consumer_thread.join();

    if (failed) {
        INFO("iteration " << completed << ": error '" << failed->error.message() << "', timed out " << failed->timed_out
                          << ", " << failed->items.size() << " items");
        CHECK_FALSE(failed.has_value());
    }
    CHECK(completed == iterations);
}

TEST_CASE("concurrency: a consume woken from another thread resumes its coroutine on its strand", "[concurrency]")
{
    // Two threads run the io_context. The consumer's coroutine and handlers this thread posts share a
    // strand and an unsynchronized counter: a resumption off the strand is a failed check and, under
    // ThreadSanitizer, a data race.
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<int>{.name = "numbers", .partitions = 2});
    auto producer = queue.producer<int>("numbers");
    auto consumer =
        queue.create_pull_consumer<int>({.topic = "numbers", .group = "g", .auto_commit = true, .batch_size = 1});
    auto strand = asio::make_strand(io);
    constexpr int items = 400;
    int on_strand = 0;
    std::vector<int> delivered;
    std::atomic<std::size_t> received{0};
    std::atomic<bool> off_strand{false};
    failure_sink failures;
    finish_line finished(1);
    asio::co_spawn(
        strand,
        [&]() -> asio::awaitable<void> {
            while (delivered.size() < static_cast<std::size_t>(items)) {
                const bq::batch<int> batch = co_await consumer.consume();
                if (!strand.running_in_this_thread()) {
                    off_strand.store(true, std::memory_order_relaxed);
                }
                ++on_strand;
                delivered.insert(delivered.end(), batch.begin(), batch.end());
                received.store(delivered.size(), std::memory_order_release);
            }
        },
        report_to{&failures, &finished});

    auto guard = asio::make_work_guard(io);
    std::vector<std::thread> threads;
    for (int thread = 0; thread < 2; ++thread) {
        threads.emplace_back([&io] { io.run(); });
    }
    const auto deadline = std::chrono::steady_clock::now() + hang_guard;
    bool produced = true;
    for (int item = 0; item < items && produced; ++item) {
        produced = producer.try_produce(item);
        asio::post(strand, [&on_strand] { ++on_strand; });
        if (item % 2 == 0) {
            // Mostly let the consumer suspend again before the next item.
            while (received.load(std::memory_order_acquire) <= static_cast<std::size_t>(item) &&
                   std::chrono::steady_clock::now() < deadline) {
                std::this_thread::yield();
            }
        }
    }
    const bool all_finished = finished.wait();
    if (!all_finished) {
        consumer.close();
        finished.wait();
    }
    guard.reset();
    join_all(threads);

    INFO(failures.first_message());
    CHECK(failures.count() == 0);
    REQUIRE(produced);
    REQUIRE(all_finished);
    CHECK_FALSE(off_strand.load());
    std::vector<int> expected(items);
    std::iota(expected.begin(), expected.end(), 0);
    std::sort(delivered.begin(), delivered.end());  // two partitions: per-partition order only
    CHECK(delivered == expected);
    CHECK(on_strand == 2 * items);
}

TEST_CASE("concurrency: closing a consumer while it suspends always completes its consume", "[concurrency]")
{
    // Like the wake-up test, with close() (of the consumer or of the queue) racing the suspension
    // instead of data: an abort that lands between the last check and the suspension must not be lost.
    asio::io_context io;
    auto guard = asio::make_work_guard(io);
    std::thread consumer_thread([&io] { io.run(); });

    struct outcome {
        boost::system::error_code error;
        bool timed_out = false;
    };
    std::mt19937 random(99);
    constexpr int iterations = 500;
    int completed = 0;
    std::optional<outcome> failed;
    for (int iteration = 0; iteration < iterations; ++iteration) {
        bq::buffer_queue queue{io.get_executor()};
        bq::memory_topic_options<int> options;
        options.name = "numbers";
        options.partitions = 1024;  // a long scan before the suspension widens the race window
        options.segment_size = 1;
        queue.add_topic(std::move(options));
        auto consumer = queue.create_pull_consumer<int>({.topic = "numbers", .group = "g"});

        auto finished = std::make_shared<std::promise<outcome>>();
        auto result = finished->get_future();
        std::atomic<bool> starting{false};
        asio::co_spawn(
            io,
            [&io, &consumer, &starting, finished]() -> asio::awaitable<void> {
                auto timed_out = std::make_shared<bool>(false);
                asio::steady_timer deadline(io, std::chrono::seconds(30));
                deadline.async_wait([&consumer, timed_out](boost::system::error_code ec) {
                    if (!ec) {
                        *timed_out = true;
                        consumer.close();  // a second close finds the lost pending consume
                    }
                });
                outcome seen;
                starting.store(true, std::memory_order_release);
                co_await consumer.consume(asio::redirect_error(asio::use_awaitable, seen.error));
                deadline.cancel();
                seen.timed_out = *timed_out;
                finished->set_value(seen);
            },
            asio::detached);
        // Close at a random moment of the consume's scan, registration and suspension.
        while (!starting.load(std::memory_order_acquire)) {
        }
        jitter(random, 10U << (iteration % 6));  // up to 10..320 us: fits fast and slow machines
        if (iteration % 2 == 0) {
            consumer.close();
        } else {
            queue.close();
        }
        const outcome seen = result.get();
        // closed: the close came before the consume started; operation_aborted: while it waited.
        if (seen.timed_out || (seen.error != asio::error::operation_aborted && seen.error != bq::errc::closed)) {
            failed = seen;
            break;
        }
        ++completed;
    }
    guard.reset();
    consumer_thread.join();

    if (failed) {
        INFO("iteration " << completed << ": error '" << failed->error.message() << "', timed out "
                          << failed->timed_out);
        CHECK_FALSE(failed.has_value());
    }
    CHECK(completed == iterations);
}

TEST_CASE("concurrency: every group receives every item exactly once in per-partition order under stress",
          "[concurrency]")
{
    const bool keyed = GENERATE(false, true);
    INFO((keyed ? "key-routed topic" : "round-robin topic"));
    constexpr std::size_t partitions = 6;
    constexpr std::uint32_t producer_count = 4;
    constexpr std::uint32_t per_producer = 20000;

    asio::io_context io_a;
    asio::thread_pool pool_b(2);
    asio::io_context io_c;
    {
        bq::buffer_queue queue{io_a.get_executor()};
        queue.add_topic(stamped_options("stamped", partitions, keyed, 32));
        auto group_a = queue.create_pull_consumers<stamped>(
            {.topic = "stamped", .group = "a", .auto_commit = false, .batch_size = 16}, 3);
        auto group_b = queue.create_pull_consumers<stamped>(
            {.topic = "stamped", .group = "b", .auto_commit = true, .batch_size = 7}, 2);
        auto group_c = queue.create_pull_consumers<stamped>(
            {.topic = "stamped", .group = "c", .auto_commit = false, .batch_size = 50}, 1);

        delivery_log log_a(producer_count, per_producer, partitions);
        delivery_log log_b(producer_count, per_producer, partitions);
        delivery_log log_c(producer_count, per_producer, partitions);
        all_groups_done done(3);
        failure_sink failures;
        finish_line finished(6);
        for (auto& consumer : group_a) {
            asio::co_spawn(io_a, consume_until_closed(consumer, log_a, true, done), report_to{&failures, &finished});
        }
        for (auto& consumer : group_b) {
            asio::co_spawn(pool_b, consume_until_closed(consumer, log_b, false, done), report_to{&failures, &finished});
        }
        asio::co_spawn(io_c, consume_until_closed(group_c.front(), log_c, true, done), report_to{&failures, &finished});

        std::vector<std::thread> threads;
        threads.emplace_back([&io_a] { io_a.run(); });
        threads.emplace_back([&io_a] { io_a.run(); });
        threads.emplace_back([&io_c] { io_c.run(); });

        std::atomic<std::size_t> rejected{0};
        std::vector<std::thread> producers;
        for (std::uint32_t id = 0; id < producer_count; ++id) {
            producers.emplace_back(produce_with_try, queue.producer<stamped>("stamped"), id, per_producer,
                                   std::ref(rejected));
        }
        join_all(producers);

        const bool all_done = done.wait();
        queue.close();
        const bool all_finished = finished.wait();
        if (!all_finished) {
            io_a.stop();
            io_c.stop();
            pool_b.stop();
        }
        join_all(threads);
        pool_b.join();

        CHECK(all_done);
        CHECK(all_finished);
        CHECK(rejected == 0);
        CHECK(failures.count() == 0);
        INFO(failures.first_message());
        for (const delivery_log* log : {&log_a, &log_b, &log_c}) {
            CHECK(log->missing() == 0);
            CHECK(log->duplicated() == 0);
            CHECK(log->order_violations() == 0);
            CHECK(log->unexpected_errors() == 0);
        }
    }
}

TEST_CASE("concurrency: a bounded wait-mode topic admits every item exactly once within its capacity", "[concurrency]")
{
    constexpr std::size_t capacity = 64;
    constexpr std::size_t partitions = 4;
    constexpr std::uint32_t producer_count = 4;
    constexpr std::uint32_t per_producer = 5000;

    asio::io_context io_consumers;
    asio::thread_pool pool(1);
    bq::buffer_queue queue{io_consumers.get_executor()};
    // A memory topic whose partitions count the admitted items they hold, at every append.
    bq::test::counted_memory_topic_options<stamped> options{.memory =
                                                                stamped_options("bounded", partitions, false, 16)};
    options.memory.bounded_capacity = capacity;
    options.memory.full_mode = bq::full_mode::wait;
    const std::shared_ptr<bq::test::held_items> held = options.held;
    queue.add_topic(std::move(options));

    std::vector<bq::pull_consumer<stamped>> manual = queue.create_pull_consumers<stamped>(
        {.topic = "bounded", .group = "manual", .auto_commit = false, .batch_size = 10}, 2);
    std::vector<bq::pull_consumer<stamped>> automatic = queue.create_pull_consumers<stamped>(
        {.topic = "bounded", .group = "auto", .auto_commit = true, .batch_size = 5}, 1);

    delivery_log log_manual(producer_count, per_producer, partitions);
    delivery_log log_auto(producer_count, per_producer, partitions);
    all_groups_done done(2);
    failure_sink failures;
    finish_line finished(3);
    for (auto& consumer : manual) {
        asio::co_spawn(io_consumers, consume_until_closed(consumer, log_manual, true, done),
                       report_to{&failures, &finished});
    }
    asio::co_spawn(pool, consume_until_closed(automatic.front(), log_auto, false, done),
                   report_to{&failures, &finished});
    std::vector<std::thread> threads;
    threads.emplace_back([&io_consumers] { io_consumers.run(); });
    threads.emplace_back([&io_consumers] { io_consumers.run(); });

    // Each producer thread runs its own io_context: it awaits produce() (which waits for room) and
    // mixes in try_produce(), falling back to waiting when it returns false.
    std::atomic<std::size_t> produce_errors{0};
    std::vector<std::thread> producers;
    for (std::uint32_t id = 0; id < producer_count; ++id) {
        producers.emplace_back([&, id] {
            asio::io_context io;
            bq::producer<stamped> producer = queue.producer<stamped>("bounded");
            asio::co_spawn(
                io,
                [&]() -> asio::awaitable<void> {
                    std::vector<stamped> chunk;
                    for (std::uint32_t seq = 0; seq < per_producer;) {
                        boost::system::error_code ec;
                        if (seq % 5 == 0 && seq + 4 <= per_producer) {
                            chunk.clear();
                            for (std::uint32_t i = 0; i < 4; ++i) {
                                chunk.push_back({id, seq + i});
                            }
                            co_await producer.produce(std::span<const stamped>(chunk),
                                                      asio::redirect_error(asio::use_awaitable, ec));
                            seq += 4;
                        } else if (seq % 3 == 0 && producer.try_produce(stamped{id, seq})) {
                            ++seq;
                        } else {
                            co_await producer.produce(stamped{id, seq}, asio::redirect_error(asio::use_awaitable, ec));
                            ++seq;
                        }
                        if (ec) {
                            produce_errors.fetch_add(1, std::memory_order_relaxed);
                            co_return;
                        }
                    }
                },
                [&failures](std::exception_ptr failure) { failures(failure); });
            io.run_for(hang_guard);
        });
    }
    join_all(producers);

    const bool all_done = done.wait();
    // Both groups committed everything, so all the room came back: a batch of the whole capacity is
    // admitted at once (its consumers closed first, so nobody receives it).
    for (auto* consumer : {&manual[0], &manual[1], &automatic[0]}) {
        consumer->close();
    }
    const bool all_finished = finished.wait();
    const std::vector<stamped> whole_capacity(capacity, stamped{producer_count, 0});
    const bool room_came_back =
        all_finished && queue.producer<stamped>("bounded").try_produce(std::span<const stamped>(whole_capacity));
    queue.close();
    if (!all_finished) {
        io_consumers.stop();
        pool.stop();
    }
    join_all(threads);
    pool.join();

    CHECK(all_done);
    CHECK(all_finished);
    CHECK(produce_errors == 0);
    CHECK(failures.count() == 0);
    INFO(failures.first_message());
    CHECK(held->most() <= static_cast<std::int64_t>(capacity));
    CHECK(held->most() > 0);
    CHECK(room_came_back);
    for (const delivery_log* log : {&log_manual, &log_auto}) {
        CHECK(log->missing() == 0);
        CHECK(log->duplicated() == 0);
        CHECK(log->order_violations() == 0);
        CHECK(log->unexpected_errors() == 0);
    }
}

TEST_CASE("concurrency: batch produce from many threads runs concurrently with consumers", "[concurrency]")
{
    const bool keyed = GENERATE(false, true);
    INFO((keyed ? "key-routed topic" : "round-robin topic"));
    constexpr std::size_t partitions = 5;
    constexpr std::uint32_t producer_count = 6;
    constexpr std::uint32_t per_producer = 10000;

    asio::io_context io_consumers;
    asio::thread_pool pool(1);
    bq::buffer_queue queue{io_consumers.get_executor()};
    queue.add_topic(stamped_options("batches", partitions, keyed, 16));
    auto manual = queue.create_pull_consumers<stamped>(
        {.topic = "batches", .group = "manual", .auto_commit = false, .batch_size = 32}, 2);
    auto automatic = queue.create_pull_consumer<stamped>(
        {.topic = "batches", .group = "auto", .auto_commit = true, .batch_size = 9});

    delivery_log log_manual(producer_count, per_producer, partitions);
    delivery_log log_auto(producer_count, per_producer, partitions);
    all_groups_done done(2);
    failure_sink failures;
    finish_line finished(3);
    for (auto& consumer : manual) {
        asio::co_spawn(io_consumers, consume_until_closed(consumer, log_manual, true, done),
                       report_to{&failures, &finished});
    }
    asio::co_spawn(pool, consume_until_closed(automatic, log_auto, false, done), report_to{&failures, &finished});
    std::vector<std::thread> threads;
    threads.emplace_back([&io_consumers] { io_consumers.run(); });
    threads.emplace_back([&io_consumers] { io_consumers.run(); });

    // Every producer thread produces spans of 1..40 items, and now and then a long one (1,280 to
    // 1,679: the router's two passes, each partition's lane publishing segment by segment while the
    // consumers read), alternating try_produce and co_await produce.
    std::atomic<std::size_t> produce_errors{0};
    std::vector<std::thread> producers;
    for (std::uint32_t id = 0; id < producer_count; ++id) {
        producers.emplace_back([&, id] {
            asio::io_context io;
            auto producer = queue.producer<stamped>("batches");
            asio::co_spawn(
                io,
                [&]() -> asio::awaitable<void> {
                    std::mt19937 random(id + 100);
                    std::vector<stamped> chunk;
                    bool awaited = false;
                    for (std::uint32_t seq = 0; seq < per_producer;) {
                        const std::uint32_t wanted = random() % 16 == 0 ? 1280 + random() % 400 : random() % 40 + 1;
                        const std::uint32_t length = std::min<std::uint32_t>(wanted, per_producer - seq);
                        chunk.clear();
                        for (std::uint32_t i = 0; i < length; ++i) {
                            chunk.push_back({id, seq + i});
                        }
                        awaited = !awaited;
                        if (awaited) {
                            boost::system::error_code ec;
                            co_await producer.produce(std::span<const stamped>(chunk),
                                                      asio::redirect_error(asio::use_awaitable, ec));
                            if (ec) {
                                produce_errors.fetch_add(1, std::memory_order_relaxed);
                            }
                        } else if (!producer.try_produce(std::span<const stamped>(chunk))) {
                            produce_errors.fetch_add(1, std::memory_order_relaxed);
                        }
                        seq += length;
                    }
                },
                [&failures](std::exception_ptr failure) { failures(failure); });
            io.run_for(hang_guard);
        });
    }
    join_all(producers);

    const bool all_done = done.wait();
    queue.close();
    const bool all_finished = finished.wait();
    if (!all_finished) {
        io_consumers.stop();
        pool.stop();
    }
    join_all(threads);
    pool.join();

    CHECK(all_done);
    CHECK(all_finished);
    CHECK(produce_errors == 0);
    CHECK(failures.count() == 0);
    INFO(failures.first_message());
    for (const delivery_log* log : {&log_manual, &log_auto}) {
        CHECK(log->missing() == 0);
        CHECK(log->duplicated() == 0);
        CHECK(log->order_violations() == 0);
        CHECK(log->unexpected_errors() == 0);
    }
}

TEST_CASE("concurrency: closing the queue completes waiting producers and consumers with operation_aborted",
          "[concurrency]")
{
    const long live_before = counted::live().load();
    {
        asio::io_context io;
        bq::buffer_queue queue{io.get_executor()};
        bq::memory_topic_options<counted> full_options;
        full_options.name = "full";
        full_options.partitions = 2;
        full_options.bounded_capacity = 8;
        full_options.full_mode = bq::full_mode::wait;
        queue.add_topic(std::move(full_options));
        bq::memory_topic_options<counted> empty_options;
        empty_options.name = "empty";
        empty_options.partitions = 3;
        queue.add_topic(std::move(empty_options));

        auto full = queue.producer<counted>("full");
        for (int i = 0; i < 8; ++i) {
            REQUIRE(full.try_produce(counted(i)));
        }
        REQUIRE_FALSE(full.try_produce(counted(8)));
        auto consumers =
            queue.create_pull_consumers<counted>({.topic = "empty", .group = "g", .auto_commit = false}, 3);
        auto single = queue.create_pull_consumer<counted>({.topic = "empty", .group = "h", .auto_commit = true});

        std::mutex results_mutex;
        std::vector<boost::system::error_code> results;
        auto record = [&](boost::system::error_code ec) {
            std::lock_guard lock(results_mutex);
            results.push_back(ec);
        };
        failure_sink failures;
        finish_line finished(8);
        const std::vector<counted> batch{counted(100), counted(101), counted(102)};
        for (int i = 0; i < 4; ++i) {
            asio::co_spawn(
                io,
                [&, i]() -> asio::awaitable<void> {
                    boost::system::error_code ec;
                    if (i % 2 == 0) {
                        co_await full.produce(counted(10 + i), asio::redirect_error(asio::use_awaitable, ec));
                    } else {
                        co_await full.produce(std::span<const counted>(batch),
                                              asio::redirect_error(asio::use_awaitable, ec));
                    }
                    record(ec);
                },
                report_to{&failures, &finished});
        }
        std::vector<bq::pull_consumer<counted>*> waiting;
        for (auto& consumer : consumers) {
            waiting.push_back(&consumer);
        }
        waiting.push_back(&single);
        for (bq::pull_consumer<counted>* consumer : waiting) {
            asio::co_spawn(
                io,
                [&, consumer]() -> asio::awaitable<void> {
                    boost::system::error_code ec;
                    co_await consumer->consume(asio::redirect_error(asio::use_awaitable, ec));
                    record(ec);
                },
                report_to{&failures, &finished});
        }
        // Run every coroutine up to its wait; nothing can complete yet.
        io.poll();
        REQUIRE(finished.arrived() == 0);

        std::vector<std::thread> threads;
        threads.emplace_back([&io] { io.run(); });
        threads.emplace_back([&io] { io.run(); });
        std::thread closer([&queue] { queue.close(); });
        closer.join();
        const bool all_finished = finished.wait();
        if (!all_finished) {
            io.stop();
        }
        join_all(threads);

        REQUIRE(all_finished);
        CHECK(failures.count() == 0);
        INFO(failures.first_message());
        REQUIRE(results.size() == 8);
        for (const boost::system::error_code& ec : results) {
            CHECK(ec == asio::error::operation_aborted);
        }
    }
    // The aborted operations released the items they had copied.
    CHECK(counted::live().load() == live_before);
}

TEST_CASE("concurrency: closing races with waiting producers and consumers without hangs or leaks", "[concurrency]")
{
    const long live_before = counted::live().load();
    std::mt19937 random(7);
    std::size_t unexpected = 0;
    std::size_t incomplete = 0;
    std::size_t failed = 0;
    for (int round = 0; round < 300 && incomplete == 0; ++round) {
        asio::io_context io;
        auto guard = asio::make_work_guard(io);
        std::vector<std::thread> threads;
        threads.emplace_back([&io] { io.run(); });
        threads.emplace_back([&io] { io.run(); });
        {
            bq::buffer_queue queue{io.get_executor()};
            bq::memory_topic_options<counted> options;
            options.name = "racy";
            options.partitions = 2;
            options.segment_size = 4;
            options.bounded_capacity = 4;
            queue.add_topic(std::move(options));
            auto producer = queue.producer<counted>("racy");
            auto consumer = queue.create_pull_consumer<counted>(
                {.topic = "racy", .group = "g", .auto_commit = true, .batch_size = 2});
            std::mutex results_mutex;
            std::vector<boost::system::error_code> results;
            failure_sink failures;
            finish_line finished(4);
            // Producers overfill the topic; the consumer drains it while the queue closes underneath.
            for (int i = 0; i < 3; ++i) {
                asio::co_spawn(
                    io,
                    [&, i]() -> asio::awaitable<void> {
                        for (int n = 0; n < 4; ++n) {
                            boost::system::error_code ec;
                            co_await producer.produce(counted(i * 10 + n),
                                                      asio::redirect_error(asio::use_awaitable, ec));
                            if (ec) {
                                std::lock_guard lock(results_mutex);
                                results.push_back(ec);
                                co_return;
                            }
                        }
                    },
                    report_to{&failures, &finished});
            }
            asio::co_spawn(
                io,
                [&]() -> asio::awaitable<void> {
                    for (;;) {
                        boost::system::error_code ec;
                        co_await consumer.consume(asio::redirect_error(asio::use_awaitable, ec));
                        if (ec) {
                            std::lock_guard lock(results_mutex);
                            results.push_back(ec);
                            co_return;
                        }
                    }
                },
                report_to{&failures, &finished});
            jitter(random, 100);
            queue.close();
            guard.reset();
            if (!finished.wait()) {
                ++incomplete;
                io.stop();
            }
            join_all(threads);
            failed += failures.count();
            for (const boost::system::error_code& ec : results) {
                if (ec != asio::error::operation_aborted && ec != bq::errc::closed) {
                    ++unexpected;
                }
            }
        }
    }
    CHECK(unexpected == 0);
    CHECK(incomplete == 0);
    CHECK(failed == 0);
    CHECK(counted::live().load() == live_before);
}

TEST_CASE("concurrency: a producer that queues for room just after the close is aborted", "[concurrency]")
{
    // The losing side of the race above, made deterministic: the queue closes between a waiting
    // produce's last closed check and its queueing for room. It must be aborted, not forgotten.
    struct recording_waiter final : bq::detail::capacity_waiter {
        recording_waiter() : capacity_waiter(1) {}
        void granted() noexcept override { ++grants; }
        void aborted() noexcept override { ++aborts; }
        int grants = 0;
        int aborts = 0;
    };
    bq::detail::capacity_gate gate(4);
    REQUIRE(gate.try_acquire(4));
    recording_waiter queued;
    CHECK_FALSE(gate.acquire_or_enqueue(queued));
    gate.close();
    CHECK(queued.aborts == 1);

    recording_waiter late;
    CHECK_FALSE(gate.acquire_or_enqueue(late));
    CHECK(late.aborts == 1);
    CHECK(late.grants == 0);
    gate.release(4);  // room coming back after the close grants nobody
    CHECK(late.grants == 0);
    CHECK(queued.grants == 0);
}

TEST_CASE("concurrency: memory partition appends from many threads are read in order without the append lock",
          "[concurrency]")
{
    const std::size_t lanes = GENERATE(1, 3);
    INFO("lanes " << lanes);
    constexpr std::uint32_t writer_count = 4;
    constexpr std::uint32_t per_writer = 20000;
    bq::detail::memory_partition<stamped> partition(16, false, lanes);
    auto& first_cursor = partition.open_cursor("first");
    auto& second_cursor = partition.open_cursor("second");

    struct reader_result {
        std::size_t read = 0;
        std::size_t order_violations = 0;
        std::vector<std::uint32_t> count_per_writer = std::vector<std::uint32_t>(writer_count, 0);
    };
    auto read_all = [&partition](bq::detail::memory_partition<stamped>::cursor& reader, std::size_t batch_size,
                                 reader_result& result) {
        std::vector<std::int64_t> last(writer_count, -1);
        const auto give_up = std::chrono::steady_clock::now() + hang_guard;
        while (result.read < std::size_t{writer_count} * per_writer && std::chrono::steady_clock::now() < give_up) {
            const bq::pull_result<stamped> pulled = partition.pull(reader, batch_size);
            if (pulled.items.empty()) {
                std::this_thread::yield();  // storage has no waiting of its own; consumers add it
                continue;
            }
            for (const stamped& item : pulled.items) {
                if (static_cast<std::int64_t>(item.seq) != last[item.producer] + 1) {
                    ++result.order_violations;
                }
                last[item.producer] = item.seq;
                ++result.count_per_writer[item.producer];
            }
            result.read += pulled.items.size();
            partition.release_batch(reader);
            partition.commit(reader, pulled.next_offset);
        }
    };
    reader_result first;
    reader_result second;
    std::vector<std::thread> threads;
    threads.emplace_back([&] { read_all(first_cursor, 7, first); });
    threads.emplace_back([&] { read_all(second_cursor, 64, second); });
    for (std::uint32_t id = 0; id < writer_count; ++id) {
        threads.emplace_back([&partition, id] {
            std::vector<stamped> chunk;
            for (std::uint32_t seq = 0; seq < per_writer;) {
                const std::uint32_t length = std::min<std::uint32_t>((seq + id) % 5 + 1, per_writer - seq);
                chunk.clear();
                for (std::uint32_t i = 0; i < length; ++i) {
                    chunk.push_back({id, seq + i});
                }
                std::size_t appended = 0;
                // In this thread's lane, as the topic's router hands it down.
                partition.append(bq::item_source<stamped>{chunk.data(), chunk.size(), 1, nullptr,
                                                          bq::detail::producer_lane(partition.lane_count())},
                                 appended);
                seq += length;
            }
        });
    }
    join_all(threads);

    for (const reader_result* result : {&first, &second}) {
        CHECK(result->read == std::size_t{writer_count} * per_writer);
        CHECK(result->order_violations == 0);
        CHECK(result->count_per_writer == std::vector<std::uint32_t>(writer_count, per_writer));
    }
    CHECK(partition.end_items() == std::uint64_t{writer_count} * per_writer);
}

namespace {

// Reads everything `consumer` can deliver now, committing each batch, as (partition, items) pairs.
std::vector<std::pair<std::size_t, std::vector<int>>> drain_batches(bq::pull_consumer<int>& consumer,
                                                                    asio::io_context& io)
{
    std::vector<std::pair<std::size_t, std::vector<int>>> batches;
    for (int round = 0; round < 100; ++round) {
        const std::optional<bq::batch<int>> delivered = consumer.try_consume();
        if (!delivered) {
            break;
        }
        batches.emplace_back(delivered->partition(), std::vector<int>(delivered->begin(), delivered->end()));
        consumer.commit([](boost::system::error_code error) { REQUIRE_FALSE(error); });
        io.restart();
        io.poll();
    }
    return batches;
}

// Commits what `consumer` delivers `count` times on a new thread, which then runs `io` until it runs
// out of work: room freed there completes waiting produces on that thread. Returns how many of
// those pulls and commits failed (assertions stay on the test's thread).
int commit_and_run_elsewhere(bq::pull_consumer<int>& consumer, asio::io_context& io, int count)
{
    int failures = 0;
    std::thread io_thread([&] {
        for (int i = 0; i < count; ++i) {
            if (!consumer.try_consume()) {
                ++failures;
            }
            consumer.commit([&](boost::system::error_code error) { failures += error ? 1 : 0; });
        }
        io.restart();
        io.run_for(hang_guard);
    });
    io_thread.join();
    return failures;
}

}  // namespace

TEST_CASE("concurrency: a waiting batch continues its producer's round robin when another thread completes it",
          "[concurrency][memory][capacity]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<int>{.name = "bounded", .partitions = 4, .bounded_capacity = 2});
    auto consumer = queue.create_pull_consumer<int>({.topic = "bounded", .group = "g", .batch_size = 10});
    auto producer = queue.producer<int>("bounded");

    std::optional<boost::system::error_code> result;
    producer.produce(std::vector<int>{1, 2, 3, 4}, [&](boost::system::error_code error) { result = error; });
    // The first slice is stored on this thread; the second once the io thread frees the room.
    CHECK(commit_and_run_elsewhere(consumer, io, 2) == 0);
    REQUIRE(result.has_value());
    CHECK_FALSE(*result);

    std::string placed;
    for (const auto& [partition, values] : drain_batches(consumer, io)) {
        placed += "p" + std::to_string(partition) + ":";
        for (const int value : values) {
            placed += " " + std::to_string(value);
        }
        placed += "; ";
    }
    CHECK(placed == "p2: 3; p3: 4; ");
}

TEST_CASE("concurrency: one producer's items keep their order in a partition when another thread completes its wait",
          "[concurrency][memory][capacity]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(
        bq::memory_topic_options<int>{.name = "bounded", .partitions = 1, .bounded_capacity = 3, .producer_lanes = 4});
    auto consumer = queue.create_pull_consumer<int>({.topic = "bounded", .group = "g", .batch_size = 1});
    auto producer = queue.producer<int>("bounded");

    REQUIRE(producer.try_produce(1));
    REQUIRE(producer.try_produce(2));
    std::optional<boost::system::error_code> result;
    producer.produce(std::vector<int>{3, 4}, [&](boost::system::error_code error) { result = error; });
    CHECK(commit_and_run_elsewhere(consumer, io, 1) == 0);
    REQUIRE(result.has_value());
    CHECK_FALSE(*result);

    std::vector<int> delivered;
    for (const auto& [partition, values] : drain_batches(consumer, io)) {
        delivered.insert(delivered.end(), values.begin(), values.end());
    }
    CHECK(delivered == std::vector<int>{2, 3, 4});
}

TEST_CASE("concurrency: waiting produces completed on io threads share their producers' lanes with those producers",
          "[concurrency][memory][capacity]")
{
    // Every producer thread leaves batches waiting for room and goes on with try_produce; the io
    // threads store the granted slices in the producers' own lanes meanwhile. Every item arrives once.
    constexpr std::uint32_t producer_count = 3;
    constexpr std::uint32_t rounds = 300;
    asio::thread_pool pool(2);
    auto options = stamped_options("bounded", 4, false, 16);
    options.bounded_capacity = 8;
    options.full_mode = bq::full_mode::wait;
    options.producer_lanes = 4;
    bq::buffer_queue queue{pool.get_executor()};
    queue.add_topic(std::move(options));
    bq::pull_consumer<stamped> consumer =
        queue.create_pull_consumer<stamped>({.topic = "bounded", .group = "g", .auto_commit = true, .batch_size = 7});

    std::mutex mutex;
    std::condition_variable progress;
    std::size_t received = 0;                                                             // guarded by mutex
    std::vector<std::vector<int>> seen(producer_count, std::vector<int>(rounds * 4, 0));  // guarded by mutex
    failure_sink failures;
    finish_line finished(1);
    asio::co_spawn(
        pool,
        [&]() -> asio::awaitable<void> {
            for (;;) {
                boost::system::error_code error;
                const bq::batch<stamped> delivered =
                    co_await consumer.consume(asio::redirect_error(asio::use_awaitable, error));
                if (error) {
                    co_return;  // closed at the end
                }
                std::lock_guard lock(mutex);
                for (const stamped& item : delivered) {
                    ++seen[item.producer][item.seq];
                }
                received += delivered.size();
                progress.notify_all();
            }
        },
        report_to{&failures, &finished});

    std::atomic<std::size_t> stored{0};
    std::atomic<std::size_t> failed{0};
    std::atomic<std::size_t> completed{0};
    std::promise<void> all_completed;
    std::vector<std::thread> producers;
    for (std::uint32_t id = 0; id < producer_count; ++id) {
        producers.emplace_back([&, id] {
            bq::producer<stamped> producer = queue.producer<stamped>("bounded");
            for (std::uint32_t round = 0; round < rounds; ++round) {
                const std::uint32_t first = round * 4;
                producer.produce(std::vector<stamped>{{id, first}, {id, first + 1}, {id, first + 2}},
                                 [&](boost::system::error_code error) {
                                     (error ? failed : stored).fetch_add(error ? 1 : 3);
                                     if (completed.fetch_add(1) + 1 == producer_count * rounds) {
                                         all_completed.set_value();
                                     }
                                 });
                if (producer.try_produce(stamped{id, first + 3})) {
                    stored.fetch_add(1);
                }
            }
        });
    }
    join_all(producers);
    const bool all_done = all_completed.get_future().wait_for(hang_guard) == std::future_status::ready;
    bool all_received = false;
    {
        std::unique_lock lock(mutex);
        all_received = progress.wait_for(lock, hang_guard, [&] { return received == stored.load(); });
    }
    consumer.close();
    const bool consumer_finished = finished.wait();
    // Everything was committed, so all the room came back: a batch of the whole capacity is admitted
    // at once (its consumer closed first, so nobody receives it).
    const std::vector<stamped> whole_capacity(8, stamped{producer_count, 0});
    const bool room_came_back =
        consumer_finished && queue.producer<stamped>("bounded").try_produce(std::span<const stamped>(whole_capacity));
    queue.close();
    pool.join();

    CHECK(all_done);
    CHECK(all_received);
    CHECK(consumer_finished);
    CHECK(failed == 0);
    CHECK(failures.count() == 0);
    std::size_t duplicates = 0;
    std::size_t missing_batch_items = 0;
    for (const auto& per_producer : seen) {
        for (std::size_t seq = 0; seq < per_producer.size(); ++seq) {
            duplicates += per_producer[seq] > 1 ? 1 : 0;
            missing_batch_items += seq % 4 != 3 && per_producer[seq] != 1 ? 1 : 0;
        }
    }
    CHECK(duplicates == 0);
    CHECK(missing_batch_items == 0);
    CHECK(room_came_back);
}

}  // namespace concurrency_test
