// Internal: the file deletions of a persistent partition's retention, kept apart from the commit
// they follow.
//
// Retention deletes a segment file only after earliest.offset has moved past it, so a file that
// could not be deleted is harmless to readers (it is below earliest.offset, and the next open
// removes it) - but a commit whose checkpoint is already stored must not report a failure
// because of it, or the caller would believe that nothing was committed. This backlog keeps the
// files retention released but could not delete, and retries them at every later retention run.
#pragma once

#include "bufferqueue/storage/mmap/detail/file.hpp"

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

}  // namespace bufferqueue::detail
