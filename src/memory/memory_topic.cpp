// The item-type-free option checks of memory topics (memory/memory_topic.hpp), compiled once.
#include "bufferqueue/memory/memory_topic.hpp"

#include "bufferqueue/detail/message.hpp"

#include <string_view>

namespace bufferqueue::detail {

std::size_t checked_memory_lanes(const std::string& name, std::size_t partitions, std::size_t segment_size,
                                 std::optional<std::size_t> bounded_capacity, bufferqueue::full_mode full_mode,
                                 std::size_t producer_lanes, bool keyed)
{
    constexpr std::string_view kind = "memory";
    require_topic_name(kind, name);
    require_partition_count(kind, name, partitions);
    constexpr std::size_t max_segment_size = std::size_t{1} << 24;
    if (segment_size < 1 || segment_size > max_segment_size) {
        require_option(false, kind, name, "segment_size",
                       format_message("must be between 1 and {} items (got {})", max_segment_size, segment_size));
    }
    require_bounds(kind, name, bounded_capacity, full_mode);

    // memory_partition<T>::max_lanes, whatever T.
    constexpr std::size_t max_producer_lanes = memory_partition<char>::max_lanes;
    if (producer_lanes > max_producer_lanes) {
        require_option(
            false, kind, name, "producer_lanes",
            format_message("must be 0 (automatic) or between 1 and {} (got {})", max_producer_lanes, producer_lanes));
    }
    constexpr std::size_t automatic_lanes = 8;
    return producer_lanes != 0 ? producer_lanes : !keyed && partitions >= 2 ? automatic_lanes : 1;
}

}  // namespace bufferqueue::detail
