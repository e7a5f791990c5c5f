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

#include "bufferqueue/storage/mmap/detail/file.hpp"

#include <cstdint>
#include <string>

namespace bufferqueue::detail {

/// Creates the folder `offsets_folder/escaped` holding `consumer.offset` = `start`, atomically.
/// Throws `error(errc::io_error)` naming the path; a failure leaves no group folder (a `.tmp`
/// leftover at most, removed here when possible and otherwise at the next open).
inline void create_group_folder(const std::string& offsets_folder, const std::string& escaped, std::uint64_t start)
{
    const std::string folder = offsets_folder + "/" + escaped;
    const std::string temporary = folder + std::string(temporary_suffix);
    make_directories(offsets_folder);
    try {
        make_directories(temporary);
        write_checkpoint(temporary + "/consumer.offset", start);
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

}  // namespace bufferqueue::detail
