// bufferqueue: options for topics and consumers.
#pragma once

#include "bufferqueue/partition_key.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace bufferqueue {

namespace detail {

/// True for a non-empty `text` made only of ASCII whitespace (space, \t, \n, \v, \f, \r): such
/// topic and group names are refused, as the seed's `ArgumentException.ThrowIfNullOrWhiteSpace`
/// does. Never allocates.
constexpr bool only_whitespace(std::string_view text) noexcept
{
    return !text.empty() && text.find_first_not_of(" \t\n\v\f\r") == std::string_view::npos;
}

}  // namespace detail

/// What producing into a full bounded memory topic does.
enum class full_mode {
    wait,  ///< `produce` waits asynchronously for room (the default)
    fail,  ///< `produce` fails with `errc::queue_full`
};

/// When a persistent (mmap) topic forces appended records to disk (msync). Segment rollover and
/// consumer commits are flush boundaries under both strategies.
enum class flush_strategy {
    immediate,  ///< every produce call flushes its records before it returns (the default)
    batch,      ///< a partition flushes after every `flush_batch_size` records
};

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

/// Options of a consumer group's pull consumers (see `buffer_queue::create_pull_consumers`).
struct pull_consumer_options {
    /// Name of the topic to read.
    std::string topic{};
    /// Consumer group: independent progress per group; must not be empty or only whitespace, and must
    /// be new on the topic or have no open consumer (it is then opened again).
    std::string group{};
    /// true: a pull commits what it returns (at-most-once). false (default): progress advances only on
    /// `commit()` and an uncommitted batch is delivered again (at-least-once).
    bool auto_commit = false;
    /// Upper bound of items per batch, at least 1.
    std::size_t batch_size = 100;
};

}  // namespace bufferqueue
