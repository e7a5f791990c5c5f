// bufferqueue: in-memory topics - their options and their `make_topic` (see
// `buffer_queue::add_topic`).
#pragma once

#include "bufferqueue/memory/detail/memory_partition.hpp"
#include "bufferqueue/options.hpp"
#include "bufferqueue/partition_key.hpp"
#include "bufferqueue/topic/option_checks.hpp"
#include "bufferqueue/topic/partitioned_topic.hpp"
#include "bufferqueue/topic/topic_context.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <utility>

namespace bufferqueue {

/// Registration options of an in-memory topic of `T` (see `buffer_queue::add_topic`).
/// Every field has a default; `name` must be set.
template <class T>
struct memory_topic_options {
    /// Topic name, unique per item type. Must not be empty or only whitespace.
    std::string name{};
    /// Number of partitions, at least 1. Consumers per group cannot exceed it.
    std::size_t partitions = 1;
    /// Items per memory segment, at least 1. Batches never span segments, so a consumer batch is
    /// at most this long.
    std::size_t segment_size = 1024;
    /// Topic-wide limit on items not yet committed by every group; empty means unbounded.
    std::optional<std::size_t> bounded_capacity{};
    /// Behaviour of `produce` when `bounded_capacity` is reached.
    bufferqueue::full_mode full_mode = bufferqueue::full_mode::wait;
    /// Optional key routing; round-robin when empty.
    key_selector<T> partition_key{};
    /// Producer lanes per partition, 0 (automatic, the default) or 1 to 64. Each producing thread
    /// appends to a lane: with N > 1 lanes, the first N - 1 producing threads (numbered process-wide,
    /// lowest free number first, reused after a thread exits) own a lane each and append without a
    /// lock or any shared write, and all other threads share the last lane. A consumer reads a
    /// partition lane by lane, so one thread's items keep their order, while items of different
    /// threads interleave by batch rather than in the exact order they were appended. 1 keeps that
    /// exact order (appends from different threads then contend for one lock). Automatic: 8 for a
    /// topic without `partition_key` and with at least 2 partitions (where round-robin already
    /// spreads one thread's items over partitions), otherwise 1, so keyed and single-partition
    /// topics keep the order of appends. Lanes allocate their first segment on first use.
    std::size_t producer_lanes = 0;
};

namespace detail {

/// Checks the options of memory topic `name` that its item type does not change (name, partitions,
/// segment_size, bounds, producer_lanes; `keyed`: a partition_key is set) and returns its producer
/// lanes, 0 resolved (see `memory_topic_options::producer_lanes`). Throws `bufferqueue::error`
/// `errc::invalid_argument` naming the option at fault. Compiled once (src/memory/).
std::size_t checked_memory_lanes(const std::string& name, std::size_t partitions, std::size_t segment_size,
                                 std::optional<std::size_t> bounded_capacity, bufferqueue::full_mode full_mode,
                                 std::size_t producer_lanes, bool keyed);

/// Validates `options` and builds the topic's partitions, partition 0 first, each with its resolved
/// producer lanes: what `make_topic` hands to `make_partitioned_topic`. Throws `bufferqueue::error`
/// `errc::invalid_argument` naming the option at fault; allocates.
template <class T>
topic_partitions<memory_partition<T>> make_memory_partitions(const memory_topic_options<T>& options)
{
    const std::size_t lanes =
        checked_memory_lanes(options.name, options.partitions, options.segment_size, options.bounded_capacity,
                             options.full_mode, options.producer_lanes, static_cast<bool>(options.partition_key));
    topic_partitions<memory_partition<T>> partitions;
    partitions.reserve(options.partitions);
    for (std::size_t partition = 0; partition < options.partitions; ++partition) {
        partitions.emplace_back(options.segment_size, options.bounded_capacity.has_value(), lanes);
    }
    return partitions;
}

}  // namespace detail

/// The `make_topic` of in-memory topics, found by `buffer_queue::add_topic`: validates `options` and
/// builds the topic through `make_partitioned_topic` (memory partitions never block, so it asks for
/// no pool). Throws `bufferqueue::error` `errc::invalid_argument` naming the option at fault.
/// Allocates; never blocks.
template <class T>
registered_topic make_topic(memory_topic_options<T> options, topic_context& context)
{
    // The topic keeps a round-robin position per producer lane (`producer_lanes_of`).
    topic_partitions<detail::memory_partition<T>> partitions = detail::make_memory_partitions(options);
    return make_partitioned_topic(context,
                                  topic_settings<T>{.name = std::move(options.name),
                                                    .partition_key = std::move(options.partition_key),
                                                    .bounded_capacity = options.bounded_capacity,
                                                    .full_mode = options.full_mode},
                                  std::move(partitions));
}

}  // namespace bufferqueue
