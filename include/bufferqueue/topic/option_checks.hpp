// bufferqueue: option checks every storage backend's `make_topic` shares, so each refuses bad
// options with the same error and wording (compiled once: src/topic/option_checks.cpp).
#pragma once

#include "bufferqueue/options.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace bufferqueue {

/// Most partitions a topic of any backend may have.
inline constexpr std::size_t max_partitions = 65536;

/// Throws `bufferqueue::error` `errc::invalid_argument` reading "{kind} topic '{topic}': option
/// '{option}' {requirement}" unless `valid`. `kind` names the backend ("memory", "mmap", ...).
/// Allocates only when it throws.
void require_option(bool valid, std::string_view kind, const std::string& topic, std::string_view option,
                    const std::string& requirement);

/// Refuses an empty or only-whitespace topic name (`errc::invalid_argument`, option 'name').
void require_topic_name(std::string_view kind, const std::string& name);

/// Refuses a partition count outside 1..`max_partitions` (`errc::invalid_argument`, option
/// 'partitions').
void require_partition_count(std::string_view kind, const std::string& name, std::size_t partitions);

/// Refuses a bounded capacity of 0 and a `full_mode` that is neither `wait` nor `fail`
/// (`errc::invalid_argument`, options 'bounded_capacity' and 'full_mode').
void require_bounds(std::string_view kind, const std::string& name, std::optional<std::size_t> bounded_capacity,
                    full_mode mode);

}  // namespace bufferqueue
