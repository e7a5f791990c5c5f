// bufferqueue: option checks every storage backend's `make_topic` shares, so each refuses bad
// options with the same error and wording.
#pragma once

#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/error.hpp"
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
inline void require_option(bool valid, std::string_view kind, const std::string& topic, std::string_view option,
                           const std::string& requirement)
{
    if (!valid) {
        throw error(errc::invalid_argument,
                    detail::format_message("{} topic '{}': option '{}' {}", kind, topic, option, requirement));
    }
}

/// Refuses an empty or only-whitespace topic name (`errc::invalid_argument`, option 'name').
inline void require_topic_name(std::string_view kind, const std::string& name)
{
    require_option(!name.empty() && !detail::only_whitespace(name), kind, name, "name",
                   "must not be empty or only whitespace");
}

/// Refuses a partition count outside 1..`max_partitions` (`errc::invalid_argument`, option
/// 'partitions').
inline void require_partition_count(std::string_view kind, const std::string& name, std::size_t partitions)
{
    require_option(partitions >= 1 && partitions <= max_partitions, kind, name, "partitions",
                   detail::format_message("must be between 1 and {} (got {})", max_partitions, partitions));
}

/// Refuses a bounded capacity of 0 and a `full_mode` that is neither `wait` nor `fail`
/// (`errc::invalid_argument`, options 'bounded_capacity' and 'full_mode').
inline void require_bounds(std::string_view kind, const std::string& name, std::optional<std::size_t> bounded_capacity,
                           full_mode mode)
{
    require_option(!bounded_capacity || *bounded_capacity >= 1, kind, name, "bounded_capacity",
                   "must be at least 1 when set (got 0)");
    require_option(mode == full_mode::wait || mode == full_mode::fail, kind, name, "full_mode",
                   "must be full_mode::wait or full_mode::fail");
}

}  // namespace bufferqueue
