// Internal: the process-shared side of a partition's appends - the partition's append lock and its
// slot in the shared header (shared_log_slot.hpp), through which the writers of several processes
// append to one log, and the wake-up of the other processes' watchers (see docs/mmap-storage.md,
// "Process-shared topics").
#pragma once

#include "bufferqueue/mmap/detail/checkpoint_format.hpp"
#include "bufferqueue/mmap/detail/mmap_segment_file.hpp"
#include "bufferqueue/mmap/detail/process_shared_sync.hpp"
#include "bufferqueue/mmap/detail/shared_log_slot.hpp"

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace bufferqueue::detail {

/// A partition's part of a process-shared topic's shared header.
struct shared_log_link {
    process_shared_mutex lock;  ///< the partition's append lock
    shared_log_slot slot;       ///< the partition's shared log state, guarded by `lock`
    process_shared_event wake;  ///< notified after this writer published records
    std::string header_path;    ///< the shared header's path, for errors about what the slot holds
};

/// Shares a partition's log with the writers of other processes: takes and releases the partition's
/// append lock (checking the slot, and repairing what a writer that died holding it left), stores
/// this writer's tail into the slot, remembers what the slot published and where the retained log
/// starts, and wakes the other processes' watchers when a release published records or moved the
/// retained start. Inert (`active()` false, every call a no-op) until `attach`.
///
/// Thread-safety: part of `mmap_log_writer`; every member is called holding the writer's mutex
/// unless its comment says otherwise (the mutex guards every field but the atomics). Allocation:
/// none after `attach`, but for errors. Completion: every call is synchronous; `lock` blocks on
/// the process-shared mutex (bounded by `process_shared_mutex::max_wait`). Errors: as each member says.
class shared_append {
public:
    /// `files` must outlive this. Never throws.
    explicit shared_append(const mmap_partition_files& files) noexcept : files_(files) {}

    shared_append(const shared_append&) = delete;
    shared_append& operator=(const shared_append&) = delete;

    /// Shares the log through `link`. Call once, before any other call, without the writer's mutex
    /// (nothing else runs yet). Never throws.
    void attach(shared_log_link link) noexcept { link_.emplace(std::move(link)); }

    /// Whether `attach` was called. Never throws.
    bool active() const noexcept { return link_.has_value(); }

    /// The slot, for a group-commit leader's cross-process flush (read without the writer's mutex:
    /// the view never changes after `attach`). Only when `active()`.
    const shared_log_slot& slot() const noexcept { return link_->slot; }

    /// The first process to open the topic: writes the slot from this writer's state `mine` and the
    /// recovered `retained_from` under the append lock (the header, with its lock, was made anew),
    /// remembering `published_end` as published. Throws what taking the lock throws (`io_error`,
    /// `timed_out`).
    void initialize(const shared_log_state& mine, log_position retained_from, std::uint64_t published_end);

    /// The slot's state, checked (check_shared_log_state), under the append lock. Throws `corrupt_data`.
    shared_log_state load_checked() const;

    /// Takes the append lock, checks the slot's state (check_shared_log_state), repairs what a holder
    /// that died holding the lock left (repair_shared_tail), and returns the state as loaded, to adopt.
    /// Throws `io_error`, `timed_out` (another process held it for `process_shared_mutex::max_wait`),
    /// `corrupt_data`; then the lock is not held.
    shared_log_state lock();

    /// Lets go of the append lock after `lock` without storing anything (adopting what it returned
    /// failed). Never throws.
    void abandon() noexcept { link_->lock.unlock(); }

    /// Lets go of the append lock (after `store`); when this process published past what the slot
    /// had published at the last release (`published_end`, this writer's) and a consumer of some
    /// process waits, or `store_retained_from` moved the retained start, wakes the watchers of
    /// every process. Never throws.
    void unlock(std::uint64_t published_end) noexcept;

    /// Stores this writer's tail (`mine`; its pending end is where the record being written ends,
    /// what a writer that dies now may leave torn) into the slot, under the append lock. The slot's
    /// flushed and published ends only ever grow. Never throws.
    void store(const shared_log_state& mine) noexcept;

    /// The slot's published end when this writer adopted its state: a release publishes only past it.
    void adopted(std::uint64_t published_end) noexcept;

    /// A record was written: a leader of another process gathering records for its msync re-checks.
    /// Never throws.
    void notify_gathering_leader() const noexcept;

    /// A consumer of this process found nothing to read and may wait (`published_end`: this writer's).
    /// Marks the slot, so that the next append of any process that publishes wakes the watchers, and
    /// wakes this process's watcher itself when another process published more already. Lock-free;
    /// never throws. Inert: nothing.
    void note_consumer_waiting(std::uint64_t published_end) const noexcept;

    /// Whether another process published past `published_end` or retained past where this writer
    /// last saw the retained log start. Lock-free; never throws. Inert: false.
    bool moved_on(std::uint64_t published_end) const noexcept;

    /// Where the retained log starts, as the slot says (under the append lock). Inert: the start.
    log_position retained_from() const noexcept;

    /// Stores where the retained log starts after this process's retention released segments, under
    /// the append lock (the release wakes the other processes' watchers to drop them). Never throws.
    void store_retained_from(log_position start) noexcept;

    /// Records that this writer follows the retained log from `start` (its mappings below were dropped).
    void follow_retained_from(log_position start) noexcept;

    /// The retained-from offset and item index when this writer last followed it (0 when inert).
    /// Lock-free (acquire).
    std::uint64_t retained_offset() const noexcept { return retained_offset_.load(std::memory_order_acquire); }
    std::uint64_t retained_items() const noexcept { return retained_items_.load(std::memory_order_acquire); }

private:
    const mmap_partition_files& files_;
    std::optional<shared_log_link> link_;            // set by attach() before any other call
    std::uint64_t shared_published_ = 0;             // the slot's published end when last adopted; writer's mutex
    std::atomic<std::uint64_t> retained_items_{0};   // the slot's retained-from position when last
    std::atomic<std::uint64_t> retained_offset_{0};  // followed; both written under the writer's mutex
    bool retained_moved_ = false;  // store_retained_from raised it: unlock wakes the watchers; writer's mutex
};

/// The repair after a writer died holding a partition's shared append lock (the next holder calls it,
/// still holding the lock): zeroes the bytes between the slot's tail position and its pending end
/// in the tail segment, removes a successor file the slot does not name, and stores the repaired
/// slot. Throws `io_error`, `corrupt_data` (the slot holds a state no writer stores, naming
/// `header_path`, check_shared_log_state, and changes nothing; the tail segment is missing or damaged).
void repair_shared_tail(const mmap_partition_files& files, shared_log_slot slot, std::string_view header_path);

}  // namespace bufferqueue::detail
