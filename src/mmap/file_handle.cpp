#include "bufferqueue/mmap/detail/file_handle.hpp"

#include "file_system_call.hpp"

#include "bufferqueue/detail/message.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace bufferqueue::detail {

using file_system::current_hooks;
using file_system::error_text;
using file_system::injected_error;
using file_system::open_descriptor;
using file_system::run_checked;
using file_system::throw_io_error;

namespace {

int open_flags(open_mode mode)
{
    switch (mode) {
    case open_mode::read_only: return O_RDONLY | O_CLOEXEC;
    case open_mode::read_write: return O_RDWR | O_CLOEXEC;
    case open_mode::create_or_open: return O_RDWR | O_CREAT | O_CLOEXEC;
    case open_mode::create_new: return O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC;
    case open_mode::create_or_truncate: return O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC;
    }
    return O_RDONLY | O_CLOEXEC;
}

}  // namespace

unique_fd::unique_fd(unique_fd&& other) noexcept
    : descriptor_(std::exchange(other.descriptor_, -1)), path_(std::move(other.path_))
{
}

unique_fd& unique_fd::operator=(unique_fd&& other) noexcept
{
    if (this != &other) {
        if (descriptor_ >= 0) {
            ::close(descriptor_);
        }
        descriptor_ = std::exchange(other.descriptor_, -1);
        path_ = std::move(other.path_);
    }
    return *this;
}

unique_fd::~unique_fd()
{
    if (descriptor_ >= 0) {
        ::close(descriptor_);
    }
}

void unique_fd::close()
{
    if (descriptor_ < 0) {
        return;
    }
    // close(2) must not be retried on EINTR on Linux: the descriptor is released either way.
    const int result = ::close(std::exchange(descriptor_, -1));
    if (result == -1 && errno != EINTR) {
        const int error_number = errno;  // read before the message is built: building it may set errno
        throw_io_error(detail::format_message("cannot close {}", path_), error_number);
    }
}

int unique_fd::release() noexcept
{
    return std::exchange(descriptor_, -1);
}

// ---- files ----------------------------------------------------------------------------------

unique_fd open_file(const std::string& path, open_mode mode, file_access access)
{
    const int result = open_descriptor(path, open_flags(mode), file_permissions(access));
    if (result < 0) {
        throw_io_error(detail::format_message("cannot open {}", path), -result);
    }
    return unique_fd(result, path);
}

std::optional<unique_fd> try_open_file(const std::string& path, open_mode mode, file_access access)
{
    const int result = open_descriptor(path, open_flags(mode), file_permissions(access));
    if (result == -ENOENT) {
        return std::nullopt;
    }
    if (result < 0) {
        throw_io_error(detail::format_message("cannot open {}", path), -result);
    }
    return unique_fd(result, path);
}

std::uint64_t file_size(const unique_fd& file)
{
    struct stat status {};
    const int failure = run_checked(file_operation::size, file.path(), [&] { return ::fstat(file.get(), &status); });
    if (failure != 0) {
        throw_io_error(detail::format_message("cannot get the size of {}", file.path()), failure);
    }
    return static_cast<std::uint64_t>(status.st_size);
}

namespace {

file_ownership ownership_from(const struct stat& status) noexcept
{
    return {.user = static_cast<unsigned>(status.st_uid),
            .group = static_cast<unsigned>(status.st_gid),
            .permissions = static_cast<unsigned>(status.st_mode & 07777)};
}

}  // namespace

file_ownership ownership_of(const unique_fd& file)
{
    struct stat status {};
    const int failure = run_checked(file_operation::status, file.path(), [&] { return ::fstat(file.get(), &status); });
    if (failure != 0) {
        throw_io_error(detail::format_message("cannot find the owner of {}", file.path()), failure);
    }
    return ownership_from(status);
}

file_ownership ownership_of(const std::string& path)
{
    struct stat status {};
    if (const int failure = file_system::path_status(path, status, true); failure != 0) {
        throw_io_error(detail::format_message("cannot find the owner of {}", path), failure);
    }
    return ownership_from(status);
}

unsigned effective_user() noexcept
{
    return static_cast<unsigned>(::geteuid());
}

std::optional<std::uint64_t> data_end(const unique_fd& file, std::uint64_t from)
{
    // Walks the data regions after `from` (there are few: the blocks a writer used) to the last one.
    std::uint64_t end = from;
    for (std::uint64_t position = from;;) {
        off_t data = -1;
        int failure = run_checked(file_operation::seek_data, file.path(), [&] {
            data = ::lseek(file.get(), static_cast<off_t>(position), SEEK_DATA);
            return data < 0 ? -1 : 0;
        });
        if (failure == ENXIO) {
            return end;  // no data at or after `position`
        }
        off_t hole = -1;
        if (failure == 0) {
            failure = run_checked(file_operation::seek_data, file.path(), [&] {
                hole = ::lseek(file.get(), data, SEEK_HOLE);
                return hole < 0 ? -1 : 0;
            });
        }
        if (failure == EINVAL || failure == EOPNOTSUPP || failure == ENOTSUP) {
            return std::nullopt;  // no SEEK_DATA here
        }
        if (failure != 0) {
            throw_io_error(
                detail::format_message("cannot find where the data of {} ends after byte {}", file.path(), from),
                failure);
        }
        end = static_cast<std::uint64_t>(hole);
        position = end;
    }
}

void truncate_file(const unique_fd& file, std::uint64_t length)
{
    const int failure = run_checked(file_operation::truncate, file.path(),
                                    [&] { return ::ftruncate(file.get(), static_cast<off_t>(length)); });
    if (failure != 0) {
        throw_io_error(detail::format_message("cannot set the size of {} to {} bytes", file.path(), length), failure);
    }
}

void preallocate(const unique_fd& file, std::uint64_t offset, std::uint64_t length)
{
    if (length == 0) {
        return;  // posix_fallocate rejects a zero length with EINVAL
    }
    int failure = injected_error(file_operation::preallocate, file.path());
    if (failure == 0) {
        // posix_fallocate returns the error number instead of setting errno.
        do {
            failure = ::posix_fallocate(file.get(), static_cast<off_t>(offset), static_cast<off_t>(length));
        } while (failure == EINTR);
    }
    if (failure == 0) {
        return;
    }
    const std::string what =
        detail::format_message("cannot preallocate {} bytes at offset {} of {}", length, offset, file.path());
    if (failure == ENOSPC || failure == EDQUOT) {
        throw error(errc::io_error, detail::format_message("{}: the disk is full ({})", what, error_text(failure)));
    }
    throw_io_error(what, failure);
}

void write_at(const unique_fd& file, std::uint64_t offset, std::span<const std::byte> bytes)
{
    std::size_t written = 0;
    const int failure = run_checked(file_operation::write, file.path(), [&] {
        while (written < bytes.size()) {
            const ssize_t result = ::pwrite(file.get(), bytes.data() + written, bytes.size() - written,
                                            static_cast<off_t>(offset + written));
            if (result == -1) {
                return -1;
            }
            if (result == 0) {
                errno = EIO;
                return -1;
            }
            written += static_cast<std::size_t>(result);
        }
        return 0;
    });
    if (failure != 0) {
        throw_io_error(detail::format_message("cannot write {} bytes at offset {} of {}", bytes.size(),
                                              offset + written, file.path()),
                       failure);
    }
}

std::size_t read_at(const unique_fd& file, std::uint64_t offset, std::span<std::byte> buffer)
{
    std::size_t read = 0;
    const int failure = run_checked(file_operation::read, file.path(), [&] {
        while (read < buffer.size()) {
            const ssize_t result =
                ::pread(file.get(), buffer.data() + read, buffer.size() - read, static_cast<off_t>(offset + read));
            if (result == -1) {
                return -1;
            }
            if (result == 0) {
                break;
            }
            read += static_cast<std::size_t>(result);
        }
        return 0;
    });
    if (failure != 0) {
        throw_io_error(detail::format_message("cannot read {} bytes at offset {} of {}", buffer.size(), offset + read,
                                              file.path()),
                       failure);
    }
    return read;
}

void fsync_file(const unique_fd& file)
{
    const int failure = run_checked(file_operation::fsync, file.path(), [&] { return ::fsync(file.get()); });
    if (failure != 0) {
        throw_io_error(detail::format_message("cannot fsync {}", file.path()), failure);
    }
    if (const auto hooks = current_hooks(); hooks != nullptr && hooks->after_flush) {
        struct stat status {};
        const std::uint64_t size = ::fstat(file.get(), &status) == 0 ? static_cast<std::uint64_t>(status.st_size) : 0;
        hooks->after_flush(file_operation::fsync, file.path(), 0, size);
    }
}
bool remove_file(const std::string& path)
{
    const int failure = run_checked(file_operation::remove, path, [&] {
        const int result = ::unlink(path.c_str());
        if (result == -1 && (errno == EISDIR || errno == EPERM)) {
            // Linux reports EISDIR for unlink(2) of a directory (POSIX allows EPERM).
            struct stat status {};
            if (::lstat(path.c_str(), &status) == 0 && S_ISDIR(status.st_mode)) {
                return ::rmdir(path.c_str());
            }
            errno = EISDIR;
        }
        return result;
    });
    if (failure == ENOENT) {
        return false;
    }
    if (failure != 0) {
        throw_io_error(detail::format_message("cannot remove {}", path), failure);
    }
    return true;
}

void rename_file(const std::string& from, const std::string& to)
{
    const int failure = run_checked(file_operation::rename, to, [&] { return ::rename(from.c_str(), to.c_str()); });
    if (failure != 0) {
        throw_io_error(detail::format_message("cannot rename {} to {}", from, to), failure);
    }
}

bool path_exists(const std::string& path)
{
    struct stat status {};
    const int failure = file_system::path_status(path, status, false);
    if (failure == 0) {
        return true;
    }
    if (failure == ENOENT) {
        return false;
    }
    throw_io_error(detail::format_message("cannot inspect {}", path), failure);
}

}  // namespace bufferqueue::detail
