#include "bufferqueue/storage/mmap/detail/mmap_segment_file.hpp"

#include <algorithm>

namespace bufferqueue::detail {

std::unique_ptr<mmap_segment_file> create_mmap_segment(const mmap_partition_files& files, std::uint64_t index,
                                                       std::uint64_t first_chunk, std::uint64_t first_item)
{
    auto segment = std::make_unique<mmap_segment_file>();
    segment->index = index;
    segment->first_item = first_item;
    segment->path = files.segment_path(index);
    const std::string temporary = segment->path + std::string(temporary_suffix);
    try {
        unique_fd file = open_file(temporary, open_mode::create_or_truncate);
        truncate_file(file, files.segment_size);
        const std::uint64_t reserved = std::min(files.segment_size, first_chunk);
        preallocate(file, 0, reserved);
        const auto header = make_segment_header(index, files.segment_size);
        write_at(file, 0, header);
        fsync_file(file);
        rename_file(temporary, segment->path);
        // From here on the file has its final name: errors (and flush reports) must name it.
        file = unique_fd(file.release(), segment->path);
        fsync_directory(files.folder);
        segment->reserved_end = reserved;
        segment->region = map_file(file, static_cast<std::size_t>(files.segment_size));
        segment->file = std::move(file);
    } catch (...) {
        try {
            remove_file(temporary);
        } catch (...) {
            // The next open removes leftover temporary files.
        }
        throw;
    }
    return segment;
}

}  // namespace bufferqueue::detail
