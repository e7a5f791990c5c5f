// bufferqueue: the POSIX file layer of persistent topics.
//
// This is the only code that calls the operating system for persistent topics: opening, sizing,
// preallocating, mapping, flushing, renaming and removing files, locking directories and writing
// checkpoints. Every failure throws `bufferqueue::error` with `errc::io_error` (or `corrupt_data`
// for a checkpoint that fails validation, `invalid_argument` for a misuse) and a message naming the
// full path, the operation, where relevant the offset, and the operating system's error text.
//
// Fault injection: `file_hooks` installed with `install_file_hooks` (tests only) see every
// operation before it runs and may make it fail with an errno of their choice, and they are told
// which byte ranges each successful msync/fsync made durable. When no hooks are installed the
// seam costs one relaxed atomic load per operation.
#pragma once

#include "bufferqueue/storage/mmap/detail/checkpoint_format.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bufferqueue::detail {

// ---------------------------------------------------------------------------------------------
// Fault-injection seam
// ---------------------------------------------------------------------------------------------

/// The operating-system operations of the file layer, as seen by `file_hooks`.
enum class file_operation {
    open,             ///< open(2) of a file (any `open_mode`), including checkpoint and lock files
    read,             ///< pread(2) of a file (`read_at`, `read_checkpoint`)
    write,            ///< pwrite(2) of a file (`write_at`, `write_checkpoint`)
    preallocate,      ///< posix_fallocate(3)
    truncate,         ///< ftruncate(2)
    size,             ///< fstat(2) for the size of an open file
    map,              ///< mmap(2)
    msync,            ///< msync(2) with MS_SYNC (`mapped_region::flush`)
    fsync,            ///< fsync(2) of a file
    fsync_directory,  ///< open(2) + fsync(2) of a directory
    rename,           ///< rename(2); the hook's path is the destination
    remove,           ///< unlink(2) or rmdir(2)
    make_directory,   ///< mkdir(2)
    list_directory,   ///< opendir(3)/readdir(3)
    lock,             ///< flock(2)
};

/// The lowercase name of `operation` ("fsync", "msync", ...). Thread-safe; never allocates.
std::string_view operation_name(file_operation operation) noexcept;

/// Test hooks called by the file layer. Either member may be empty. Both may be called
/// concurrently from any thread that uses the file layer, so they must be thread-safe.
struct file_hooks {
    /// Called before each operation with the full path it applies to. Returning 0 lets the
    /// operation run; returning an errno value (EIO, ENOSPC, ...) skips it and makes it fail
    /// exactly as if the operating system had reported that error. Do not return EINTR (the
    /// layer retries interrupted calls, so it would retry forever).
    std::function<int(file_operation operation, const std::string& path)> before_operation;

    /// Called after each successful flush: `msync` reports the page-aligned byte range of the file
    /// that was synced, `fsync` reports offset 0 and the file's size, `fsync_directory` reports
    /// offset 0 and length 0.
    std::function<void(file_operation operation, const std::string& path, std::uint64_t offset, std::uint64_t length)>
        after_flush;
};

/// Installs `hooks` process-wide (nullptr removes them) and returns the previously installed
/// hooks. Meant for tests. Thread-safe: operations already running keep the hooks they started
/// with (they hold a reference), later operations see the new ones. Allocates nothing itself.
std::shared_ptr<const file_hooks> install_file_hooks(std::shared_ptr<const file_hooks> hooks);

/// Installs hooks for its lifetime and restores the previous ones when destroyed. Not copyable
/// or movable. Not meant to be nested across threads: restore order follows destruction order.
class scoped_file_hooks {
public:
    /// Installs `hooks`. Allocates the shared copy of the hooks.
    explicit scoped_file_hooks(file_hooks hooks)
        : previous_(install_file_hooks(std::make_shared<const file_hooks>(std::move(hooks))))
    {
    }

    /// Restores the hooks that were installed before this object.
    ~scoped_file_hooks() { install_file_hooks(std::move(previous_)); }

    scoped_file_hooks(const scoped_file_hooks&) = delete;
    scoped_file_hooks& operator=(const scoped_file_hooks&) = delete;

private:
    std::shared_ptr<const file_hooks> previous_;
};

// ---------------------------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------------------------

/// An owned file descriptor together with the path it was opened from (used in error messages).
/// Move-only; closes the descriptor when destroyed. Not thread-safe as an object, but the
/// functions below may use one descriptor from several threads at once (they use pread/pwrite).
class unique_fd {
public:
    /// An empty handle (`get() == -1`). Never allocates.
    unique_fd() noexcept = default;

    /// Takes ownership of `descriptor`, opened from `path`. Never throws.
    unique_fd(int descriptor, std::string path) noexcept : descriptor_(descriptor), path_(std::move(path)) {}

    /// Takes over `other`'s descriptor and path; `other` is left empty. Never throws.
    unique_fd(unique_fd&& other) noexcept;
    /// Closes the current descriptor (ignoring errors) and takes over `other`'s. Never throws.
    unique_fd& operator=(unique_fd&& other) noexcept;
    unique_fd(const unique_fd&) = delete;
    unique_fd& operator=(const unique_fd&) = delete;

    /// Closes the descriptor, ignoring errors (use `close()` to see them).
    ~unique_fd();

    /// The descriptor, or -1 when empty.
    int get() const noexcept { return descriptor_; }

    /// The path the descriptor was opened from.
    const std::string& path() const noexcept { return path_; }

    /// True when the handle owns a descriptor.
    explicit operator bool() const noexcept { return descriptor_ >= 0; }

    /// Closes the descriptor now; the handle is empty afterwards even when this throws.
    /// Throws `error(errc::io_error)` naming the path when close(2) reports an error (such an
    /// error can mean that earlier writes were lost).
    void close();

    /// Gives up ownership and returns the descriptor; the handle is empty afterwards.
    int release() noexcept;

private:
    int descriptor_ = -1;
    std::string path_;
};

/// How `open_file` opens a file. Every mode adds O_CLOEXEC; created files get mode 0666 & ~umask.
enum class open_mode {
    read_only,           ///< O_RDONLY; the file must exist
    read_write,          ///< O_RDWR; the file must exist
    create_or_open,      ///< O_RDWR | O_CREAT
    create_new,          ///< O_RDWR | O_CREAT | O_EXCL; fails when the file exists
    create_or_truncate,  ///< O_RDWR | O_CREAT | O_TRUNC
};

/// Opens `path`. Throws `error(errc::io_error)` naming the path and the OS error (for example
/// "No such file or directory"). Thread-safe; allocates the path copy.
unique_fd open_file(const std::string& path, open_mode mode);

/// Like `open_file`, but returns `std::nullopt` instead of throwing when the file (or a parent
/// directory) does not exist. Other failures throw as in `open_file`.
std::optional<unique_fd> try_open_file(const std::string& path, open_mode mode);

/// The size of the open file in bytes (fstat). Throws `error(errc::io_error)` naming the path.
std::uint64_t file_size(const unique_fd& file);

/// Sets the size of the file to `length` bytes (ftruncate): extends with zero bytes (sparse,
/// nothing reserved on disk) or cuts it. Throws `error(errc::io_error)` naming the path.
void truncate_file(const unique_fd& file, std::uint64_t length);

/// Reserves disk blocks for bytes [offset, offset + length) with posix_fallocate, extending the
/// file when the range ends past its size; a zero length does nothing. After it succeeds, writing into that range
/// through a mapping cannot fail for lack of space (no SIGBUS on a full disk). Throws `error(errc::io_error)` naming
/// the path, the range and, for ENOSPC/EDQUOT, saying that the disk is full.
void preallocate(const unique_fd& file, std::uint64_t offset, std::uint64_t length);

/// Writes all of `bytes` at `offset` (pwrite, retried until complete). Throws
/// `error(errc::io_error)` naming the path and the offset.
void write_at(const unique_fd& file, std::uint64_t offset, std::span<const std::byte> bytes);

/// Reads into `buffer` from `offset` until it is full or the file ends; returns the number of
/// bytes read (less than `buffer.size()` only at the end of the file). Throws
/// `error(errc::io_error)` naming the path and the offset.
std::size_t read_at(const unique_fd& file, std::uint64_t offset, std::span<std::byte> buffer);

/// Flushes the file's data and metadata to stable storage (fsync). Throws `error(errc::io_error)`
/// naming the path; after a failed fsync the state of the data written since the previous
/// successful one is unknown, so callers must not acknowledge it.
void fsync_file(const unique_fd& file);

/// Makes the directory entries of `directory` durable (open + fsync of the directory), needed
/// after creating, renaming or removing an entry in it. Throws `error(errc::io_error)`.
void fsync_directory(const std::string& directory);

/// Creates `directory` and its missing parents (mode 0777 & ~umask) and fsyncs the parent of each
/// directory it created, so the new entries survive a power loss. Returns true when `directory`
/// was created, false when it already existed. Throws `error(errc::io_error)` naming the path,
/// also when a component exists but is not a directory.
bool make_directories(const std::string& directory);

/// Removes a file (unlink) or an empty directory (rmdir). Returns false when nothing existed at
/// `path`. Throws `error(errc::io_error)` naming the path for any other failure. Does not fsync
/// the parent directory.
bool remove_file(const std::string& path);

/// Renames `from` to `to`, atomically replacing `to` (rename). Does not fsync the directory.
/// Throws `error(errc::io_error)` naming both paths.
void rename_file(const std::string& from, const std::string& to);

/// True when something exists at `path` (lstat). Throws `error(errc::io_error)` for errors other
/// than "does not exist".
bool path_exists(const std::string& path);

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

// ---------------------------------------------------------------------------------------------
// Memory mapping
// ---------------------------------------------------------------------------------------------

/// The memory page size (sysconf). Thread-safe; never allocates.
std::size_t page_size() noexcept;

/// A read-write shared mapping of the first `size()` bytes of a file. Move-only; unmaps when
/// destroyed. The mapping stays valid after the descriptor it was made from is closed.
/// Bytes of the mapping past the end of the file must not be touched (SIGBUS): size the file
/// (`truncate_file`) and reserve its blocks (`preallocate`) before writing through the mapping.
/// Thread-safety: several threads may read and write disjoint bytes and call `flush` at once.
class mapped_region {
public:
    /// An empty region (no mapping). Never allocates.
    mapped_region() noexcept = default;

    /// Takes over `other`'s mapping; `other` is left empty. Never throws.
    mapped_region(mapped_region&& other) noexcept;
    /// Unmaps the current mapping and takes over `other`'s. Never throws.
    mapped_region& operator=(mapped_region&& other) noexcept;
    mapped_region(const mapped_region&) = delete;
    mapped_region& operator=(const mapped_region&) = delete;

    /// Unmaps the region.
    ~mapped_region();

    /// The mapped bytes.
    std::span<std::byte> bytes() const noexcept { return {data_, size_}; }

    /// The first mapped byte (page-aligned), or nullptr when empty.
    std::byte* data() const noexcept { return data_; }

    /// The number of mapped bytes.
    std::size_t size() const noexcept { return size_; }

    /// The path of the mapped file.
    const std::string& path() const noexcept { return path_; }

    /// Writes bytes [offset, offset + length) of the region to the file and waits for the
    /// device (msync with MS_SYNC over the page-aligned range that covers them). A zero length
    /// does nothing. Throws `error(errc::invalid_argument)` when the range is outside the region
    /// and `error(errc::io_error)` naming the path and the range when msync fails.
    void flush(std::size_t offset, std::size_t length) const;

    /// Unmaps now; the region is empty afterwards. Never throws.
    void unmap() noexcept;

private:
    friend mapped_region map_file(const unique_fd& file, std::size_t length);

    mapped_region(std::byte* data, std::size_t size, std::string path) noexcept
        : data_(data), size_(size), path_(std::move(path))
    {
    }

    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    std::string path_;
};

/// Maps the first `length` bytes of `file` read-write and shared (mmap with PROT_READ |
/// PROT_WRITE, MAP_SHARED). `file` must be open read-write. Throws `error(errc::invalid_argument)`
/// for a zero length and `error(errc::io_error)` naming the path when mmap fails.
mapped_region map_file(const unique_fd& file, std::size_t length);

// ---------------------------------------------------------------------------------------------
// Directory lock
// ---------------------------------------------------------------------------------------------

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
    /// another process — not from a mistake in the calls made on this queue.)
    explicit directory_lock(const std::string& directory);

    /// Takes over the lock; the moved-from object holds nothing. Never throws.
    directory_lock(directory_lock&&) noexcept = default;
    /// Releases the current lock (if any) and takes over `other`'s. Never throws.
    directory_lock& operator=(directory_lock&&) noexcept = default;
    directory_lock(const directory_lock&) = delete;
    directory_lock& operator=(const directory_lock&) = delete;

    /// Releases the lock.
    ~directory_lock() = default;

    /// The locked directory.
    const std::string& directory() const noexcept { return directory_; }

private:
    std::string directory_;
    unique_fd lock_file_;
};

// ---------------------------------------------------------------------------------------------
// Checkpoints
// ---------------------------------------------------------------------------------------------

/// Durably replaces the checkpoint at `path` with `value` in the format of checkpoint_format.hpp
/// (version 2: the value and a CRC-32C): writes the 16 bytes to `path + ".tmp"`, fsyncs it, renames
/// it over `path` and fsyncs the parent directory, so a reader sees either the old or the new value,
/// never a torn one. When it throws, the old checkpoint (if any) is still in place unless the final
/// directory fsync failed, in which case the new value may or may not survive a power loss. Throws
/// `error(errc::invalid_argument)` when `value` exceeds `max_checkpoint_value`,
/// `error(errc::io_error)` naming the path and the failed step otherwise.
void write_checkpoint(const std::string& path, std::uint64_t value);

/// Reads the checkpoint at `path` (format version 2, or a version-1 file of 8 bytes written by an
/// earlier release): `std::nullopt` when the file does not exist. Throws `error(errc::corrupt_data)`
/// naming the file when it is not a regular file, has neither size, fails its checksum, has an
/// unknown version or holds a negative value; `error(errc::io_error)` naming the path when it cannot
/// be read.
std::optional<std::uint64_t> read_checkpoint(const std::string& path);

}  // namespace bufferqueue::detail
