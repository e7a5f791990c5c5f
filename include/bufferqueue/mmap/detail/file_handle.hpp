// Internal: owned file descriptors and the operations on single files of the file layer (file.hpp):
// open, size, truncate, preallocate, read, write, fsync, rename, remove, ownership.
#pragma once

#include "bufferqueue/mmap/file_access.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>

namespace bufferqueue::detail {

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

/// The permission bits a file created for `access` gets before the umask: 0600 (`owner`), 0640
/// (`group_read`) or 0660 (`group_write`). Never throws.
constexpr unsigned file_permissions(file_access access) noexcept
{
    switch (access) {
    case file_access::owner: return 0600;
    case file_access::group_read: return 0640;
    case file_access::group_write: return 0660;
    }
    return 0600;
}

/// The permission bits a folder created for `access` gets before the umask: 0700 (`owner`), 0750
/// (`group_read`) or 0770 (`group_write`). Never throws.
constexpr unsigned folder_permissions(file_access access) noexcept
{
    switch (access) {
    case file_access::owner: return 0700;
    case file_access::group_read: return 0750;
    case file_access::group_write: return 0770;
    }
    return 0700;
}

/// The access an existing folder with permission bits `permissions` grants: `group_write` when its
/// group may write into it, `group_read` when the group may read it, else `owner` (bits for other
/// users count for nothing: the library never grants them). Never throws.
constexpr file_access access_granted_by(unsigned permissions) noexcept
{
    if ((permissions & 0020U) != 0) {
        return file_access::group_write;
    }
    return (permissions & 0040U) != 0 ? file_access::group_read : file_access::owner;
}

/// How `open_file` opens a file. Every mode adds O_CLOEXEC; a file it creates gets
/// `file_permissions(access) & ~umask`, an existing one keeps its mode.
enum class open_mode {
    read_only,           ///< O_RDONLY; the file must exist
    read_write,          ///< O_RDWR; the file must exist
    create_or_open,      ///< O_RDWR | O_CREAT
    create_new,          ///< O_RDWR | O_CREAT | O_EXCL; fails when the file exists
    create_or_truncate,  ///< O_RDWR | O_CREAT | O_TRUNC
};

/// Opens `path`; a file it creates gets `file_permissions(access)` less the umask (owner-only
/// unless the caller passes the topic's access). Throws `error(errc::io_error)` naming the path and
/// the OS error (for example "No such file or directory"). Thread-safe; allocates the path copy.
unique_fd open_file(const std::string& path, open_mode mode, file_access access = file_access::owner);

/// Like `open_file`, but returns `std::nullopt` instead of throwing when the file (or a parent
/// directory) does not exist. Other failures throw as in `open_file`.
std::optional<unique_fd> try_open_file(const std::string& path, open_mode mode,
                                       file_access access = file_access::owner);

/// Who owns a file or folder, and its permission bits, as fstat(2) or stat(2) report them.
struct file_ownership {
    unsigned user = 0;         ///< st_uid
    unsigned group = 0;        ///< st_gid
    unsigned permissions = 0;  ///< st_mode & 07777
};

/// The owner and permission bits of the open file (fstat, `file_operation::status`). Throws
/// `error(errc::io_error)` naming the path. Thread-safe.
file_ownership ownership_of(const unique_fd& file);

/// The owner and permission bits of what `path` names (stat, following links;
/// `file_operation::status`). Throws `error(errc::io_error)` naming the path, also when nothing is
/// there. Thread-safe.
file_ownership ownership_of(const std::string& path);

/// The user id this process accesses files as (geteuid). Never throws.
unsigned effective_user() noexcept;

/// The size of the open file in bytes (fstat). Throws `error(errc::io_error)` naming the path.
std::uint64_t file_size(const unique_fd& file);

/// Where the data of the file ends, looking from byte `from` on: every byte from the returned
/// offset to the file's end lies in a hole as the file system reports them (lseek SEEK_DATA /
/// SEEK_HOLE), never written or reserved but never written, and reads as zero. The file's size
/// when data reaches it; `std::nullopt` when the file system cannot tell (the caller reads the
/// bytes). Throws `error(errc::io_error)` naming the path for other failures. Thread-safe.
std::optional<std::uint64_t> data_end(const unique_fd& file, std::uint64_t from);

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

}  // namespace bufferqueue::detail
