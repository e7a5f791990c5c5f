// Conformance, concurrency: producer threads and a producing coroutine feed a topic while consumer
// coroutines of two groups run on an io_context with two threads; under manual commit every group
// receives every item exactly once, each producer thread's items in order within their partition.
// No timing assertion: the only clock is the hang guard.
#include "conformance/conformance_support.hpp"

#include <bufferqueue/bufferqueue.hpp>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace concurrency_conformance_test {

using namespace conformance;

namespace {

constexpr int producer_threads = 3;
constexpr int coroutine_source = producer_threads;  // sources 0..2 are the threads, 3 the coroutine
constexpr int sources = producer_threads + 1;
constexpr int per_source = 500;
constexpr int source_stride = 100000;  // item = source * source_stride + sequence number

/// The items `source` produces, in order.
std::vector<int> items_of_source(int source)
{
    return range(source * source_stride, source * source_stride + per_source);
}

/// Where each item was routed, agreed on by every group: the first group to see an item records
/// its partition, the others must see it in the same one.
class routing_record {
public:
    /// An empty string, or a description of the disagreement.
    std::string check(int item, std::size_t partition)
    {
        const std::lock_guard lock(mutex_);
        const auto [known, inserted] = partition_of_.emplace(item, partition);
        if (!inserted && known->second != partition) {
            return "item " + std::to_string(item) + " seen in partitions " + std::to_string(known->second) + " and " +
                   std::to_string(partition);
        }
        return {};
    }

private:
    std::mutex mutex_;
    std::map<int, std::size_t> partition_of_;  // guarded by mutex_
};

/// What one group received. Written by its consumers' coroutines on the io threads, read by the test
/// thread once they ended.
class group_ledger {
public:
    group_ledger(std::string name, routing_record& routing) : name_(std::move(name)), routing_(routing)
    {
        for (auto& counts : counts_) {
            counts.assign(per_source, 0);
        }
    }

    void record(const bq::batch<int>& delivered, const std::vector<std::size_t>& owned)
    {
        const std::lock_guard lock(mutex_);
        if (delivered.empty()) {
            problems_.push_back("an empty batch");
        }
        if (std::find(owned.begin(), owned.end(), delivered.partition()) == owned.end()) {
            problems_.push_back("a batch of partition " + std::to_string(delivered.partition()) +
                                " reached a consumer that does not own it");
        }
        for (const int item : delivered) {
            const int source = item / source_stride;
            const int sequence = item % source_stride;
            if (source < 0 || source >= sources || sequence >= per_source) {
                problems_.push_back("unexpected item " + std::to_string(item));
                continue;
            }
            ++counts_[static_cast<std::size_t>(source)][static_cast<std::size_t>(sequence)];
            ++received_;
            // Order holds per producing thread. The coroutine's produces resume on either io thread,
            // and a memory topic's producer lanes keep only each thread's order (memory-storage.md).
            auto [last, inserted] = last_sequence_.emplace(std::pair(delivered.partition(), source), sequence);
            if (!inserted && source != coroutine_source) {
                if (last->second >= sequence) {
                    problems_.push_back("partition " + std::to_string(delivered.partition()) + ": item " +
                                        std::to_string(item) + " after sequence " + std::to_string(last->second));
                }
                last->second = sequence;
            }
            if (std::string disagreement = routing_.check(item, delivered.partition()); !disagreement.empty()) {
                problems_.push_back(std::move(disagreement));
            }
        }
        if (received_ >= sources * per_source) {
            complete_.notify_all();
        }
    }

    void fail(std::string problem)
    {
        const std::lock_guard lock(mutex_);
        problems_.push_back(std::move(problem));
        complete_.notify_all();
    }

    /// Waits (at most the hang guard) until the group received as many items as were produced.
    bool wait_complete()
    {
        std::unique_lock lock(mutex_);
        return complete_.wait_for(lock, hang_guard, [&] { return received_ >= sources * per_source; });
    }

    std::size_t missing() const
    {
        const std::lock_guard lock(mutex_);
        return count_where([](int count) { return count == 0; });
    }

    std::size_t duplicated() const
    {
        const std::lock_guard lock(mutex_);
        return count_where([](int count) { return count > 1; });
    }

    std::vector<std::string> problems() const
    {
        const std::lock_guard lock(mutex_);
        return problems_;
    }

    const std::string& name() const noexcept { return name_; }

private:
    template <class Predicate>
    std::size_t count_where(Predicate predicate) const
    {
        std::size_t found = 0;
        for (const auto& counts : counts_) {
            found += static_cast<std::size_t>(std::count_if(counts.begin(), counts.end(), predicate));
        }
        return found;
    }

    const std::string name_;
    routing_record& routing_;
    mutable std::mutex mutex_;
    std::condition_variable complete_;
    std::vector<int> counts_[sources];                          // guarded by mutex_
    std::map<std::pair<std::size_t, int>, int> last_sequence_;  // (partition, source) -> sequence; guarded by mutex_
    std::vector<std::string> problems_;                         // guarded by mutex_
    int received_ = 0;                                          // guarded by mutex_
};

/// Consumes, records and commits until the queue closes.
asio::awaitable<void> consume_until_closed(bq::pull_consumer<int>& consumer, group_ledger& ledger)
{
    const std::vector<std::size_t> owned = consumer.partitions();
    try {
        for (;;) {
            const bq::batch<int> delivered = co_await consumer.consume();
            ledger.record(delivered, owned);
            co_await consumer.commit();
        }
    } catch (const boost::system::system_error& failure) {
        if (failure.code() != boost::asio::error::operation_aborted && failure.code() != bq::errc::closed) {
            ledger.fail("consumer of group " + ledger.name() + ": " + failure.what());
        }
    }
}

/// Produces the source's items with try_produce, alternating singles and batches of 2 to 5.
void produce_from_thread(bq::producer<int> producer, int source)
{
    const std::vector<int> items = items_of_source(source);
    for (std::size_t at = 0; at < items.size();) {
        const std::size_t count = std::min<std::size_t>(at % 5 + 1, items.size() - at);
        if (count == 1) {
            (void)producer.try_produce(items[at]);
        } else {
            (void)producer.try_produce(std::span<const int>(items).subspan(at, count));
        }
        at += count;
    }
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("conformance: concurrent producers and consumers on two threads deliver every item exactly "
                        "once per group",
                        "[conformance][concurrency]", immediate_conformance_backends)
{
    // Not over Kafka: the consumers check each batch against the partitions they own when they
    // start, which Kafka's group protocol assigns seconds later; and the io_context threads cannot
    // end after queue.close(), since Kafka group members keep waiting until their handles close
    // (docs/kafka.md, "Pull consumers", Close). Nor could TSan run it (librdkafka's threads).
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue, conformance_topic<int>{.name = "stress", .partitions = 4});
    auto group_a = queue.create_pull_consumers<int>(manual("stress", "a", 16), 2);
    auto group_b = queue.create_pull_consumers<int>(manual("stress", "b", 7), 1);
    routing_record routing;
    group_ledger ledger_a("a", routing);
    group_ledger ledger_b("b", routing);

    std::vector<std::shared_ptr<spawned>> coroutines;
    for (auto& consumer : group_a) {
        coroutines.push_back(spawn(io, consume_until_closed(consumer, ledger_a)));
    }
    coroutines.push_back(spawn(io, consume_until_closed(group_b.front(), ledger_b)));
    auto producer = queue.producer<int>("stress");
    // Set when the producing coroutine ends: its last produce completes once the storage has
    // acknowledged it, which may come after its items were readable (an acknowledging backend), so
    // the queue closes only then, as it does only after the producer threads are joined.
    std::promise<void> coroutine_produced;
    std::future<void> coroutine_done = coroutine_produced.get_future();
    coroutines.push_back(spawn(io, [&producer, &coroutine_produced]() -> asio::awaitable<void> {
        struct signal_at_end {
            std::promise<void>& done;
            ~signal_at_end() { done.set_value(); }
        } at_end{coroutine_produced};
        const std::vector<int> items = items_of_source(coroutine_source);
        for (std::size_t at = 0; at < items.size(); at += 10) {
            co_await producer.produce(std::vector<int>(items.begin() + static_cast<std::ptrdiff_t>(at),
                                                       items.begin() + static_cast<std::ptrdiff_t>(at + 10)));
        }
    }));

    auto work = asio::make_work_guard(io);
    std::vector<std::thread> threads;
    for (int thread = 0; thread < 2; ++thread) {
        threads.emplace_back([&io] { io.run(); });
    }
    std::vector<std::thread> producers;
    for (int source = 0; source < producer_threads; ++source) {
        producers.emplace_back(produce_from_thread, producer, source);
    }
    for (auto& thread : producers) {
        thread.join();
    }
    CHECK(coroutine_done.wait_for(hang_guard) == std::future_status::ready);
    const bool a_complete = ledger_a.wait_complete();
    const bool b_complete = ledger_b.wait_complete();
    queue.close();
    work.reset();
    for (auto& thread : threads) {
        thread.join();
    }

    CHECK(a_complete);
    CHECK(b_complete);
    for (const auto& coroutine : coroutines) {
        CHECK(coroutine->finished);
        CHECK_NOTHROW(coroutine->rethrow());
    }
    for (const group_ledger* ledger : {&ledger_a, &ledger_b}) {
        INFO("group " << ledger->name());
        CHECK(ledger->missing() == 0);
        CHECK(ledger->duplicated() == 0);
        const std::vector<std::string> problems = ledger->problems();
        CHECK(problems.empty());
        if (!problems.empty()) {
            INFO("first problem: " << problems.front());
            CHECK(problems.size() == 0);
        }
    }
}

}  // namespace concurrency_conformance_test
