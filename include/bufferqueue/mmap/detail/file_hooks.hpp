// Internal: the fault-injection seam of the file layer (file.hpp). Tests install `file_hooks` that
// see every operating-system operation before it runs and may make it fail with an errno of their
// choice, and that are told which byte ranges each successful msync/fsync made durable. When no
// hooks are installed the seam costs one relaxed atomic load per operation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace bufferqueue::detail {

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
    seek_data,        ///< lseek(2) with SEEK_DATA / SEEK_HOLE (`data_end`)
    status,           ///< stat(2), lstat(2) or fstat(2): what a path is, its owner (`path_exists`, `ownership_of`)
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

}  // namespace bufferqueue::detail
