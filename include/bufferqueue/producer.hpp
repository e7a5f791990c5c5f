// bufferqueue: the producer handle of a topic.
#pragma once

#include "bufferqueue/detail/completion.hpp"
#include "bufferqueue/detail/config.hpp"
#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/topic/detail/produce_steps.hpp"
#include "bufferqueue/topic/detail/topic.hpp"

#include <concepts>
#include <cstdint>
#include <memory>
#include <optional>
#include <ranges>
#include <span>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

namespace bufferqueue {

/// The completion token `produce`, `consume` and `commit` use when none is given: they return a
/// `boost::asio::awaitable` to `co_await`.
using default_completion_token = boost::asio::use_awaitable_t<>;

/// Produces items of `T` into one topic. A cheap copyable handle (a shared pointer, and the stop
/// token of `with_cancellation`); every member is thread-safe, so one producer may be shared by many
/// threads. Items given as lvalues or spans are copied into the topic; items given up - a `T&&`, a
/// `std::vector<T>&&`, a range (copied or moved once into a vector the call owns) - are moved into
/// memory topics (persistent and Kafka topics serialize them either way). A `try_produce` that
/// returns false leaves the items it was given as they were; a `produce` has taken its items into
/// the operation when it returns, whatever it completes with.
/// `T` must be copy-constructible.
///
/// Routing is per item: round-robin by default (advancing once per item, also inside a batch), or
/// by the topic's `partition_key`. A batch is not assigned to one partition and gets no order
/// across partitions; items routed to the same partition keep their input order.
///
/// Errors: `try_produce` throws `bufferqueue::error` (`errc::closed` once the queue is closed,
/// `errc::invalid_argument` for a floating key that is not an integer) and whatever the key
/// selector throws. `produce` throws the same from the call itself (the key is computed eagerly),
/// and otherwise completes with a `boost::system::error_code`: `errc::queue_full` (fail mode),
/// `errc::closed`, `boost::asio::error::operation_aborted` when the queue closes or the produce is
/// cancelled (see below) while it waits,
/// `errc::io_error` when a persistent topic cannot store the items (nothing unstored is
/// acknowledged), `errc::invalid_argument` for a record larger than a segment or a throwing copy.
/// Under `use_awaitable` a failure is thrown as `boost::system::system_error`.
///
/// Admission is FIFO: while produces wait for room on a bounded topic, `try_produce` returns false
/// and a new `produce` queues behind them, even when some room is free.
///
/// Cancellation of a produce waiting for room: through a handle made by `with_cancellation`
/// (every Boost version), through the handler's cancellation slot (Boost 1.77 and later), or by
/// closing the queue. Each completes the produce with `boost::asio::error::operation_aborted`.
template <class T>
class producer {
public:
    /// The type of the items this producer appends.
    using item_type = T;

    /// Made by `buffer_queue::producer<T>(name)`.
    explicit producer(std::shared_ptr<detail::topic<T>> topic) noexcept : topic_(std::move(topic)) {}

    /// The topic's name.
    const std::string& topic() const noexcept { return topic_->name(); }

    /// A handle to the same topic whose waiting produces `stop` cancels (the counterpart of the
    /// seed's cancellation token): once `stop.request_stop()` is called - from any thread - a
    /// `produce` of this handle that waits for room, or would have to, completes with
    /// `boost::asio::error::operation_aborted` (posted to its handler's executor) and stores
    /// nothing of the slice it waited for; earlier slices of an oversized batch stay stored, and the
    /// room goes to the producers queued behind it. What fits at once is stored as usual, and
    /// `try_produce` is unaffected. Works on every Boost version; handler cancellation slots keep
    /// working beside it. The request_stop() call runs the cancellation on its own thread (it takes
    /// only the topic's short admission lock). Allocates nothing; thread-safe like every member.
    producer with_cancellation(std::stop_token stop) const
    {
        producer cancellable(topic_);
        cancellable.stop_ = std::move(stop);
        return cancellable;
    }

    /// Stores a copy of `item` if there is room now; false when a bounded topic is full (in either
    /// full mode). Never waits. Allocates only when a memory segment fills up.
    bool try_produce(const T& item) { return try_produce_now(std::span<const T>(&item, 1), false); }

    /// Moves `item` into the topic if there is room now; false, and `item` untouched, when a bounded
    /// topic is full. Never waits. Allocates only when a memory segment fills up.
    bool try_produce(T&& item) { return try_produce_now(std::span<const T>(&item, 1), true); }

    /// Stores copies of the whole batch if it fits now, else nothing (false). Never waits.
    bool try_produce(std::span<const T> items) { return try_produce_now(items, false); }

    /// Moves the whole batch's items into the topic if it fits now (the vector keeps its moved-from
    /// items); else nothing, and `items` untouched (false). Never waits.
    bool try_produce(std::vector<T>&& items) { return try_produce_now(std::span<const T>(items), true); }

    /// Copies an input range once into a vector (moving its items when the range yields rvalues,
    /// e.g. through `std::move_iterator`), then moves them in as the vector overload does.
    template <std::ranges::input_range Range>
        requires(std::convertible_to<std::ranges::range_reference_t<Range>, T> &&
                 !std::convertible_to<Range, std::span<const T>> && !std::convertible_to<Range, const T&>)
    bool try_produce(Range&& items)
    {
        std::vector<T> copied = materialize(std::forward<Range>(items));
        return try_produce_now(std::span<const T>(copied), true);
    }

    /// Stores `item`. Wait mode: waits asynchronously for room. Fail mode: completes with
    /// `errc::queue_full` when there is no room. Signature `void(boost::system::error_code)`.
    /// The item is copied into the operation (once), which moves it into storage, so the argument
    /// may be a temporary.
    template <class CompletionToken = default_completion_token>
    auto produce(const T& item, CompletionToken&& token = default_completion_token())
    {
        std::optional<std::uint32_t> partition = route_one(item);
        return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
            detail::initiate_produce_one<T>{}, token, topic_, item, partition, stop_);
    }

    /// As the `const T&` overload, but `item` is moved into the operation and then into storage:
    /// no copy of it is made.
    template <class CompletionToken = default_completion_token>
    auto produce(T&& item, CompletionToken&& token = default_completion_token())
    {
        std::optional<std::uint32_t> partition = route_one(item);
        return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
            detail::initiate_produce_one<T>{}, token, topic_, std::move(item), partition, stop_);
    }

    /// Stores a batch: one no larger than a bounded topic's capacity is admitted whole; a larger
    /// one is split into capacity-sized slices in wait mode (each admitted whole; cancellation can
    /// leave earlier slices stored) and rejected whole with `errc::queue_full` in fail mode.
    /// The span must stay valid until the operation completes. Allocation: on a keyed topic, a
    /// vector of the items' partitions per call (the operation owns it); one that has to wait also
    /// allocates the parked operation and its completion.
    template <class CompletionToken = default_completion_token>
    auto produce(std::span<const T> items, CompletionToken&& token = default_completion_token())
    {
        std::vector<std::uint32_t> partitions;
        route(items, partitions);
        return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
            detail::initiate_produce<T>{}, token, topic_, std::vector<T>(), items, std::move(partitions), stop_);
    }

    /// Takes ownership of a vector, so a temporary batch is safe with any completion token (the span
    /// overload would leave it dangling while the operation waits), and moves its items into
    /// storage. Otherwise as the span overload.
    template <class CompletionToken = default_completion_token>
    auto produce(std::vector<T>&& items, CompletionToken&& token = default_completion_token())
    {
        std::vector<std::uint32_t> partitions;
        route(std::span<const T>(items), partitions);
        return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
            detail::initiate_produce<T>{}, token, topic_, std::move(items), std::span<const T>(), std::move(partitions),
            stop_);
    }

    /// Copies any input range once (the counterpart of the seed's IEnumerable overloads; a range of
    /// rvalues is moved), then produces it as one batch, as the vector overload does.
    template <std::ranges::input_range Range, class CompletionToken = default_completion_token>
        requires(std::convertible_to<std::ranges::range_reference_t<Range>, T> &&
                 !std::convertible_to<Range, std::span<const T>> && !std::convertible_to<Range, const T&> &&
                 !std::same_as<Range, std::vector<T>>)
    auto produce(Range&& items, CompletionToken&& token = default_completion_token())
    {
        std::vector<T> copied = materialize(std::forward<Range>(items));
        std::vector<std::uint32_t> partitions;
        route(std::span<const T>(copied), partitions);
        return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
            detail::initiate_produce<T>{}, token, topic_, std::move(copied), std::span<const T>(),
            std::move(partitions), stop_);
    }

private:
    // The try_produce overloads: stores all of `items` now or nothing (moving them in when
    // `movable`); throws errc::closed.
    bool try_produce_now(std::span<const T> items, bool movable)
    {
        // Keyless topics never touch the thread's key buffer (a thread-local with a guarded initialization).
        const std::uint32_t* partitions = topic_->partition_key() ? route(items, reusable_partitions()) : nullptr;
        const detail::produce_outcome outcome = topic_->produce_now(items, partitions, false, movable);
        if (outcome == detail::produce_outcome::closed) {
            throw_closed();
        }
        return outcome == detail::produce_outcome::done;
    }

    template <class Range>
    static std::vector<T> materialize(Range&& items)
    {
        std::vector<T> copied;
        if constexpr (std::ranges::sized_range<Range>) {
            copied.reserve(std::ranges::size(items));
        }
        for (auto&& item : items) {
            copied.emplace_back(std::forward<decltype(item)>(item));
        }
        return copied;
    }

    static std::vector<std::uint32_t>& reusable_partitions()
    {
        thread_local std::vector<std::uint32_t> partitions;
        return partitions;
    }

    // The key partition of `item`, or nothing on a keyless topic (round-robin).
    std::optional<std::uint32_t> route_one(const T& item) const
    {
        if (const auto& key = topic_->partition_key()) {
            return route_one(key, item);
        }
        return std::nullopt;
    }

    std::uint32_t route_one(const key_selector<T>& key, const T& item) const
    {
        return detail::key_partition(*topic_, key, item);
    }

    // Fills `partitions` with each item's key partition; null (and nothing filled) for round-robin.
    const std::uint32_t* route(std::span<const T> items, std::vector<std::uint32_t>& partitions) const
    {
        const auto& key = topic_->partition_key();
        if (!key) {
            return nullptr;
        }
        partitions.clear();
        partitions.reserve(items.size());
        for (const T& item : items) {
            partitions.push_back(route_one(key, item));
        }
        return partitions.data();
    }

    [[noreturn]] void throw_closed() const
    {
        throw error(errc::closed, detail::format_message("topic '{}' is closed", topic_->name()));
    }

    std::shared_ptr<detail::topic<T>> topic_;
    std::stop_token stop_;  // set by with_cancellation; empty (never stops) otherwise
};

}  // namespace bufferqueue
