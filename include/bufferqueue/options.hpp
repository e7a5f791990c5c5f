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
    /// Empty (default): a record that does not decode fails `consume()` with `errc::corrupt_data`
    /// until `skip()` steps past it. Otherwise the name of a topic of `dead_letter<T>` registered
    /// in the same queue: `consume()` sends such records there and goes on (see
    /// `pull_consumer::consume`). Works under auto and manual commit.
    std::string dead_letter_topic{};
};

}  // namespace bufferqueue
