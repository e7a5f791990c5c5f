// Internal: a consumer group's cursors over every partition of a topic - opened all or nothing,
// and removed - for any `storage_partition`.
#pragma once

#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/error.hpp"

#include <cstddef>
#include <exception>
#include <string>
#include <vector>

namespace bufferqueue::detail {

/// What `open_group_cursors` opened: a cursor per partition, and the partitions where the group is
/// new (created by this call rather than reopened or known from disk).
template <class Cursor>
struct opened_group {
    std::vector<Cursor*> cursors;
    std::vector<std::size_t> created_in;
};

/// Removes `group` again from `partitions` (those `open_group_cursors` created it in), handing
/// what each gives back to `release`. Best effort: a leftover is a group at the earliest offset.
template <class Slots, class Release>
void undo_group_cursors(const Slots& slots, const std::string& group, const std::vector<std::size_t>& partitions,
                        Release& release) noexcept
{
    for (const std::size_t each : partitions) {
        try {
            release(slots[each]->storage.remove_group(group));
        } catch (...) {
            // The caller reports the original failure.
        }
    }
}

/// Opens `group`'s cursor in every partition of `slots`, all or nothing: when a partition fails,
/// the partitions that created the group for this call remove it again, and the failure is
/// rethrown as `bufferqueue::error` naming topic, group and partition (other exceptions as they
/// are). Call with the topic's group registration serialized.
template <class Cursor, class Slots, class Release>
opened_group<Cursor> open_group_cursors(const std::string& topic, const Slots& slots, const std::string& group,
                                        Release release)
{
    opened_group<Cursor> opened;
    std::size_t partition = 0;
    try {
        opened.cursors.reserve(slots.size());
        opened.created_in.reserve(slots.size());
        for (; partition < slots.size(); ++partition) {
            auto& storage = slots[partition]->storage;
            const bool existed = storage.has_group(group);
            opened.cursors.push_back(&storage.open_cursor(group));
            if (!existed) {
                opened.created_in.push_back(partition);
            }
        }
    } catch (const error& failure) {
        undo_group_cursors(slots, group, opened.created_in, release);
        throw error(static_cast<errc>(failure.code().value()),
                    format_message("topic '{}': creating consumer group '{}' failed in partition {}, so it was "
                                   "created in no partition: {}",
                                   topic, group, partition, failure.what()));
    } catch (...) {
        undo_group_cursors(slots, group, opened.created_in, release);
        throw;
    }
    return opened;
}

/// Removes `group` from every partition of `slots` that holds it, handing what each gives back to
/// `release`; true when some partition held it. Throws `bufferqueue::error` naming topic, group and
/// partition when a partition fails (the partitions before it no longer hold the group).
template <class Slots, class Release>
bool remove_group_cursors(const std::string& topic, const Slots& slots, const std::string& group, Release release)
{
    bool held = false;
    for (std::size_t partition = 0; partition < slots.size(); ++partition) {
        auto& storage = slots[partition]->storage;
        try {
            if (storage.has_group(group)) {
                held = true;
                release(storage.remove_group(group));
            }
        } catch (const error& failure) {
            throw error(static_cast<errc>(failure.code().value()),
                        format_message("topic '{}': removing consumer group '{}' failed in partition {} (earlier "
                                       "partitions no longer hold it; call remove_group again): {}",
                                       topic, group, partition, failure.what()));
        }
    }
    return held;
}

}  // namespace bufferqueue::detail
