// Push consumers: the queue runs consumer loops on its executor and hands every batch to a handler.
// A singleton auto-commit consumer type, a per-batch manual-commit consumer type built by a factory,
// a callable, and a manual-commit callable that gives up on what it cannot handle after retries and
// sends it to a dead-letter topic. The region between the [readme:push] markers is the README's push
// example.
#include <bufferqueue/bufferqueue.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace asio = boost::asio;
namespace bq = bufferqueue;

struct foo {
    int id = 0;
};
struct bar {
    int id = 0;
    double amount = 0;
};

/// Shared by the consumers: what they saw.
struct ledger {
    std::mutex mutex;
    int foos = 0;
    int bars = 0;
    int bar_batches = 0;
    double amount = 0;
};

// [readme:push]
// One instance shared by both loops (so it must be thread-safe); auto commit: a batch is committed
// when it is pulled, and a throwing handler does not get it again.
struct foo_consumer {
    static constexpr bq::push_subscription subscription{.topic = "topic-foo",
                                                        .group = "group-foo",
                                                        .batch_size = 100,
                                                        .lifetime = bq::lifetime::singleton,
                                                        .concurrency = 2};

    asio::awaitable<void> consume(bq::batch<foo> items)
    {
        std::lock_guard lock(ledger_->mutex);
        ledger_->foos += static_cast<int>(items.size());
        co_return;
    }

    ledger* ledger_ = nullptr;
};

// A fresh instance per batch; manual commit: an uncommitted batch is delivered again.
struct bar_consumer {
    static constexpr bq::push_subscription subscription{.topic = "topic-bar",
                                                        .group = "group-bar",
                                                        .batch_size = 50,
                                                        .lifetime = bq::lifetime::per_batch,
                                                        .concurrency = 2};

    asio::awaitable<void> consume(bq::batch<bar> items, bq::committer& committer)
    {
        double sum = 0;
        for (const bar& b : items) {
            sum += b.amount;
        }
        co_await committer.commit();  // commit after the work is done: at-least-once
        std::lock_guard lock(ledger_->mutex);
        ledger_->bars += static_cast<int>(items.size());
        ledger_->amount += sum;
        ++ledger_->bar_batches;
    }

    ledger* ledger_ = nullptr;
};
// [readme:push-end]

static_assert(bq::push_consumer<foo_consumer> && bq::push_consumer<bar_consumer>);

int main(int argc, char** argv)
{
    if (argc > 1) {  // no arguments: --help prints the usage line, anything else is a mistake
        const bool help = argc == 2 && (std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h");
        std::fprintf(help ? stdout : stderr,
                     "usage: %s\n  Runs push consumers on in-memory topics; takes no arguments.\n", argv[0]);
        return help ? 0 : 2;
    }
    constexpr int count = 1'000;
    ledger seen;

    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<foo>{.name = "topic-foo", .partitions = 2});
    queue.add_topic(bq::memory_topic_options<bar>{.name = "topic-bar", .partitions = 4});
    // [dead-letter]
    // What a manual-commit consumer gives up on goes to a topic of bq::dead_letter<bar>: the item,
    // where it came from, how often it failed and why. The batch is committed only once its dead
    // letters are acknowledged, so every bar is refunded or dead-lettered, never neither.
    queue.add_topic(bq::memory_topic_options<bq::dead_letter<bar>>{.name = "topic-bar.dead"});
    int refunded = 0;
    queue.add_push_consumer({.topic = "topic-bar",
                             .group = "group-bar-refunds",
                             .batch_size = 1,
                             .max_attempts = 3,
                             .retry_backoff = {.initial = std::chrono::milliseconds(1)},
                             .dead_letter_topic = "topic-bar.dead"},
                            [&](bq::batch<bar> items, bq::committer& committer) -> asio::awaitable<void> {
                                if (items.front().id % 250 == 0) {
                                    throw std::runtime_error("refund rejected by the bank");
                                }
                                co_await committer.commit();
                                refunded += static_cast<int>(items.size());
                            });
    // An operator's view of the dead letters (any consumer works: here a push consumer).
    std::vector<int> dead_ids;
    queue.add_push_consumer(
        {.topic = "topic-bar.dead", .group = "operators"},
        [&](bq::batch<bq::dead_letter<bar>> letters) -> asio::awaitable<void> {
            for (const bq::dead_letter<bar>& letter : letters) {
                std::printf("push: dead letter: bar %d from %s partition %zu after %zu attempts: %s\n", letter.item->id,
                            letter.topic.c_str(), letter.partition, letter.attempts, letter.error.c_str());
                dead_ids.push_back(letter.item->id);
            }
            co_return;
        });
    // [dead-letter-end]

    // A callable (item type deduced from its parameter) with the same lifetime and commit rules.
    int callable_items = 0;
    queue.add_push_consumer({.topic = "topic-foo", .group = "group-foo-audit", .batch_size = 10},
                            [&](bq::batch<foo> items) -> asio::awaitable<void> {
                                callable_items += static_cast<int>(items.size());
                                co_return;
                            });
    // Failures of handlers go to an error sink (default: one line on stderr).
    queue.set_push_error_sink([](const bq::push_error& failure) {
        std::fprintf(stderr, "push: %.*s/%.*s failed: %.*s\n", static_cast<int>(failure.topic.size()),
                     failure.topic.data(), static_cast<int>(failure.group.size()), failure.group.data(),
                     static_cast<int>(failure.message.size()), failure.message.data());
    });

    // [readme:push-register]
    // The consumers need a constructor argument, so factories make them: the singleton once, now;
    // a bar_consumer for every batch. (Default-constructible ones: add_push_consumers<A, B>().)
    queue.add_push_consumers<foo_consumer, bar_consumer>([&] { return foo_consumer{.ledger_ = &seen}; },
                                                         [&] { return bar_consumer{.ledger_ = &seen}; });
    queue.start();  // runs every push loop on the queue's executor
    // Later, in a coroutine: stop pulling, let running handlers finish; no batch is lost.
    //     co_await queue.stop();
    // [readme:push-register-end]

    std::vector<foo> foos;
    std::vector<bar> bars;
    for (int i = 0; i < count; ++i) {
        foos.push_back({.id = i});
        bars.push_back({.id = i, .amount = 0.5});
    }
    queue.producer<foo>("topic-foo").try_produce(std::span<const foo>(foos));
    queue.producer<bar>("topic-bar").try_produce(std::span<const bar>(bars));

    // Stop once everything arrived: stop() lets running handlers finish and completes when every
    // loop has ended; then io.run() runs out of work.
    bool stopped = false;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            asio::steady_timer timer(io);
            for (int waited = 0; waited < 10'000; ++waited) {
                {
                    std::lock_guard lock(seen.mutex);
                    if (seen.foos == count && seen.bars == count && callable_items == count &&
                        refunded + static_cast<int>(dead_ids.size()) == count) {
                        break;
                    }
                }
                timer.expires_after(std::chrono::milliseconds(1));
                co_await timer.async_wait(asio::use_awaitable);
            }
            co_await queue.stop();
            stopped = true;
        },
        asio::detached);
    io.run();

    std::printf("push: foo_consumer (singleton, auto commit) got %d foos\n", seen.foos);
    std::printf("push: bar_consumer (per batch, manual commit) got %d bars in %d batches, amount %.1f\n", seen.bars,
                seen.bar_batches, seen.amount);
    std::printf("push: callable got %d foos\n", callable_items);
    std::printf("push: %d bars refunded, %zu dead-lettered\n", refunded, dead_ids.size());
    std::sort(dead_ids.begin(), dead_ids.end());
    const bool complete = stopped && seen.foos == count && seen.bars == count && callable_items == count &&
                          seen.amount == count * 0.5 && refunded == count - 4 &&
                          dead_ids == std::vector<int>{0, 250, 500, 750};
    std::printf("push: %s\n", complete ? "done" : "FAILED");
    return complete ? 0 : 1;
}
