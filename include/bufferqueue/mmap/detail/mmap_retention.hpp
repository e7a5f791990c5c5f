// Internal: a persistent partition's retention - releasing segments every known group has
// committed past (`apply_mmap_retention`) - and its file deletions, kept apart from the commit they
// follow (`retention_backlog`).
//
// Retention deletes a segment file only after earliest.offset has moved past it, so a file that
// could not be deleted is harmless to readers (it is below earliest.offset, and the next open
// removes it) - but a commit whose checkpoint is already stored must not report a failure
// because of it, or the caller would believe that nothing was committed. This backlog keeps the
// files retention released but could not delete, and retries them at every later retention run.
#pragma once

#include "bufferqueue/mmap/detail/checkpoint_format.hpp"
#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/mmap_segment_list.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace bufferqueue::detail {

/// Segment files released by retention and not deleted yet. Not thread-safe: the partition uses
/// it under its groups mutex.
class retention_backlog {
public:
    /// Queues `path` for deletion. Allocates.
    void add(std::string path) { pending_.push_back(std::move(path)); }

    /// Tries to delete every queued file, then fsyncs `folder` when one was deleted. Files that
    /// cannot be deleted stay queued for the next call. Returns true when nothing is left queued.
    /// Never throws (a failed directory fsync only means a deletion may be lost in a power
    /// failure; the file is then below earliest.offset, and the next open removes it).
    bool remove_pending(const std::string& folder) noexcept
    {
        bool removed_any = false;
        std::vector<std::string> kept;
        for (std::string& path : pending_) {
            try {
                remove_file(path);
                removed_any = true;
            } catch (...) {
                try {
                    kept.push_back(std::move(path));
                } catch (...) {
                    // Out of memory: the next open removes the file.
                }
            }
        }
        pending_ = std::move(kept);
        if (removed_any) {
            try {
                fsync_directory(folder);
            } catch (...) {
                // See above.
            }
        }
        return pending_.empty();
    }

    /// The number of files waiting for deletion.
    std::size_t pending() const noexcept { return pending_.size(); }

private:
    std::vector<std::string> pending_;
};

/// What retention works on: the partition's groups and earliest position, all guarded by the
/// checkpoint store's groups mutex, which the caller holds.
struct mmap_retention_scope {
    const mmap_partition_files& files;
    mmap_segment_list& segments;
    std::map<std::string, log_position, std::less<>>& groups;
    log_position& earliest;
    retention_backlog& deletions;
    /// False for process-shared topics: a group's checkpoint is written only by the process whose
    /// consumer reads the partition, so retention never moves one; a checkpoint at a segment-end
    /// marker then keeps its segment until the group commits past it.
    bool move_markers = true;
    /// Called with the new earliest position before it is written to disk (process-shared topics
    /// store it in the shared header first: a process killed between the two then leaves other
    /// processes starting new groups at or above earliest.offset, never below). May be empty.
    std::function<void(log_position)> before_persist{};
};

/// Releases the segments every known group has committed past, keeping the newest `keep` of them;
/// `log_end` is the published end of the log. A checkpoint at a segment-end marker (a group that
/// read a segment to its end before the writer ended it) has committed past that segment, unless
/// `scope.move_markers` is false. Order:
/// the commit already flushed and persisted its checkpoint; then checkpoints at the end of a segment
/// about to go move to the equivalent first offset of the next segment (a checkpoint below
/// earliest.offset is corrupt); then earliest.items and earliest.offset advance; then the segments
/// are unmapped and queued in `deletions` (the caller runs them). Leftovers of an interrupted
/// deletion are below earliest.offset and are removed at the next open. Throws `io_error` part way;
/// what was done stands, and the next run starts over.
void apply_mmap_retention(const mmap_retention_scope& scope, std::size_t keep, std::uint64_t log_end);

}  // namespace bufferqueue::detail
