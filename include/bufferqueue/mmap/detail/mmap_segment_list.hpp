// Internal: the retained segments of a persistent partition, shared by its writer (which adds a
// segment at each rollover and writes into the last one), its readers, retention (which releases
// the oldest ones) and close.
#pragma once

#include "bufferqueue/mmap/detail/mmap_segment_file.hpp"
#include "bufferqueue/mmap/detail/segment_format.hpp"

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <vector>

namespace bufferqueue::detail {

/// The retained segments, oldest first, behind a shared mutex: readers (`pull`, `normalize`,
/// `items_at`, retention's look-ups) hold it shared; only `append` (a rollover), `release_below`
/// (retention) and `close` take it exclusively. The bytes of a segment below the published end are
/// final; the writer writes the last segment's bytes past it without the lock. Lock order: the
/// partition's append and groups mutexes come before this one.
class mmap_segment_list {
public:
    /// Takes over `segments` (at least one; the first has index `first_index`). `files` must outlive
    /// the list. Never throws.
    mmap_segment_list(const mmap_partition_files& files, std::deque<std::unique_ptr<mmap_segment_file>> segments,
                      std::uint64_t first_index) noexcept
        : files_(files), segments_(std::move(segments)), first_index_(first_index)
    {
    }

    mmap_segment_list(const mmap_segment_list&) = delete;
    mmap_segment_list& operator=(const mmap_segment_list&) = delete;

    /// A shared lock for the calls below that need one. Blocks while a rollover, retention or close
    /// changes the list.
    std::shared_lock<std::shared_mutex> share() const { return std::shared_lock(mutex_); }

    /// The retained segment `index`. Caller holds `share()` (or is the writer, for the last segment).
    /// Throws `error(errc::corrupt_data)` naming the retained range when `index` is not retained.
    mmap_segment_file& at(std::uint64_t index) const;

    /// The index of the oldest retained segment. Caller holds `share()`.
    std::uint64_t first_index() const noexcept { return first_index_; }

    /// The newest segment. Only the writer (under the append mutex) and its constructor call it.
    mmap_segment_file& last() const noexcept { return *segments_.back(); }

    /// `offset` (a record boundary) normalized with `normalize_offset` (segment_format.hpp) against
    /// `log_end`; unchanged when its segment is not retained. Caller holds `share()`. Never throws.
    std::uint64_t normalize(std::uint64_t offset, std::uint64_t log_end) const noexcept;

    /// The item index of the record boundary `offset`: its segment's first item plus the records
    /// before it in that segment (a walk over them), or `std::nullopt` when its segment is not
    /// retained or `offset` is no record boundary. Takes `share()` itself. Never throws.
    std::optional<std::uint64_t> items_at(std::uint64_t offset) const noexcept;

    /// Adds a segment after the newest one (a rollover). Takes the lock exclusively. Returns the
    /// segment. Never throws (the deque's allocation aside).
    mmap_segment_file& append(std::unique_ptr<mmap_segment_file> segment);

    /// Removes the segments below `index` and returns them (retention unmaps and deletes them).
    /// Takes the lock exclusively.
    std::vector<std::unique_ptr<mmap_segment_file>> release_below(std::uint64_t index);

    /// Process-shared logs: replaces every retained segment by `segment` (whose index is where the
    /// list now starts), after another process's retention deleted the files of all of them. Returns
    /// the segments it replaced. Takes the lock exclusively.
    std::vector<std::unique_ptr<mmap_segment_file>> restart_at(std::unique_ptr<mmap_segment_file> segment);

    /// True once `close` ran. Thread-safe.
    bool closed() const noexcept { return closed_.load(std::memory_order_acquire); }

    /// Unmaps and closes every segment; `closed()` is true afterwards. Takes the lock exclusively.
    void close() noexcept;

private:
    const mmap_partition_files& files_;
    mutable std::shared_mutex mutex_;
    std::deque<std::unique_ptr<mmap_segment_file>> segments_;  // guarded by mutex_
    std::uint64_t first_index_ = 0;                            // guarded by mutex_
    std::atomic<bool> closed_{false};                          // written under mutex_
};

}  // namespace bufferqueue::detail
