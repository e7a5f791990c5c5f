// Step 2 of recovery (mmap_recovery.hpp): the repairs step 1 listed.
#include "bufferqueue/mmap/detail/mmap_recovery.hpp"

#include <cstring>
#include <span>

namespace bufferqueue::detail {
namespace {

// Opens flush.mark, creating it (with its blocks reserved, so storing into it never faults on a
// full disk) when missing or of the wrong size, and maps it. Best effort: without it (say, on a
// full disk) the partition works as before, with only producer.offset vouching for flushed data.
mapped_region map_flush_mark(const mmap_partition_files& files) noexcept
{
    try {
        unique_fd file = open_file(files.flush_mark_path(), open_mode::create_or_open, files.access);
        if (file_size(file) != flush_mark_size) {
            truncate_file(file, flush_mark_size);
        }
        preallocate(file, 0, flush_mark_size);
        return map_file(file, flush_mark_size);
    } catch (...) {
        return {};
    }
}

}  // namespace

void apply_mmap_recovery(const mmap_partition_files& files, mmap_recovered_state& state, std::uint64_t first_chunk,
                         recovery_repairs repairs)
{
    if (repairs == recovery_repairs::none) {
        if (state.new_partition) {
            files.corrupt(files.folder, "has no segment, but other processes have the topic open");
        }
        state.flush_mark = map_flush_mark(files);
        state.leftovers.clear();
        state.create_successor.reset();
        state.cut_to = state.cut_from;
        return;
    }
    make_directories(files.folder, files.access);
    if (state.new_partition) {
        remove_file(files.flush_mark_path());  // a mark left without segments says nothing any more
    }
    state.flush_mark = map_flush_mark(files);
    remove_temporary_files(files.folder);
    const std::string offsets = files.offsets_folder();
    remove_temporary_files(offsets);
    if (path_exists(offsets)) {
        for (const directory_entry& entry : list_directory(offsets)) {
            if (entry.kind == entry_kind::directory) {
                remove_temporary_files(offsets + "/" + entry.name);  // consumer.offset.tmp
            }
        }
    }
    if (state.new_partition) {
        state.segments.push_back(create_mmap_segment(files, 0, first_chunk, 0));
        state.first_segment_index = 0;
        state.new_partition = false;
        return;
    }
    for (const std::uint64_t index : state.leftovers) {
        remove_file(files.segment_path(index));
    }
    if (!state.leftovers.empty()) {
        fsync_directory(files.folder);
        state.leftovers.clear();
    }
    if (state.create_successor) {
        state.segments.push_back(
            create_mmap_segment(files, *state.create_successor, first_chunk, state.tail.end_items));
        state.create_successor.reset();
        return;
    }
    mmap_segment_file& tail = *state.segments.back();
    tail.reserved_end = state.tail.tail_position;  // blocks behind the data exist; reserve from here on
    if (state.cut_to > state.cut_from) {
        const std::span<std::byte> bytes = tail.region.bytes();
        std::memset(bytes.data() + state.cut_from, 0, state.cut_to - state.cut_from);
        tail.region.flush(state.cut_from, state.cut_to - state.cut_from);
        state.cut_to = state.cut_from;
    }
}

}  // namespace bufferqueue::detail
