// The check of a partition's shared log state (shared_log_slot.hpp) before a process uses what
// another process stored there: the positions it holds index the mapped segments.
#include "bufferqueue/mmap/detail/shared_log_slot.hpp"

#include "bufferqueue/error.hpp"
#include "bufferqueue/mmap/detail/segment_format.hpp"

#include "bufferqueue/detail/message.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace bufferqueue::detail {

void check_shared_log_state(const shared_log_state& state, log_position retained_from, std::uint64_t segment_size,
                            std::string_view partition, std::string_view header_path)
{
    const auto corrupt = [&](std::string_view field, std::uint64_t value, const std::string& bound) {
        return error(errc::corrupt_data,
                     detail::format_message("{}: {}: the shared log state's {} is {}, {} (the shared header is "
                                            "damaged, or another process wrote it)",
                                            partition, header_path, field, value, bound));
    };
    // Every logical offset of the tail's segment, up to its end, fits in 64 bits.
    const std::uint64_t max_segment = std::numeric_limits<std::uint64_t>::max() / segment_size - 1;
    if (state.tail_segment > max_segment) {
        throw corrupt("tail segment index", state.tail_segment,
                      detail::format_message("above {}, the last a log of {}-byte segments can reach", max_segment,
                                             segment_size));
    }
    if (state.tail_ended > 1) {
        throw corrupt("segment-end flag", state.tail_ended, "neither 0 nor 1");
    }
    // Unless the tail holds a segment-end marker, the next append may write one at the tail position.
    const std::uint64_t last_position = state.tail_ended != 0 ? segment_size : segment_size - record_header_size;
    if (state.tail_position < segment_header_size || state.tail_position > last_position ||
        state.tail_position % record_alignment != 0) {
        throw corrupt("tail position", state.tail_position,
                      detail::format_message("not a multiple of {} between {} and {} in a {}-byte segment",
                                             record_alignment, segment_header_size, last_position, segment_size));
    }
    if (state.pending_end < state.tail_position || state.pending_end > segment_size) {
        throw corrupt("pending end", state.pending_end,
                      detail::format_message("not between the tail position {} and the segment's end {}",
                                             state.tail_position, segment_size));
    }
    if (state.tail_first_item > state.items) {
        throw corrupt("tail segment's first item", state.tail_first_item,
                      detail::format_message("above the {} records appended", state.items));
    }
    const std::uint64_t tail_end = logical_offset(state.tail_segment, state.tail_position, segment_size);
    const std::uint64_t segment_end = logical_offset(state.tail_segment + 1, 0, segment_size);
    const struct {
        std::string_view field;
        std::uint64_t offset;
        std::uint64_t end;
        std::string_view end_name;
        std::string_view items_field;
        std::uint64_t items;
    } ends[] = {
        {"flushed end", state.flushed_end, segment_end, "the end of the tail segment", "records before the flushed end",
         state.flushed_items},
        {"published end", state.published_end, tail_end, "the tail position", "records before the published end",
         state.published_items},
        {"retained-from offset", retained_from.offset, tail_end, "the tail position", "retained-from item index",
         retained_from.items},
    };
    for (const auto& end : ends) {
        if (end.offset > end.end) {
            throw corrupt(end.field, end.offset,
                          detail::format_message("past {} (logical offset {})", end.end_name, end.end));
        }
        if (end.items > state.items) {
            throw corrupt(end.items_field, end.items,
                          detail::format_message("above the {} records appended", state.items));
        }
    }
}

}  // namespace bufferqueue::detail
