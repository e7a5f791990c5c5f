// Internal: one asynchronous produce into a typed topic, whatever starts it - `producer<T>::produce`,
// or the letter producer of a topic of `dead_letter<T>` (letter_producer.hpp).
#pragma once

#include "bufferqueue/detail/completion.hpp"
#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/topic/detail/topic.hpp"

#include <boost/system/error_code.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <tuple>
#include <utility>
#include <vector>

namespace bufferqueue::detail {

/// The partition `key` sends `item` to on `topic`. Throws `bufferqueue::error`
/// (`errc::invalid_argument`, naming the topic, for a floating key that is not an integer) and what
/// the key selector throws. Thread-safe; allocates only the message of an error.
template <class T>
std::uint32_t key_partition(const topic<T>& topic, const key_selector<T>& key, const T& item)
{
    try {
        return key.partition_for(item, topic.partition_count());
    } catch (const error& failure) {
        throw error(errc::invalid_argument, format_message("topic '{}': {}", topic.name(), failure.what()));
    }
}

/// Stores what fits of `items` now on `topic` (`partitions`: each item's key partition, or null for
/// round-robin; `movable`: the operation owns the items): the produce's result, or nothing when it
/// must wait for room instead. Never throws: a storage failure or a throwing copy becomes the result.
template <class T>
std::optional<std::tuple<boost::system::error_code>> store_now(topic<T>& topic, std::span<const T> items,
                                                               const std::uint32_t* partitions, bool movable)
{
    try {
        const produce_outcome outcome = topic.produce_now(items, partitions, true, movable);
        if (outcome == produce_outcome::must_wait) {
            return std::nullopt;
        }
        return std::tuple(produce_error(outcome));
    } catch (...) {
        // A storage failure (errc::io_error), or T's copy constructor threw.
        return std::tuple(current_exception_code(errc::invalid_argument));
    }
}

/// One produce, whatever the storage: the topic's runner stores it where blocking is allowed
/// (inline for memory, on the I/O pool for mmap) and completes it, or parks it to wait for room
/// (`storage_runner::start`'s step).
template <class T>
struct produce_step {
    std::shared_ptr<topic<T>> target;
    std::vector<T> owned;  // the items when the operation owns them, else empty
    std::span<const T> items;
    std::vector<std::uint32_t> partitions;  // each item's key partition, or empty (round-robin)
    std::stop_token stop;

    /// Stores what fits now; nothing when the produce must wait for room instead.
    std::optional<std::tuple<boost::system::error_code>> attempt()
    {
        return store_now(*target, owned.empty() ? items : std::span<const T>(owned),
                         partitions.empty() ? nullptr : partitions.data(), !owned.empty());
    }

    /// Parks the produce on the topic until there is room.
    void wait(std::unique_ptr<pending_completion<boost::system::error_code>> completion) &&
    {
        topic<T>& parked_on = *target;
        parked_on.produce_waiting(std::make_unique<produce_operation<T>>(std::move(completion), std::move(owned), items,
                                                                         std::move(partitions), std::move(stop)));
    }
};

/// A single item: the step owns it only when it has to wait, so a produce that stores at once
/// allocates nothing.
template <class T>
struct produce_one_step {
    std::shared_ptr<topic<T>> target;
    T item;
    std::optional<std::uint32_t> partition;
    std::stop_token stop;

    std::optional<std::tuple<boost::system::error_code>> attempt()
    {
        return store_now(*target, std::span<const T>(&item, 1), partition ? &*partition : nullptr, true);
    }

    void wait(std::unique_ptr<pending_completion<boost::system::error_code>> completion) &&
    {
        std::vector<T> owned;
        owned.push_back(std::move(item));
        std::vector<std::uint32_t> partitions;
        if (partition) {
            partitions.push_back(*partition);
        }
        produce_step<T>{std::move(target), std::move(owned), {}, std::move(partitions), std::move(stop)}.wait(
            std::move(completion));
    }
};

// GCC 12 at -O2 reports the step below as "used uninitialized" (-Wuninitialized) once the memory
// partition's move of the item is inlined into it, for an item holding a std::optional
// (dead_letter<T>): a false positive of its std::optional analysis - every member is initialized
// by the aggregate initialization. Silenced here only, so users' -Werror builds stay clean.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
/// The initiation of a one-item produce (`boost::asio::async_initiate`'s, signature
/// `void(boost::system::error_code)`): completes `handler` once, never inside this call.
template <class T>
struct initiate_produce_one {
    template <class Handler>
    void operator()(Handler&& handler, std::shared_ptr<topic<T>> target, T item, std::optional<std::uint32_t> partition,
                    std::stop_token stop) const
    {
        const topic<T>& started_on = *target;
        started_on.runner().template start<boost::system::error_code>(
            std::forward<Handler>(handler), started_on.executor(),
            produce_one_step<T>{std::move(target), std::move(item), partition, std::move(stop)});
    }
};
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/// The initiation of a batch produce (as `initiate_produce_one`): the operation owns `owned`, or
/// else refers to the caller's `items`.
template <class T>
struct initiate_produce {
    template <class Handler>
    void operator()(Handler&& handler, std::shared_ptr<topic<T>> target, std::vector<T> owned, std::span<const T> items,
                    std::vector<std::uint32_t> partitions, std::stop_token stop) const
    {
        const topic<T>& started_on = *target;
        started_on.runner().template start<boost::system::error_code>(
            std::forward<Handler>(handler), started_on.executor(),
            produce_step<T>{std::move(target), std::move(owned), items, std::move(partitions), std::move(stop)});
    }
};

}  // namespace bufferqueue::detail
