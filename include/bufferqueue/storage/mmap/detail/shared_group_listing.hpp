// Internal: what a process-shared partition's statistics report of its consumer groups (issue 51):
// each group's committed position as the watcher thread last read it from disk, with this process's
// own changes since, so that `buffer_queue::stats` reads no file.
#pragma once

#include "bufferqueue/error.hpp"
#include "bufferqueue/storage/mmap/detail/checkpoint_format.hpp"
#include "bufferqueue/storage/mmap/detail/mmap_group_folder.hpp"
#include "bufferqueue/storage/mmap/detail/mmap_segment_list.hpp"
#include "bufferqueue/storage/storage.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bufferqueue::detail {

/// Every listed group's committed position in items, by name. Thread-safe: a lock of its own, held
/// only to change or copy the map (never across file I/O), so `list` never waits for a disk read
/// or a commit. Its owner (the checkpoint store) orders `set`, `erase` and `read` under its groups
/// mutex, so a disk read never overwrites a commit made after it. `set`, `read` and `list` allocate
/// and may throw `std::bad_alloc` (`read` then leaves the listing as it was); `erase` never throws.
/// Only `read` does file I/O.
class shared_group_listing {
public:
    /// `group` stands at `items` now.
    void set(std::string_view group, std::uint64_t items)
    {
        std::string name(group);
        const std::lock_guard lock(mutex_);
        items_.insert_or_assign(std::move(name), items);
    }

    /// `group` is gone.
    void erase(std::string_view group) noexcept
    {
        const std::lock_guard lock(mutex_);
        if (const auto found = items_.find(group); found != items_.end()) {
            items_.erase(found);
        }
    }

    /// Reads the groups from disk again: each group folder in `offsets_folder` with its checkpoint,
    /// counted in items in `segments` (a position before the mapped log: `earliest_items`). A group
    /// or checkpoint that cannot be read is listed as `known` (this process's view) has it; when the
    /// folder cannot be listed, `known` is the listing. The caller refreshed the log first (so that
    /// other processes' appends are counted) and keeps `segments` and `known` from changing.
    void read(const std::string& offsets_folder, const mmap_segment_list& segments,
              const std::map<std::string, log_position, std::less<>>& known, std::uint64_t earliest_items)
    {
        map_type listed;
        std::vector<stored_group_checkpoint> stored;
        try {
            stored = read_group_checkpoints(offsets_folder);
        } catch (const error&) {
            for (const auto& [name, position] : known) {
                listed.emplace(name, position.items);
            }
            install(std::move(listed));
            return;
        }
        for (const stored_group_checkpoint& each : stored) {
            const auto seen = known.find(each.group);
            const std::optional<std::uint64_t> items = each.offset ? segments.items_at(*each.offset) : std::nullopt;
            if (items || (each.offset && seen == known.end())) {
                listed.insert_or_assign(each.group, items.value_or(earliest_items));
            } else if (seen != known.end()) {
                listed.insert_or_assign(each.group, seen->second.items);
            }
        }
        install(std::move(listed));
    }

    /// Every listed group, by name.
    std::vector<stored_group> list() const
    {
        std::vector<stored_group> listed;
        const std::lock_guard lock(mutex_);
        listed.reserve(items_.size());
        for (const auto& [name, items] : items_) {
            listed.push_back({name, items});
        }
        return listed;
    }

private:
    using map_type = std::map<std::string, std::uint64_t, std::less<>>;

    void install(map_type listed) noexcept
    {
        const std::lock_guard lock(mutex_);
        items_.swap(listed);  // the old map is freed after the lock
    }

    mutable std::mutex mutex_;
    map_type items_;  // guarded by mutex_
};

}  // namespace bufferqueue::detail
