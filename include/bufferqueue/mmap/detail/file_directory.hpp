// Internal: directories in the file layer (file.hpp): creating, listing and fsyncing them, removing
// `.tmp` leftovers, and the exclusive or shared lock a queue holds on a topic folder.
#pragma once

#include "bufferqueue/mmap/detail/file_handle.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bufferqueue::detail {

/// Makes the directory entries of `directory` durable (open + fsync of the directory), needed
/// after creating, renaming or removing an entry in it. Throws `error(errc::io_error)`.
void fsync_directory(const std::string& directory);

/// Creates `directory` and its missing parents (mode `folder_permissions(access)` less the umask;
/// existing ones keep their mode) and fsyncs the parent of each directory it created, so the new
/// entries survive a power loss. Returns true when `directory` was created, false when it already
/// existed. Throws `error(errc::io_error)` naming the path, also when a component exists but is not a
/// directory.
bool make_directories(const std::string& directory, file_access access = file_access::owner);

/// What a directory entry is.
enum class entry_kind { file, directory, other };

/// One entry of `list_directory`.
struct directory_entry {
    std::string name;  ///< the entry's name (no directory part); never "." or ".."
    entry_kind kind;   ///< regular file, directory, or anything else (symlink, socket, ...)
};

/// The entries of `directory` sorted by name, without "." and "..". Throws `error(errc::io_error)`
/// naming the directory.
std::vector<directory_entry> list_directory(const std::string& directory);

/// Removes the leftovers of interrupted atomic writes: every entry of `directory` whose name ends
/// in ".tmp" (files, and directories with everything inside them). Returns how many entries it
/// removed; a missing `directory` has none. The removals are not fsynced: if they are lost in a
/// power failure, the next call removes them again. Throws `error(errc::io_error)` naming the path.
std::size_t remove_temporary_files(const std::string& directory);

/// The suffix of temporary names used by atomic writes (".tmp").
inline constexpr std::string_view temporary_suffix = ".tmp";

/// The name of the lock file `directory_lock` creates in the locked directory. It is never
/// removed (removing a lock file races with processes that are about to lock it).
inline constexpr std::string_view lock_file_name = ".lock";

/// An exclusive lock on a directory held while the object lives: flock(LOCK_EX | LOCK_NB) on
/// `{directory}/.lock`, created when missing. flock locks belong to an open file description, so
/// a second `directory_lock` on the same directory conflicts whether it is taken in this process
/// or another one; the lock is released when the object is destroyed or the process exits
/// (including a crash), never left stale. The lock file is opened with O_CLOEXEC, so programs
/// started with exec do not inherit it; a child made by fork() without exec shares the lock
/// until it exits. Move-only; not meant to be shared between threads.
class directory_lock {
public:
    /// Locks `directory`, which must exist. Fails fast, without waiting: throws
    /// `error(errc::io_error)` saying the directory is already open by another queue when the lock
    /// is held elsewhere, or naming the lock file and the OS error for other failures. (io_error
    /// rather than a usage error: the conflict comes from the environment — another queue, maybe
    /// another process — not from a mistake in the calls made on this queue.) A lock file it
    /// creates gets `file_permissions(access)` less the umask.
    explicit directory_lock(const std::string& directory, file_access access = file_access::owner);

    /// Takes over the lock; the moved-from object holds nothing. Never throws.
    directory_lock(directory_lock&&) noexcept = default;
    /// Releases the current lock (if any) and takes over `other`'s. Never throws.
    directory_lock& operator=(directory_lock&&) noexcept = default;
    directory_lock(const directory_lock&) = delete;
    directory_lock& operator=(const directory_lock&) = delete;

    /// Releases the lock.
    ~directory_lock() = default;

private:
    unique_fd lock_file_;
};

/// Opens `path` (created when missing, never removed: removing a lock file races with processes
/// about to lock it) and takes an exclusive flock on it without waiting: the descriptor holding the
/// lock, or nothing when another open file description holds it (in this process or another one).
/// The kernel releases the lock when the descriptor is closed or the process dies. A file it creates
/// gets `file_permissions(access)` less the umask. Throws `error(errc::io_error)` naming the path for
/// other failures.
std::optional<unique_fd> try_lock_file(const std::string& path, file_access access = file_access::owner);

/// The name of the file that serializes the opening of a process-shared topic folder
/// (`shared_directory_lock`). Never removed, like `lock_file_name`.
inline constexpr std::string_view open_lock_file_name = ".open.lock";

/// A shared hold on a directory that several queues, in this process or others, may hold at once
/// (process-shared topics): flock(LOCK_SH) on the same `{directory}/.lock` that `directory_lock`
/// locks exclusively, so an exclusive queue and shared ones refuse each other with the same clear
/// error. Opening is serialized by an exclusive flock on `{directory}/.open.lock`, held from the
/// constructor until `finish_opening()` (or destruction): while it is held no other shared queue
/// can open the directory, so the first one (`first()`: no other queue held the directory) may
/// recover and initialize what the queues share. Every lock is released by the kernel when the
/// process dies. Move-only; not meant to be shared between threads.
class shared_directory_lock {
public:
    /// Waits for the open lock (held by another queue only while that one opens), then takes the
    /// shared hold of `directory`, which must exist. Throws `error(errc::io_error)` saying the
    /// directory is open by a queue that is not process-shared when `directory_lock` holds it, or
    /// naming the lock file and the OS error for other failures. Lock files it creates get
    /// `file_permissions(access)` less the umask.
    explicit shared_directory_lock(const std::string& directory, file_access access = file_access::owner);

    shared_directory_lock(shared_directory_lock&&) noexcept = default;
    shared_directory_lock& operator=(shared_directory_lock&&) noexcept = default;
    shared_directory_lock(const shared_directory_lock&) = delete;
    shared_directory_lock& operator=(const shared_directory_lock&) = delete;
    ~shared_directory_lock() = default;

    /// True when no other queue held the directory when this one took it. Never throws.
    bool first() const noexcept { return first_; }

    /// Lets other shared queues open the directory (releases the open lock). Idempotent; never throws.
    void finish_opening() noexcept;

private:
    unique_fd open_lock_file_;
    unique_fd lock_file_;
    bool first_ = false;
};

}  // namespace bufferqueue::detail
