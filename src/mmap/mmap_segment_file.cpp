#include "bufferqueue/mmap/detail/mmap_segment_file.hpp"

#include "bufferqueue/detail/message.hpp"

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
        unique_fd file = open_file(temporary, open_mode::create_or_truncate, files.access);
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

std::unique_ptr<mmap_segment_file> open_mmap_segment(const mmap_partition_files& files, std::uint64_t index,
                                                     map_access access)
{
    auto segment = std::make_unique<mmap_segment_file>();
    segment->index = index;
    segment->path = files.segment_path(index);
    segment->file =
        open_file(segment->path, access == map_access::read_only ? open_mode::read_only : open_mode::read_write);
    const std::uint64_t size = file_size(segment->file);
    if (size != files.segment_size) {
        files.corrupt(segment->path, detail::format_message("has {} bytes, but the topic's segment_size is {}", size,
                                                            files.segment_size));
    }
    segment->region = map_file(segment->file, static_cast<std::size_t>(size), access);
    check_segment_header(segment->region.bytes(), index, files.segment_size, segment->path);
    return segment;
}

}  // namespace bufferqueue::detail
