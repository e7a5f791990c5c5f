// bufferqueue: changing a consumer group's committed positions in a data folder without a queue
// (`bufferqueue-inspect reset-offsets` and `delete-group`, docs/inspect.md).
//
// `plan_*` only read (no lock, nothing written): they say what would change. `execute_*` lock the
// topic folder the way a queue does (`directory_lock` on `{topic}/.lock`), so they refuse while a
// queue has the topic open and no queue can open it while they write; under the lock they read the
// partitions again, check them with the library's recovery, and write through the library's own
// atomic file operations: `write_checkpoint` (temporary file, fsync, rename, directory fsync) for a
// new position, `remove_group_folder` (rename to `.tmp`, fsync, delete) for a deletion. A damaged
// partition is refused before anything is written. What they create gets the access the topic
// folder's mode grants (`detail::access_granted_by`): an owner-only topic stays owner-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace bufferqueue::inspect {

/// Where `reset-offsets` moves a group.
enum class reset_target {
    earliest,  ///< the first retained record
    latest,    ///< the log end: nothing left to read
    offset,    ///< a given item index (record number), between earliest and the log end
};

/// The change in one partition.
struct group_change {
    /// The partition's number in the topic.
    std::size_t partition = 0;
    std::uint64_t current = 0;            ///< items: the committed position now
    std::uint64_t target = 0;             ///< items: the position after the change (deletion: unchanged)
    std::uint64_t end = 0;                ///< items: the partition's log end
    std::uint64_t target_log_offset = 0;  ///< the byte offset written into consumer.offset
    std::string checkpoint_path;          ///< the file written (reset) or whose folder is removed (delete)
};

/// What a reset or a deletion changes: one entry per partition that holds the group.
struct group_change_plan {
    /// The topic, as given.
    std::string topic;
    /// The group's name, as given.
    std::string group;
    /// One change per partition that holds the group, by ascending partition.
    std::vector<group_change> changes;
};

/// What `reset-offsets` would write. Throws `error(errc::invalid_argument)` naming the topic or group
/// when it does not exist (the group in no partition), and naming the topic, group, partition,
/// offset and the valid range when `offset` is outside a partition's [earliest, end];
/// `error(errc::corrupt_data)` naming the file when a partition is damaged. Reads only.
group_change_plan plan_reset(const std::string& data_directory, const std::string& topic, const std::string& group,
                             reset_target target, std::uint64_t offset = 0);

/// Locks the topic, plans again and writes the new checkpoints; returns what it wrote. Throws as
/// `plan_reset`, and `error(errc::io_error)` saying a queue holds the topic open when the lock is
/// taken, or naming the file a write failed on (each checkpoint is replaced atomically: a failure
/// leaves every partition at its old or its new position).
group_change_plan execute_reset(const std::string& data_directory, const std::string& topic, const std::string& group,
                                reset_target target, std::uint64_t offset = 0);

/// What `delete-group` would remove. Throws as `plan_reset`. Reads only.
group_change_plan plan_delete(const std::string& data_directory, const std::string& topic, const std::string& group);

/// Locks the topic, plans again and removes the group's folder in every partition (atomically per
/// partition); returns what it removed. Throws as `execute_reset`.
group_change_plan execute_delete(const std::string& data_directory, const std::string& topic, const std::string& group);

}  // namespace bufferqueue::inspect
