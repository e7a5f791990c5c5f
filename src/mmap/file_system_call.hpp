// Internal to src/mmap: the one way the file layer runs a system call - through the
// fault-injection hooks (file_hooks.hpp), retrying EINTR - and the errors it throws.
#pragma once

#include "bufferqueue/mmap/detail/file_handle.hpp"
#include "bufferqueue/mmap/detail/file_hooks.hpp"

#include "bufferqueue/error.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>

namespace bufferqueue::detail::file_system {

/// The installed hooks, or nullptr (one relaxed atomic load when none are installed).
std::shared_ptr<const file_hooks> current_hooks();

/// The errno a hook wants injected into `operation` on `path`, or 0.
int injected_error(file_operation operation, const std::string& path);

/// Tells the hooks that a flush of bytes [offset, offset + length) of `path` completed.
void report_flush(file_operation operation, const std::string& path, std::uint64_t offset, std::uint64_t length);

/// The operating system's text for `error_number`.
std::string error_text(int error_number);

/// Throws `error(errc::io_error)`: "{what}: {error text}".
[[noreturn]] void throw_io_error(const std::string& what, int error_number);

/// Runs `call` (a system call returning -1 and setting errno on failure) unless a hook injects an
/// error, retrying on EINTR. Returns 0 on success or the error number.
template <typename Call>
int run_checked(file_operation operation, const std::string& path, Call call)
{
    if (const int injected = injected_error(operation, path); injected != 0) {
        return injected;
    }
    while (true) {
        if (call() != -1) {
            return 0;
        }
        if (errno != EINTR) {
            return errno;
        }
    }
}

/// Opens `path` with open(2) `flags` through the hooks; a file it creates gets `permissions` less the
/// umask. Returns the descriptor or -errno.
int open_descriptor(const std::string& path, int flags, unsigned permissions);

/// Fills `status` for `path` with lstat(2) (`follow_links` false) or stat(2), through the hooks
/// (`file_operation::status`); returns 0 or the error number (ENOENT: nothing there).
int path_status(const std::string& path, struct stat& status, bool follow_links);

}  // namespace bufferqueue::detail::file_system
