// Helpers of the conformance suite: running an io_context until something happened, collecting
// completions, and reading what consumers deliver. Public bufferqueue headers only.
#pragma once

#include "catch.hpp"
#include "conformance/backend_fixtures.hpp"
#include "queue_test_support.hpp"

#if defined(BUFFERQUEUE_CATCH2_MAJOR) ? BUFFERQUEUE_CATCH2_MAJOR == 3 : __has_include(<catch2/catch_test_macros.hpp>)
#include <catch2/catch_template_test_macros.hpp>
#endif

#include <bufferqueue/bufferqueue.hpp>

#include <utility>  // before the Asio coroutine headers (GCC 12)

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace conformance {

namespace asio = boost::asio;
namespace bq = bufferqueue;
using boost::system::error_code;

/// Bounds every wait of a test, so an operation that never completes fails the test instead of
/// hanging it. A hang guard only: no assertion depends on how long anything takes.
constexpr auto hang_guard = std::chrono::seconds(60);

/// How long `settle` runs an io_context: time for a backend whose calls block to start an
/// operation on its own threads (so it is parked, not still starting) before the test acts on it.
constexpr auto settle_time = std::chrono::milliseconds(50);

/// Bounds loops that wait for progress.
constexpr int max_rounds = 10000;

using bufferqueue::test::run_until;  // queue_test_support.hpp: the one every test uses

/// Runs `io` for `settle_time` (handlers that are ready run; parked operations stay parked).
inline void settle(asio::io_context& io)
{
    io.restart();
    io.run_for(settle_time);
    io.restart();
}

/// Runs `io` in `settle` steps until `done()` holds or the hang guard expires; returns `done()`. For
/// what another thread brings about (a group protocol's assignment): unlike `run_until`, which stops
/// after the handler that made `done()` hold, each step runs `io` for `settle_time`, so what that
/// brought about settles too.
template <class Done>
bool settle_until(asio::io_context& io, Done&& done)
{
    const auto deadline = std::chrono::steady_clock::now() + hang_guard;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
        settle(io);
    }
    return done();
}

/// The state of a coroutine started by `spawn`.
struct spawned {
    bool finished = false;
    std::exception_ptr failure;

    /// Rethrows what the coroutine threw (a failed REQUIRE inside it fails the test).
    void rethrow() const
    {
        if (failure) {
            std::rethrow_exception(failure);
        }
    }
};

/// Starts `body` (returning `asio::awaitable<void>`) as a coroutine on `io`; the result records its end.
template <class Body>
std::shared_ptr<spawned> spawn(asio::io_context& io, Body&& body)
{
    auto state = std::make_shared<spawned>();
    asio::co_spawn(io, std::forward<Body>(body), [state](std::exception_ptr failure) {
        state->failure = failure;
        state->finished = true;
    });
    return state;
}

/// Runs `body` as a coroutine on `io` until it ends, then rethrows what it threw.
template <class Body>
void run_coroutine(asio::io_context& io, Body&& body)
{
    const auto state = spawn(io, std::forward<Body>(body));
    const bool finished = run_until(io, [&] { return state->finished; });
    state->rethrow();
    REQUIRE(finished);
}

/// The outcome of an operation completing with an error code only (produce, commit).
struct outcome {
    std::optional<error_code> code;

    auto handler()
    {
        return [this](error_code error) { code = error; };
    }
};

/// The outcome of a consume started with a callback.
template <class T>
struct consume_outcome {
    std::optional<error_code> code;
    std::vector<T> items;
    std::size_t partition = 0;

    auto handler()
    {
        return [this](error_code error, bq::batch<T> delivered) {
            items.assign(delivered.begin(), delivered.end());
            partition = delivered.partition();
            code = error;
        };
    }
};

/// Commits the consumer's latest batch and returns the completion's code.
template <class T>
error_code commit_now(bq::pull_consumer<T>& consumer, asio::io_context& io)
{
    outcome result;
    consumer.commit(result.handler());
    REQUIRE(run_until(io, [&] { return result.code.has_value(); }));
    return *result.code;
}

/// Produces `item` (waiting for room if need be) and returns the completion's code.
template <class T>
error_code produce_now(bq::producer<T>& producer, const T& item, asio::io_context& io)
{
    outcome result;
    producer.produce(item, result.handler());
    REQUIRE(run_until(io, [&] { return result.code.has_value(); }));
    return *result.code;
}

/// The items of the next batch `try_consume` returns (empty when none is readable).
template <class T>
std::vector<T> try_items(bq::pull_consumer<T>& consumer)
{
    const std::optional<bq::batch<T>> delivered = consumer.try_consume();
    if (!delivered) {
        return {};
    }
    return {delivered->begin(), delivered->end()};
}

/// The items of the next batch `consume()` delivers, waiting for one (REQUIREs it within the hang
/// guard, without error). Where a batch is readable at once this is the batch `try_consume` would
/// return; unlike `try_items` it also serves backends whose partitions and records arrive later
/// (Kafka: the group's rebalance, the fetch).
template <class T>
std::vector<T> consumed_items(bq::pull_consumer<T>& consumer, asio::io_context& io)
{
    // Shared with the handler: a consume still pending when the REQUIRE fails completes later.
    const auto result = std::make_shared<consume_outcome<T>>();
    consumer.consume([result](error_code error, bq::batch<T> delivered) {
        result->items.assign(delivered.begin(), delivered.end());
        result->partition = delivered.partition();
        result->code = error;
    });
    REQUIRE(run_until(io, [&] { return result->code.has_value(); }));
    REQUIRE_FALSE(*result->code);
    return result->items;
}

/// The items of the next batch of a manual-commit `consumer` once it holds `count` items (or more):
/// while it holds fewer, the batch is taken again, uncommitted, after `settle_time` - a batch
/// pulled again without a commit starts at the same position and holds what arrived since
/// (docs/consumer-model.md, "Committing"). Where everything produced is readable at once this is
/// the first batch; Kafka's mock cluster serves one produce request's records per fetch, so there a
/// batch can hold the first request's records alone. REQUIREs `count` items within `max_rounds`.
template <class T>
std::vector<T> consumed_items(bq::pull_consumer<T>& consumer, asio::io_context& io, std::size_t count)
{
    std::vector<T> items = consumed_items(consumer, io);
    for (int round = 0; round < max_rounds / 100 && items.size() < count; ++round) {
        settle(io);
        items = consumed_items(consumer, io);
    }
    REQUIRE(items.size() >= count);
    return items;
}

/// Waits until `consumer` owns a partition (REQUIREs it within the hang guard): at once where
/// consumers own their share when created, later where a group protocol assigns it.
template <class T>
void await_assignment(bq::pull_consumer<T>& consumer, asio::io_context& io)
{
    REQUIRE(settle_until(io, [&] { return !consumer.partitions().empty(); }));
}

/// Everything each partition delivers to `consumers` through `try_consume`, committing every batch,
/// until no consumer has anything readable: partition -> items in delivery order.
template <class T>
std::map<std::size_t, std::vector<T>> drain(std::vector<bq::pull_consumer<T>>& consumers, asio::io_context& io)
{
    std::map<std::size_t, std::vector<T>> by_partition;
    for (int round = 0; round < max_rounds; ++round) {
        bool any = false;
        for (auto& consumer : consumers) {
            const std::optional<bq::batch<T>> delivered = consumer.try_consume();
            if (!delivered) {
                continue;
            }
            any = true;
            auto& items = by_partition[delivered->partition()];
            items.insert(items.end(), delivered->begin(), delivered->end());
            REQUIRE_FALSE(commit_now(consumer, io));
        }
        if (!any) {
            break;
        }
    }
    return by_partition;
}

/// Everything `consumers` deliver until `count` items arrived, each batch committed, then whatever
/// `drain` still finds: partition -> items in delivery order. Each consumer waits with `consume()`
/// (its pending consume is cancelled at the end), so this also serves backends whose partitions and
/// records arrive later (Kafka); on the others it checks what `drain` checks, and a missing item
/// fails through the hang guard.
template <class T>
std::map<std::size_t, std::vector<T>> collect(std::vector<bq::pull_consumer<T>>& consumers, asio::io_context& io,
                                              std::size_t count)
{
    struct progress {
        std::map<std::size_t, std::vector<T>> by_partition;
        std::size_t received = 0;
        std::vector<bool> consuming;   // a consume of consumer i is pending
        std::vector<bool> committing;  // a commit of consumer i is pending
        std::optional<error_code> failure;
    };
    // Shared with the handlers: a consume still pending when a REQUIRE fails completes later (it
    // then only touches this state).
    const auto state = std::make_shared<progress>();
    state->consuming.assign(consumers.size(), false);
    state->committing.assign(consumers.size(), false);
    std::function<void(std::size_t)> arm = [&consumers, &arm, state, count](std::size_t index) {
        state->consuming[index] = true;
        consumers[index].consume([&consumers, &arm, state, count, index](error_code error, bq::batch<T> delivered) {
            state->consuming[index] = false;
            if (error) {
                if (error != boost::asio::error::operation_aborted) {
                    state->failure = error;
                }
                return;
            }
            auto& items = state->by_partition[delivered.partition()];
            items.insert(items.end(), delivered.begin(), delivered.end());
            state->received += delivered.size();
            state->committing[index] = true;
            consumers[index].commit([&arm, state, count, index](error_code committed) {
                state->committing[index] = false;
                if (committed) {
                    state->failure = committed;
                } else if (state->received < count) {
                    arm(index);
                }
            });
        });
    };
    for (std::size_t index = 0; index < consumers.size(); ++index) {
        arm(index);
    }
    const auto any = [](const std::vector<bool>& flags) {
        return std::find(flags.begin(), flags.end(), true) != flags.end();
    };
    REQUIRE(run_until(
        io, [&] { return (state->received >= count && !any(state->committing)) || state->failure.has_value(); }));
    INFO("consume or commit failed: " << (state->failure ? state->failure->message() : "no"));
    REQUIRE_FALSE(state->failure);
    // A backend whose calls block may not have started a consume yet: cancel until none is pending.
    for (int attempt = 0; attempt < 100 && any(state->consuming); ++attempt) {
        for (std::size_t index = 0; index < consumers.size(); ++index) {
            if (state->consuming[index]) {
                consumers[index].cancel();
            }
        }
        settle(io);
    }
    REQUIRE_FALSE(any(state->consuming));
    REQUIRE_FALSE(state->failure);
    std::map<std::size_t, std::vector<T>> by_partition = std::move(state->by_partition);
    for (auto& [partition, items] : drain(consumers, io)) {
        auto& all = by_partition[partition];
        all.insert(all.end(), items.begin(), items.end());
    }
    return by_partition;
}

/// Single-consumer form of `collect`.
template <class T>
std::map<std::size_t, std::vector<T>> collect(bq::pull_consumer<T>& consumer, asio::io_context& io, std::size_t count)
{
    std::vector<bq::pull_consumer<T>> one;
    one.push_back(std::move(consumer));
    auto result = collect(one, io, count);
    consumer = std::move(one.front());
    return result;
}

/// Single-consumer form of `drain`.
template <class T>
std::map<std::size_t, std::vector<T>> drain(bq::pull_consumer<T>& consumer, asio::io_context& io)
{
    std::vector<bq::pull_consumer<T>> one;
    one.push_back(std::move(consumer));
    auto result = drain(one, io);
    consumer = std::move(one.front());
    return result;
}

/// How many consumers a case's group gets: `count` over the immediate backends, 1 over the others.
/// On Kafka's mock a group of several members can rebalance more than once while they join; a later
/// rebalance revokes batches already delivered, which go to the next owner again (at-least-once,
/// docs/kafka.md "Pull consumers"), and the exactly-once checks of these cases would count them as
/// duplicates. Kafka groups of several members: tests/kafka/kafka_consumer_test.cpp.
template <class Backend>
constexpr std::size_t group_size(std::size_t count)
{
    return conformance_detail::is_immediate_v<Backend> ? count : 1;
}

/// The integers first, first + 1, ..., last - 1.
inline std::vector<int> range(int first, int last)
{
    std::vector<int> values(static_cast<std::size_t>(last - first));
    std::iota(values.begin(), values.end(), first);
    return values;
}

/// Manual-commit consumer options.
inline bq::pull_consumer_options manual(std::string topic, std::string group, std::size_t batch_size = 100)
{
    return {.topic = std::move(topic), .group = std::move(group), .auto_commit = false, .batch_size = batch_size};
}

/// Auto-commit consumer options.
inline bq::pull_consumer_options automatic(std::string topic, std::string group, std::size_t batch_size = 100)
{
    return {.topic = std::move(topic), .group = std::move(group), .auto_commit = true, .batch_size = batch_size};
}

/// A key selector sending the int item `value` to partition `value / per_partition`: the documented
/// integer mapping routes key k to (k - 1) mod partitions, so key p + 1 reaches partition p.
inline bq::key_selector<int> partition_by_block(int per_partition)
{
    return [per_partition](const int& value) { return value / per_partition + 1; };
}

}  // namespace conformance

/// Names the backend in every failure message of the test case it opens.
#define BUFFERQUEUE_CONFORMANCE_BACKEND() INFO("backend: " << TestType::name)
