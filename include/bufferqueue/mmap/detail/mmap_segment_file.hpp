// Internal: one segment file of a persistent partition, where a partition's files are, and the
// atomic creation of a segment (see docs/mmap-storage.md, "Files").
#pragma once

#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/segment_format.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace bufferqueue::detail {

/// One open, mapped segment file of a persistent partition. Not thread-safe by itself: the segment
/// list (mmap_segment_list.hpp) says who may touch which field when.
struct mmap_segment_file {
    std::uint64_t index = 0;
    std::string path;
    unique_fd file;
    mapped_region region;
    std::uint64_t reserved_end = 0;  ///< bytes [0, reserved_end) have disk blocks; the writer's
    std::uint64_t first_item = 0;    ///< the item index of the segment's first record; fixed once created
};

/// Where a partition's files are and how its errors describe it. Immutable once built.
struct mmap_partition_files {
    std::string description;  ///< "topic 'events' partition 0", the prefix of every error
    std::string folder;       ///< the partition folder
    std::uint64_t segment_size = 0;
    file_access access = file_access::owner;  ///< who may read and change what the partition creates

    std::string producer_path() const { return folder + "/producer.offset"; }
    std::string earliest_path() const { return folder + "/earliest.offset"; }
    std::string earliest_items_path() const { return folder + "/earliest.items"; }
    std::string offsets_folder() const { return folder + "/offsets"; }
    std::string flush_mark_path() const { return folder + "/flush.mark"; }
    std::string segment_path(std::uint64_t index) const { return folder + "/" + segment_file_name(index); }
    std::string group_checkpoint_path(const std::string& escaped_group) const
    {
        return offsets_folder() + "/" + escaped_group + "/consumer.offset";
    }

    /// Throws `error(errc::corrupt_data)`: "{description}: {file}: {problem}".
    [[noreturn]] void corrupt(const std::string& file, const std::string& problem) const
    {
        throw error(errc::corrupt_data, format_message("{}: {}: {}", description, file, problem));
    }
};

/// Creates segment `index` atomically (a `.tmp` file with its header, fsynced and renamed, then the
/// folder fsynced; created for `files.access`), reserves its first `first_chunk` bytes and maps it; its first record
/// will be item `first_item`. Throws `error(errc::io_error)` (a `.tmp` leftover at most, removed at the next open).
std::unique_ptr<mmap_segment_file> create_mmap_segment(const mmap_partition_files& files, std::uint64_t index,
                                                       std::uint64_t first_chunk, std::uint64_t first_item);

/// Opens and maps the existing segment `index` (with `map_access::read_only`, PROT_READ) and checks
/// its size and header; `first_item` is left 0. Throws `error(errc::corrupt_data)` naming the file
/// for a wrong size or header, `error(errc::io_error)` when it cannot be opened or mapped.
std::unique_ptr<mmap_segment_file> open_mmap_segment(const mmap_partition_files& files, std::uint64_t index,
                                                     map_access access = map_access::read_write);

}  // namespace bufferqueue::detail
