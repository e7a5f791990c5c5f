#include "bufferqueue/mmap/detail/mmap_retention.hpp"

#include "bufferqueue/mmap/detail/group_path.hpp"

#include <algorithm>
#include <memory>

namespace bufferqueue::detail {

void apply_mmap_retention(const mmap_retention_scope& scope, std::size_t keep, std::uint64_t log_end)
{
    if (scope.groups.empty()) {
        return;
    }
    const std::uint64_t segment_size = scope.files.segment_size;
    std::uint64_t minimum = max_checkpoint_value;
    std::uint64_t first_index = 0;
    {
        const auto lock = scope.segments.share();
        for (const auto& [group, position] : scope.groups) {
            minimum = std::min(minimum, scope.move_markers ? scope.segments.normalize(position.offset, log_end)
                                                           : position.offset);
        }
        first_index = scope.segments.first_index();
    }
    const std::uint64_t fully_consumed_below = split_offset(minimum, segment_size).segment_index;
    if (fully_consumed_below <= first_index + keep) {
        return;
    }
    const std::uint64_t delete_below = fully_consumed_below - keep;
    log_position earliest{first_record_offset(delete_below, segment_size), 0};
    {
        const auto lock = scope.segments.share();
        earliest.items = scope.segments.at(delete_below).first_item;
    }
    for (auto& [group, position] : scope.groups) {
        if (position.offset < earliest.offset) {
            std::uint64_t moved = position.offset;
            {
                const auto lock = scope.segments.share();
                moved = scope.segments.normalize(position.offset, log_end);
            }
            write_checkpoint(scope.files.group_checkpoint_path(escape_group_name(group)), moved, scope.files.access);
            position.offset = moved;  // the items stay: a marker holds no record
        }
    }
    if (scope.before_persist) {
        scope.before_persist(earliest);
    }
    // earliest.items first: recovery counts back from one that is ahead of earliest.offset.
    write_item_position(scope.files.earliest_items_path(), earliest, scope.files.access);
    write_checkpoint(scope.files.earliest_path(), earliest.offset, scope.files.access);
    scope.earliest = earliest;
    for (const std::unique_ptr<mmap_segment_file>& segment : scope.segments.release_below(delete_below)) {
        segment->region.unmap();
        segment->file = unique_fd();
        scope.deletions.add(std::move(segment->path));
    }
}

}  // namespace bufferqueue::detail
