// bufferqueue: who may read and change the folders and files of a persistent topic
// (`mmap_topic_options::access`; docs/mmap-storage.md, "Who may read the data").
#pragma once

namespace bufferqueue {

/// Who may read and change the folders and files a persistent topic creates: the permission bits
/// they are created with, less the process's umask (a umask can only take bits away). Other users
/// never get any bit. Only creation uses it: a folder or file that already exists keeps its mode
/// (the library never changes a mode), and a file replaced atomically (a checkpoint) is created
/// anew with these bits. Plain value; no I/O of its own.
enum class file_access {
    /// Folders 0700, files 0600: only the user the process runs as (the default). A process-shared
    /// topic refuses a folder whose `shared.header` belongs to another user.
    owner,
    /// Folders 0750, files 0640: the owner reads and writes, members of the file's group may read
    /// (back it up, run `bufferqueue-inspect list` or `dump`) but change nothing. A process-shared
    /// topic still refuses a `shared.header` of another user.
    group_read,
    /// Folders 0770, files 0660: members of the group read and change the data as the owner does -
    /// for process-shared topics whose processes run as different users of one group, which then
    /// accept a `shared.header` made by another user. Needs a umask that keeps the group's write bit
    /// (002 or 007) and a group that every process creates its files with (give the data directory
    /// that group and the set-group-ID bit, `chmod g+s`, so new files and folders inherit it).
    group_write,
};

}  // namespace bufferqueue
