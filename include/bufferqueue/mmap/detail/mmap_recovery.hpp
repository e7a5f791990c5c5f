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
//
// Item counts: recovery walks every retained record anyway (the vouched range from earliest.offset,
// then the tail), so it counts them on the way at no extra cost: each segment's first item index,
// the partition's end, each group's position. The index of the earliest retained record comes from
// `earliest.items` (checkpoint_format.hpp), which retention writes before it moves earliest.offset;
// without it (a new partition, or one written by an earlier release) counting starts at 0 there.
#pragma once

#include "bufferqueue/mmap/detail/checkpoint_format.hpp"
#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/mmap_segment_file.hpp"

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

/// The writer's part of a recovered partition: where the log ends and what is known durable.
struct mmap_recovered_tail {
    std::uint64_t checkpointed_offset = 0;  ///< producer.offset, 0 when absent
    std::uint64_t tail_position = 0;        ///< where the next record goes in the last segment
    std::uint64_t flushed_position = 0;     ///< bytes of the last segment before it are known durable
    bool tail_ended = false;                ///< the last segment holds a segment-end marker
    std::uint64_t end_items = 0;            ///< records ever appended (the next record's item index)
};

/// A partition as recovery found it, and the repairs `apply_mmap_recovery` makes. Move-only.
struct mmap_recovered_state {
    std::deque<std::unique_ptr<mmap_segment_file>> segments;  ///< the retained segments, oldest first
    std::uint64_t first_segment_index = 0;
    log_position earliest;  ///< earliest.offset and the item index of the record there
    mmap_recovered_tail tail;
    std::map<std::string, log_position, std::less<>> groups;  ///< every persisted group's position
    mapped_region flush_mark;                                 ///< `flush.mark`, mapped by step 2 (created when missing)

    // Repairs, all applied by apply_mmap_recovery.
    bool new_partition = false;                     ///< create segment 0 (and the folder)
    std::vector<std::uint64_t> leftovers;           ///< segments below earliest.offset to remove
    std::optional<std::uint64_t> create_successor;  ///< the segment to create after a full one
    std::uint64_t cut_from = 0;                     ///< zero the last segment's bytes [cut_from, cut_to)
    std::uint64_t cut_to = 0;
};

/// Step 1: reads and validates the partition in `files.folder` (a missing or empty folder is a new
/// partition) and returns its state. Changes no file: `.tmp` leftovers are ignored here and removed
/// by step 2. With `map_access::read_only` (bufferqueue-inspect) the segments are opened read-only
/// and mapped PROT_READ, so a read-only copy or mount can be checked; such a state must not be given
/// to step 2 or to a writer. Throws `error(errc::corrupt_data)` naming the file and offset of an
/// inconsistency, `error(errc::io_error)` when a file cannot be read or mapped.
mmap_recovered_state recover_mmap_partition(const mmap_partition_files& files,
                                            map_access access = map_access::read_write);

/// Which repairs step 2 makes: all of them, or (`none`: other processes have the folder of a
/// process-shared topic open and write to it) only mapping flush.mark; the open writers' state in
/// the shared header says where the log ends.
enum class recovery_repairs { all, none };

/// Step 2: applies the repairs `state` lists. Throws `error(errc::io_error)`; a failure part way
/// leaves repairs that the next open makes again (each is idempotent).
void apply_mmap_recovery(const mmap_partition_files& files, mmap_recovered_state& state, std::uint64_t first_chunk,
                         recovery_repairs repairs = recovery_repairs::all);

}  // namespace bufferqueue::detail
