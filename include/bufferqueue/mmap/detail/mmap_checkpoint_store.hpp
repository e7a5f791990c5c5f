// Internal: the consumer groups of a persistent partition - their cursors, committed positions and
// checkpoint files - and the retention their commits drive (see docs/mmap-storage.md, "Consumer
// groups" and "Retention").
#pragma once

#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/group_path.hpp"
#include "bufferqueue/mmap/detail/mmap_group_folder.hpp"
#include "bufferqueue/mmap/detail/mmap_log_reader.hpp"
#include "bufferqueue/mmap/detail/mmap_retention.hpp"
#include "bufferqueue/mmap/detail/mmap_segment_list.hpp"
#include "bufferqueue/storage/storage.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bufferqueue::detail {

/// Every persisted group's position (offset and item index), the open cursors, and earliest.offset.
/// Group checkpoints (creation, commit, retention's rewrites) are written under the groups mutex,
/// which also serializes retention. Lock order: the writer's mutex, then this one, then the
/// segment list's. `Cursor` derives from `mmap_group_progress`.
template <class Cursor>
class mmap_checkpoint_store {
public:
    /// Takes over the recovered `groups` and `earliest` position. `files` and `segments` must
    /// outlive the store; `keep` is the topic's `max_retained_consumed_segments`. Never throws.
    mmap_checkpoint_store(const mmap_partition_files& files, mmap_segment_list& segments,
                          std::map<std::string, log_position, std::less<>> groups, log_position earliest,
                          std::optional<std::size_t> keep) noexcept
        : files_(files), segments_(segments), keep_(keep), groups_(std::move(groups)), earliest_(earliest),
          earliest_items_(earliest.items)
    {
    }

    mmap_checkpoint_store(const mmap_checkpoint_store&) = delete;
    mmap_checkpoint_store& operator=(const mmap_checkpoint_store&) = delete;

    /// The groups mutex, for the partition's close.
    std::unique_lock<std::mutex> lock() { return std::unique_lock(mutex_); }

    /// The group's cursor: the open one (a group opened again resumes from its committed offset),
    /// or a new one at the group's persisted position; a group never seen starts at earliest.offset
    /// and appears with its first checkpoint, so it holds retention before its first pull. Throws
    /// `closed`, `io_error`. Thread-safe; allocates.
    ///
    /// With `retained_from` (process-shared topics: where the slot says the log starts; the caller
    /// holds the partition's shared append lock) a group this partition does not know yet is looked
    /// for on disk first, as another process may have made it since this one opened, and a new group
    /// starts where the log is retained now (another process's retention may have moved it).
    Cursor& open_cursor(std::string_view group, std::optional<log_position> retained_from = std::nullopt)
    {
        const std::lock_guard lock(mutex_);
        require_open();
        if (retained_from) {
            adopt_retained_from(*retained_from);
            if (!groups_.contains(group)) {
                if (const auto stored = read_checkpoint(files_.group_checkpoint_path(escape_group_name(group)))) {
                    groups_.emplace(std::string(group), position_of(*stored));
                }
            }
        }
        const auto reopened =
            std::find_if(cursors_.begin(), cursors_.end(), [&](const Cursor& each) { return each.group == group; });
        if (reopened != cursors_.end()) {
            return *reopened;
        }
        const std::string escaped = escape_group_name(group);
        log_position start = earliest_;
        if (const auto known = groups_.find(group); known != groups_.end()) {
            start = known->second;
        } else {
            create_group_folder(files_.offsets_folder(), escaped, start.offset, files_.access);
            groups_.emplace(std::string(group), start);
        }
        Cursor& opened = cursors_.emplace_back();
        opened.group = std::string(group);
        opened.checkpoint_path = files_.group_checkpoint_path(escaped);
        opened.committed_items.store(start.items, std::memory_order_release);
        opened.committed.store(start.offset, std::memory_order_release);
        return opened;
    }

    /// Persists `next_offset` as the group's checkpoint (the caller flushed the log up to it), then
    /// runs retention, which never makes the commit fail. Throws `closed`, `io_error`. Thread-safe.
    void commit(Cursor& reader, std::uint64_t next_offset, std::uint64_t log_end)
    {
        // Under the groups mutex: retention may rewrite a group's checkpoint, and must not race
        // with the group's own commit.
        const std::lock_guard lock(mutex_);
        require_open();
        const std::uint64_t items = item_index(reader, next_offset);
        write_checkpoint(reader.checkpoint_path, next_offset, files_.access);
        reader.committed_items.store(items, std::memory_order_release);
        reader.committed.store(next_offset, std::memory_order_release);
        groups_[reader.group] = {next_offset, items};
        retain(log_end);  // the commit stands from here on, whatever retention meets
    }

    /// Process-shared topics: reads the group's checkpoint from disk again (another process may have
    /// committed since) and moves its open cursor there, when the partition is about to be given to
    /// a consumer of this process (nobody here reads it then). Changes nothing when the group has no
    /// checkpoint or it cannot be read. Never throws. Thread-safe.
    void reload_group(std::string_view group) noexcept
    {
        try {
            const std::lock_guard lock(mutex_);
            if (segments_.closed()) {
                return;
            }
            const auto stored = read_checkpoint(files_.group_checkpoint_path(escape_group_name(group)));
            if (!stored) {
                return;
            }
            const log_position position = position_of(*stored);
            groups_[std::string(group)] = position;
            for (Cursor& each : cursors_) {
                if (each.group == group) {
                    each.pulled_end.reset();
                    each.undecodable.reset();
                    each.idle_until.store(0, std::memory_order_relaxed);
                    each.committed_items.store(position.items, std::memory_order_release);
                    each.committed.store(position.offset, std::memory_order_release);
                }
            }
        } catch (...) {
            // The cursor stays where this process last saw the group: at-least-once still holds.
        }
    }

    /// True when the partition holds a checkpoint for `group`. Thread-safe.
    bool has_group(std::string_view group) const
    {
        const std::lock_guard lock(mutex_);
        return groups_.contains(group);
    }

    /// Process-shared topics: other processes create groups and commit, so from now on
    /// `stored_groups` reads the groups' checkpoints from disk, and retention runs only through
    /// `retain_shared`. Call before the topic is built.
    void share() noexcept { shared_ = true; }

    /// True when the topic deletes consumed segments (`max_retained_consumed_segments` is set).
    bool retains() const noexcept { return keep_.has_value(); }

    /// Where the retained log starts. Thread-safe.
    log_position earliest() const
    {
        const std::lock_guard lock(mutex_);
        return earliest_;
    }

    /// Retention of a process-shared topic; the caller holds the partition's shared append lock
    /// (with the writer's mutex) and passes where the slot says the log starts. Reads every group's
    /// checkpoint from disk (other processes' groups and commits count), then releases the segments
    /// all of them committed past (`move_markers` off: no other process's checkpoint is written).
    /// `announce(start)` stores where the log starts now in the slot, before earliest.offset is
    /// written. The released files are deleted by `remove_released`, after the append lock is let
    /// go. Never throws (a failure counts in `maintenance_failures` and is retried at the next run).
    /// Thread-safe.
    void retain_shared(log_position retained_from, std::uint64_t log_end,
                       const std::function<void(log_position)>& announce) noexcept
    {
        const std::lock_guard lock(mutex_);
        if (!keep_ || segments_.closed()) {
            return;
        }
        try {
            adopt_retained_from(retained_from);
            reload_groups();
            apply_mmap_retention({files_, segments_, groups_, earliest_, deletions_, false, announce}, *keep_, log_end);
        } catch (...) {
            maintenance_failures_.fetch_add(1, std::memory_order_relaxed);
        }
        earliest_items_.store(earliest_.items, std::memory_order_release);
    }

    /// Deletes the segment files retention released (see `retain_shared`). Never throws.
    /// Thread-safe.
    void remove_released() noexcept
    {
        const std::lock_guard lock(mutex_);
        if (!deletions_.remove_pending(files_.folder)) {
            maintenance_failures_.fetch_add(1, std::memory_order_relaxed);  // a file is left for the next run
        }
    }

    /// Every group the partition holds a checkpoint for (found on disk or created since), with its
    /// committed position in items; after `share()`, as stored on disk now by any process (a group
    /// or checkpoint that cannot be read is given as this process last saw it). Thread-safe (the
    /// groups lock); allocates; throws only `std::bad_alloc`.
    std::vector<stored_group> stored_groups() const
    {
        std::vector<stored_group> listed;
        const std::lock_guard lock(mutex_);
        if (shared_) {
            list_groups_on_disk(listed);
            return listed;
        }
        listed.reserve(groups_.size());
        for (const auto& [name, position] : groups_) {
            listed.push_back({name, position.items});
        }
        return listed;
    }

    /// Deletes the group's folder atomically (mmap_group_folder.hpp) and its cursor, then applies
    /// retention. Throws `closed`, `io_error`. Thread-safe.
    void remove_group(std::string_view group, std::uint64_t log_end)
    {
        const std::lock_guard lock(mutex_);
        require_open();
        if (const auto known = groups_.find(group); known != groups_.end()) {
            remove_group_folder(files_.offsets_folder(), escape_group_name(group));
            groups_.erase(known);
            cursors_.remove_if([group](const Cursor& each) { return each.group == group; });
            retain(log_end);  // the removal stands from here on, whatever retention meets
        }
    }

    /// Runs retention for the groups found on disk. Never throws. Thread-safe.
    void retain_at_open(std::uint64_t log_end) noexcept
    {
        const std::lock_guard lock(mutex_);
        retain(log_end);
    }

    /// The item index of the earliest retained record. Lock-free.
    std::uint64_t earliest_items() const noexcept { return earliest_items_.load(std::memory_order_acquire); }

    /// Retention runs that failed part way, or left a released segment file undeleted, since the
    /// partition opened (each is retried at the next commit). Lock-free.
    std::uint64_t maintenance_failures() const noexcept
    {
        return maintenance_failures_.load(std::memory_order_relaxed);
    }

private:
    void require_open() const
    {
        if (segments_.closed()) {
            throw error(errc::closed, format_message("{} is closed", files_.description));
        }
    }

    // Process-shared topics: takes over where another process's retention made the log start (the
    // writer dropped the segments below it). Called with mutex_ held.
    void adopt_retained_from(log_position retained_from) noexcept
    {
        if (retained_from.offset > earliest_.offset) {
            earliest_ = retained_from;
            earliest_items_.store(earliest_.items, std::memory_order_release);
        }
    }

    // Process-shared retention: the groups as stored on disk now, by any process (a group removed
    // by another process is gone, one it made is there). Throws `io_error` when the offsets folder
    // cannot be listed or a checkpoint cannot be read: retention then releases nothing. Called with
    // mutex_ held.
    void reload_groups()
    {
        std::map<std::string, log_position, std::less<>> stored;
        for (const stored_group_checkpoint& each : read_group_checkpoints(files_.offsets_folder())) {
            if (!each.offset) {
                throw error(errc::io_error, format_message("{}: the checkpoint of group '{}' cannot be read; retention "
                                                           "waits for the next commit",
                                                           files_.description, each.group));
            }
            stored.emplace(each.group, position_of(*each.offset));
        }
        groups_ = std::move(stored);
    }

    // stored_groups() of a process-shared partition: each group on disk with its checkpoint (an
    // unreadable one as this process last saw it); when the folder cannot be listed, the groups this
    // process knows. Called with mutex_ held.
    void list_groups_on_disk(std::vector<stored_group>& listed) const
    {
        std::vector<stored_group_checkpoint> stored;
        try {
            stored = read_group_checkpoints(files_.offsets_folder());
        } catch (const error&) {
            for (const auto& [name, position] : groups_) {
                listed.push_back({name, position.items});
            }
            return;
        }
        for (const stored_group_checkpoint& each : stored) {
            const auto known = groups_.find(each.group);
            const std::optional<std::uint64_t> items = each.offset ? segments_.items_at(*each.offset) : std::nullopt;
            if (items || (each.offset && known == groups_.end())) {
                listed.push_back({each.group, items.value_or(earliest_.items)});
            } else if (known != groups_.end()) {
                listed.push_back({each.group, known->second.items});
            }
        }
    }

    // A checkpoint another process wrote, with its item index counted in the log (the segments up to
    // it are mapped: the caller refreshed the log first).
    log_position position_of(std::uint64_t offset) const noexcept
    {
        return {offset, segments_.items_at(offset).value_or(earliest_.items)};
    }

    // The item index at `offset`, where a commit of the cursor's group moves it: the end of its
    // last pull (the usual case, no counting), where it stands, or counted in the log.
    std::uint64_t item_index(const Cursor& reader, std::uint64_t offset) const noexcept
    {
        if (reader.pulled_end && reader.pulled_end->offset == offset) {
            return reader.pulled_end->items;
        }
        const std::uint64_t current = reader.committed_items.load(std::memory_order_relaxed);
        if (offset == reader.committed.load(std::memory_order_relaxed)) {
            return current;
        }
        return segments_.items_at(offset).value_or(current);
    }

    // Called with mutex_ held, after a commit stored its checkpoint (or at open): retention and its
    // file deletions must not make that commit fail, since its progress is saved. A failed step is
    // retried at the next commit; files that could not be deleted are below earliest.offset and
    // also removed at the next open.
    void retain(std::uint64_t log_end) noexcept
    {
        if (keep_ && !shared_) {  // process-shared: retain_shared, under the partition's append lock
            try {
                apply_mmap_retention({files_, segments_, groups_, earliest_, deletions_}, *keep_, log_end);
            } catch (...) {
                // Nothing released beyond what earliest.offset says; the next run starts over.
                maintenance_failures_.fetch_add(1, std::memory_order_relaxed);
            }
            // Checkpoints retention moved (also before a failure) move their cursors.
            for (Cursor& each : cursors_) {
                const auto known = groups_.find(each.group);
                if (known != groups_.end() && each.committed.load(std::memory_order_relaxed) != known->second.offset) {
                    each.committed.store(known->second.offset, std::memory_order_release);
                }
            }
            earliest_items_.store(earliest_.items, std::memory_order_release);
        }
        if (!deletions_.remove_pending(files_.folder)) {
            maintenance_failures_.fetch_add(1, std::memory_order_relaxed);  // a file is left for the next run
        }
    }

    const mmap_partition_files& files_;
    mmap_segment_list& segments_;
    const std::optional<std::size_t> keep_;

    mutable std::mutex mutex_;
    std::map<std::string, log_position, std::less<>> groups_;  // every persisted group; mutex_
    std::list<Cursor> cursors_;                                // guarded by mutex_
    log_position earliest_;                                    // guarded by mutex_
    retention_backlog deletions_;                              // guarded by mutex_
    std::atomic<std::uint64_t> earliest_items_;                // written under mutex_
    std::atomic<std::uint64_t> maintenance_failures_{0};       // written under mutex_
    bool shared_ = false;                                      // set by share(), before the topic is built
};

}  // namespace bufferqueue::detail
