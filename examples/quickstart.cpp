// Quickstart: in-memory topics, producers on several threads, pull consumers in coroutines with
// manual commit (at-least-once) and auto commit (at-most-once). Run it with `scripts/run example`.
// The region between the [readme:usage] markers is the README's usage example (a test compares them).
// Memory topics only: the core component's header (and target, bufferqueue::core) is all it needs.
#include <bufferqueue/core.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace asio = boost::asio;
namespace bq = bufferqueue;

struct order {
    int customer_id = 0;
    double total = 0;
};

constexpr int producer_threads = 3;
constexpr int orders_per_thread = 100'000;
constexpr int total_orders = producer_threads * orders_per_thread;

// A consumer loop ends when the queue closes: a waiting consume() completes with operation_aborted,
// a later one fails with errc::closed. Anything else is an error.
void ignore_abort(std::exception_ptr error)
{
    try {
        if (error) {
            std::rethrow_exception(error);
        }
    } catch (const boost::system::system_error& failure) {
        if (failure.code() != asio::error::operation_aborted && failure.code() != bq::errc::closed) {
            throw;
        }
    }
}

int main(int argc, char** argv)
{
    if (argc > 1) {  // no arguments: --help prints the usage line, anything else is a mistake
        const bool help = argc == 2 && (std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h");
        std::fprintf(help ? stdout : stderr,
                     "usage: %s\n  Runs in-memory topics with producers on several threads and pull consumers; takes "
                     "no arguments.\n",
                     argv[0]);
        return help ? 0 : 2;
    }
    std::atomic<int> billed{0};
    std::atomic<int> batches{0};
    double revenue = 0;

    // [readme:usage]
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};

    // Orders of one customer always go to one partition and keep their order there.
    queue.add_topic(bq::memory_topic_options<order>{
        .name = "orders", .partitions = 4, .partition_key = [](const order& o) { return o.customer_id; }});

    // Group "billing" commits by hand (at-least-once); its two consumers share the four partitions.
    std::vector<bq::pull_consumer<order>> billing = queue.create_pull_consumers<order>(
        {.topic = "orders", .group = "billing", .auto_commit = false, .batch_size = 100}, 2);

    for (bq::pull_consumer<order>& consumer : billing) {
        asio::co_spawn(
            io,
            [&]() -> asio::awaitable<void> {
                for (;;) {
                    bq::batch<order> batch = co_await consumer.consume();  // 1..100 items of one partition
                    for (const order& o : batch) {
                        revenue += o.total;
                    }
                    co_await consumer.commit();  // without it, the batch would be delivered again
                    ++batches;
                    if (billed += static_cast<int>(batch.size()); billed == total_orders) {
                        queue.close();  // ends every consumer loop
                    }
                }
            },
            ignore_abort);
    }

    bq::producer<order> orders = queue.producer<order>("orders");  // copyable, thread-safe
    orders.try_produce(order{.customer_id = 7, .total = 1.0});     // never waits
    // [readme:usage-end]

    // Audit lines are routed round-robin; at most 1,000 may wait for their consumers.
    queue.add_topic(bq::memory_topic_options<std::string>{
        .name = "audit", .partitions = 2, .bounded_capacity = 1'000, .full_mode = bq::full_mode::wait});
    // Group "audit-log" commits on pull (at-most-once).
    bq::pull_consumer<std::string> audit_log =
        queue.create_pull_consumer<std::string>({.topic = "audit", .group = "audit-log", .auto_commit = true});
    int audited = 0;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            for (;;) {
                bq::batch<std::string> lines = co_await audit_log.consume();
                audited += static_cast<int>(lines.size());
            }
        },
        ignore_abort);

    // Producers on several threads share one producer handle per topic.
    bq::producer<std::string> audit = queue.producer<std::string>("audit");
    const auto started = std::chrono::steady_clock::now();
    std::vector<std::thread> producers;
    for (int thread = 0; thread < producer_threads; ++thread) {
        producers.emplace_back([&, thread] {
            audit.try_produce("producer " + std::to_string(thread) + " started");  // a temporary: moved in
            std::vector<order> chunk;
            // The first thread makes one order fewer: the order produced above completes the count.
            const int count = thread == 0 ? orders_per_thread - 1 : orders_per_thread;
            for (int i = 0; i < count; ++i) {
                chunk.push_back({.customer_id = thread * 100 + i % 10, .total = 1.0});
                if (chunk.size() == 50 || i == count - 1) {
                    orders.try_produce(std::span<const order>(chunk));  // one batch, routed per item
                    chunk.clear();
                }
            }
        });
    }
    std::thread runner([&] { io.run(); });
    for (auto& producer : producers) {
        producer.join();
    }
    const auto produced = std::chrono::steady_clock::now();
    runner.join();  // the consumers' loops end once billing has every order (queue.close())
    const auto consumed = std::chrono::steady_clock::now();
    const auto per_second = [&](auto finished) {
        const double seconds = std::chrono::duration<double>(finished - started).count();
        return seconds > 0 ? total_orders / seconds / 1e6 : 0.0;
    };
    const auto milliseconds = [&](auto finished) {
        return std::chrono::duration<double, std::milli>(finished - started).count();
    };

    std::printf("quickstart: produced %d orders from %d threads in %.1f ms (%.1f million orders/s)\n", total_orders,
                producer_threads, milliseconds(produced), per_second(produced));
    std::printf("quickstart: billing (manual commit) consumed %d orders in %d batches in %.1f ms (%.1f million "
                "orders/s), revenue %.0f\n",
                billed.load(), batches.load(), milliseconds(consumed), per_second(consumed), revenue);
    std::printf("quickstart: audit-log (auto commit) consumed %d lines\n", audited);

    // [readme:stats]
    // Lag and depth, in items, for any backend; a snapshot that never blocks producers.
    bq::topic_stats stats = queue.stats<order>("orders");
    for (const bq::group_stats& group : stats.groups) {
        std::printf("quickstart: group %s lags %llu of %llu orders\n", group.name.c_str(),
                    static_cast<unsigned long long>(group.lag), static_cast<unsigned long long>(stats.produced));
    }
    // [readme:stats-end]

    const bool complete = billed.load() == total_orders && revenue == total_orders &&
                          stats.produced == static_cast<std::uint64_t>(total_orders) && stats.groups.size() == 1 &&
                          stats.groups[0].lag == 0;
    std::printf("quickstart: %s\n", complete ? "done" : "FAILED");
    return complete ? 0 : 1;
}
