// Internal: opening a persistent partition from what is on disk (see docs/mmap-storage.md,
// "Recovery"). Recovery runs in two steps so that a failed open changes no file, also across the
// partitions of a topic:
//
//   1. `recover_mmap_partition` reads and validates everything (segments, checkpoints, group
//      folders) and returns the recovered state together with the repairs it needs, without
//      changing any file. Any inconsistency throws `errc::corrupt_data` naming the file and offset.
//   2. `apply_mmap_recovery` performs the repairs (create a new partition's first segment, remove
//      `.tmp` leftovers and segments below earliest.offset, create the successor of a segment
//      filled to its very end, zero a torn tail). The topic calls it for each partition only once
//      every partition recovered.
//
// What recovery trusts as flushed: every segment that has a successor (a rollover flushes a segment
// before it creates the next one), everything before `producer.offset`, and everything before the
// offset in a valid `flush.mark` (segment_format.hpp; stored after every msync, never synced). A
// record that fails its checksum inside that range is corruption (`errc::corrupt_data` naming the
// file and byte); only damage after all of it is a torn tail, cut off.
#pragma once

#include "bufferqueue/storage/mmap/detail/file.hpp"
#include "bufferqueue/storage/mmap/detail/group_path.hpp"
#include "bufferqueue/storage/mmap/detail/segment_format.hpp"
#include "bufferqueue/error.hpp"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace bufferqueue::detail {

/// One open, mapped segment file of a persistent partition.
struct mmap_segment_file {
    std::uint64_t index = 0;
    std::string path;
    unique_fd file;
    mapped_region region;
    std::uint64_t reserved_end = 0;  ///< bytes [0, reserved_end) have disk blocks
};

/// Where a partition's files are and how its errors describe it.
struct mmap_partition_files {
    std::string description;  ///< "topic 'events' partition 0", the prefix of every error
    std::string folder;       ///< the partition folder
    std::uint64_t segment_size = 0;

    std::string producer_path() const { return folder + "/producer.offset"; }
    std::string earliest_path() const { return folder + "/earliest.offset"; }
    std::string offsets_folder() const { return folder + "/offsets"; }
    std::string flush_mark_path() const { return folder + "/flush.mark"; }
    std::string segment_path(std::uint64_t index) const { return folder + "/" + segment_file_name(index); }

    /// Throws `error(errc::corrupt_data)`: "{description}: {file}: {problem}".
    [[noreturn]] void corrupt(const std::string& file, const std::string& problem) const
    {
        throw error(errc::corrupt_data, description + ": " + file + ": " + problem);
    }
};

/// Creates segment `index` atomically (a `.tmp` file with its header, fsynced and renamed, then the
/// folder fsynced), reserves its first `first_chunk` bytes and maps it. Throws `error(errc::io_error)`.
std::unique_ptr<mmap_segment_file> create_mmap_segment(const mmap_partition_files& files, std::uint64_t index,
                                                       std::uint64_t first_chunk);

/// A partition as recovery found it, and the repairs `apply_mmap_recovery` makes. Move-only.
struct mmap_recovered_state {
    std::deque<std::unique_ptr<mmap_segment_file>> segments;  ///< the retained segments, oldest first
    std::uint64_t first_segment_index = 0;
    std::uint64_t earliest_offset = 0;
    std::uint64_t checkpointed_offset = 0;  ///< producer.offset, 0 when absent
    std::uint64_t tail_position = 0;        ///< where the next record goes in the last segment
    std::uint64_t flushed_position = 0;     ///< bytes of the last segment before it are known durable
    bool tail_ended = false;                ///< the last segment holds a segment-end marker
    std::map<std::string, std::uint64_t, std::less<>> group_offsets;  ///< every persisted group
    mapped_region flush_mark;  ///< `flush.mark`, mapped by step 2 (created when missing)

    // Repairs, all applied by apply_mmap_recovery.
    bool new_partition = false;                     ///< create segment 0 (and the folder)
    std::vector<std::uint64_t> leftovers;           ///< segments below earliest.offset to remove
    std::optional<std::uint64_t> create_successor;  ///< the segment to create after a full one
    std::uint64_t cut_from = 0;                     ///< zero the last segment's bytes [cut_from, cut_to)
    std::uint64_t cut_to = 0;
};

/// Step 1: reads and validates the partition in `files.folder` (a missing or empty folder is a new
/// partition) and returns its state. Changes no file: `.tmp` leftovers are ignored here and removed
/// by step 2. Throws `error(errc::corrupt_data)` naming the file and offset of an inconsistency,
/// `error(errc::io_error)` when a file cannot be read or mapped.
mmap_recovered_state recover_mmap_partition(const mmap_partition_files& files);

/// Step 2: applies the repairs `state` lists. Throws `error(errc::io_error)`; a failure part way
/// leaves repairs that the next open makes again (each is idempotent).
void apply_mmap_recovery(const mmap_partition_files& files, mmap_recovered_state& state, std::uint64_t first_chunk);

}  // namespace bufferqueue::detail
