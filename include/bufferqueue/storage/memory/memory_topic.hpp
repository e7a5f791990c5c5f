// bufferqueue: in-memory topics.
#pragma once

#include "bufferqueue/topic/detail/basic_topic.hpp"
#include "bufferqueue/storage/memory/detail/memory_partition.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/options.hpp"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace bufferqueue {

/// Limits shared by every topic kind.
inline constexpr std::size_t max_partitions = 65536;

namespace detail {

inline void require_option(bool valid, std::string_view kind, const std::string& topic, std::string_view option,
                           const std::string& requirement)
{
    if (!valid) {
        throw error(errc::invalid_argument,
                    std::string(kind) + " topic '" + topic + "': option '" + std::string(option) + "' " + requirement);
    }
}

/// Validates `options` and builds the topic. Throws `bufferqueue::error` naming the option at fault.
template <class T>
std::shared_ptr<topic<T>> make_memory_topic(memory_topic_options<T> options, boost::asio::any_io_executor executor)
{
    constexpr std::string_view kind = "memory";
    require_option(!options.name.empty() && !only_whitespace(options.name), kind, options.name, "name",
                   "must not be empty or only whitespace");
    require_option(options.partitions >= 1 && options.partitions <= max_partitions, kind, options.name, "partitions",
                   "must be between 1 and " + std::to_string(max_partitions) + " (got " +
                       std::to_string(options.partitions) + ")");
    constexpr std::size_t max_segment_size = std::size_t{1} << 24;
    require_option(options.segment_size >= 1 && options.segment_size <= max_segment_size, kind, options.name,
                   "segment_size",
                   "must be between 1 and " + std::to_string(max_segment_size) + " items (got " +
                       std::to_string(options.segment_size) + ")");
    require_option(!options.bounded_capacity || *options.bounded_capacity >= 1, kind, options.name, "bounded_capacity",
                   "must be at least 1 when set (got 0)");
    require_option(options.full_mode == full_mode::wait || options.full_mode == full_mode::fail, kind, options.name,
                   "full_mode", "must be full_mode::wait or full_mode::fail");

    constexpr std::size_t max_producer_lanes = memory_partition<T>::max_lanes;
    require_option(options.producer_lanes <= max_producer_lanes, kind, options.name, "producer_lanes",
                   "must be 0 (automatic) or between 1 and " + std::to_string(max_producer_lanes) + " (got " +
                       std::to_string(options.producer_lanes) + ")");
    constexpr std::size_t automatic_lanes = 8;
    const std::size_t lanes = options.producer_lanes != 0                         ? options.producer_lanes
                              : !options.partition_key && options.partitions >= 2 ? automatic_lanes
                                                                                  : 1;

    using slot = partition_slot<memory_partition<T>>;
    std::vector<std::unique_ptr<slot>> slots;
    for (std::size_t partition = 0; partition < options.partitions; ++partition) {
        slots.push_back(std::make_unique<slot>(options.segment_size, options.bounded_capacity.has_value(), lanes));
    }
    using topic_type = basic_topic<T, memory_partition<T>>;
    typename topic_type::settings settings{std::move(options.name), std::move(options.partition_key),
                                           options.bounded_capacity, options.full_mode, std::move(executor)};
    settings.producer_lanes = lanes;
    return std::make_shared<topic_type>(std::move(settings), std::move(slots));
}

}  // namespace detail
}  // namespace bufferqueue
