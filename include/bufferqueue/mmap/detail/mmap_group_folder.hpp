// Internal: a persistent partition's consumer-group folders, `offsets/{escaped group}/`, created
// and removed atomically (see docs/mmap-format.md).
//
// Creation: `{escaped}.tmp/` is made, `consumer.offset` written into it, then the folder is renamed
// to `{escaped}` and `offsets/` fsynced, so the group appears with its first checkpoint or not at all.
// Removal: `{escaped}` is renamed to `{escaped}.tmp` and `offsets/` fsynced - from then on the group
// is gone - then the temporary folder is deleted. Names ending in `.tmp` are never group folders
// (see group_path.hpp), so a crash at any point leaves either the whole group or nothing but a
// `.tmp` leftover, which the next open removes.
//
// Callers hold the partition's groups_mutex_, so no other creation or removal runs in `offsets/`.
#pragma once

#include "bufferqueue/error.hpp"
#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/group_path.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace bufferqueue::detail {

/// Creates the folder `offsets_folder/escaped` holding `consumer.offset` = `start`, atomically, for
/// `access` (both folders and the file). Throws `error(errc::io_error)` naming the path; a failure leaves no group
/// folder (a `.tmp` leftover at most, removed here when possible and otherwise at the next open).
inline void create_group_folder(const std::string& offsets_folder, const std::string& escaped, std::uint64_t start,
                                file_access access)
{
    const std::string folder = offsets_folder + "/" + escaped;
    const std::string temporary = folder + std::string(temporary_suffix);
    make_directories(offsets_folder, access);
    try {
        make_directories(temporary, access);
        write_checkpoint(temporary + "/consumer.offset", start, access);
        rename_file(temporary, folder);
    } catch (...) {
        try {
            remove_temporary_files(offsets_folder);
        } catch (...) {
            // The next open removes the leftover.
        }
        throw;
    }
    fsync_directory(offsets_folder);
}

/// Removes the folder `offsets_folder/escaped` and everything in it, atomically; returns false when
/// it does not exist. Throws `error(errc::io_error)` naming the path. A failure before the rename
/// leaves the group as it was; after it, the group is gone and a `.tmp` leftover may stay until the
/// next open.
inline bool remove_group_folder(const std::string& offsets_folder, const std::string& escaped)
{
    const std::string folder = offsets_folder + "/" + escaped;
    if (!path_exists(folder)) {
        return false;
    }
    remove_temporary_files(offsets_folder);  // a leftover of an earlier failure must not block the rename
    rename_file(folder, folder + std::string(temporary_suffix));
    fsync_directory(offsets_folder);
    remove_temporary_files(offsets_folder);
    fsync_directory(offsets_folder);
    return true;
}

/// A group folder of `offsets/` and its checkpoint, as another process may be writing them.
struct stored_group_checkpoint {
    std::string group;
    std::optional<std::uint64_t> offset;  ///< nothing when `consumer.offset` cannot be read now
};

/// Every group folder in `offsets_folder` (none when it does not exist) with its checkpoint, for
/// process-shared topics, whose groups other processes create, commit and remove. Skips `.tmp`
/// folders (a group being created or removed) and folders whose name is no group's (recovery reports
/// them). Throws `error(errc::io_error)` when the folder cannot be listed. Thread-safe.
inline std::vector<stored_group_checkpoint> read_group_checkpoints(const std::string& offsets_folder)
{
    std::vector<stored_group_checkpoint> found;
    if (!path_exists(offsets_folder)) {
        return found;
    }
    for (const directory_entry& entry : list_directory(offsets_folder)) {
        if (entry.kind != entry_kind::directory || entry.name.ends_with(temporary_suffix)) {
            continue;
        }
        stored_group_checkpoint group;
        try {
            group.group = unescape_group_name(entry.name);
        } catch (const error&) {
            continue;
        }
        try {
            group.offset = read_checkpoint(offsets_folder + "/" + entry.name + "/consumer.offset");
        } catch (const error&) {
            // Unreadable now (a damaged file is the next open's to report).
        }
        found.push_back(std::move(group));
    }
    return found;
}

}  // namespace bufferqueue::detail
