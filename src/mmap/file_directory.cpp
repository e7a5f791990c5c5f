#include "bufferqueue/mmap/detail/file_directory.hpp"

#include "file_system_call.hpp"

#include "bufferqueue/detail/message.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <memory>

namespace bufferqueue::detail {

using file_system::injected_error;
using file_system::open_descriptor;
using file_system::path_status;
using file_system::report_flush;
using file_system::run_checked;
using file_system::throw_io_error;

namespace {

// Removes `path` and, for a directory, everything inside it. Returns false when nothing existed.
bool remove_recursively(const std::string& path)
{
    struct stat status {};
    if (const int failure = path_status(path, status, false); failure != 0) {
        if (failure == ENOENT) {
            return false;
        }
        throw_io_error(detail::format_message("cannot inspect {}", path), failure);
    }
    if (S_ISDIR(status.st_mode)) {
        for (const directory_entry& entry : list_directory(path)) {
            remove_recursively(path + "/" + entry.name);
        }
    }
    return remove_file(path);
}

}  // namespace

void fsync_directory(const std::string& directory)
{
    const int result = open_descriptor(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (result < 0) {
        throw_io_error(detail::format_message("cannot open directory {} to fsync it", directory), -result);
    }
    const unique_fd handle(result, directory);
    const int failure = run_checked(file_operation::fsync_directory, directory, [&] { return ::fsync(result); });
    if (failure != 0) {
        throw_io_error(detail::format_message("cannot fsync directory {}", directory), failure);
    }
    report_flush(file_operation::fsync_directory, directory, 0, 0);
}

bool make_directories(const std::string& directory, file_access access)
{
    std::filesystem::path target(directory);
    if (!target.has_filename() && target.has_parent_path()) {
        target = target.parent_path();  // "a/b/" names the directory "a/b"
    }
    const std::string path = target.string();
    if (path.empty()) {
        return false;
    }
    struct stat status {};
    if (const int failure = path_status(path, status, true); failure == 0) {
        if (!S_ISDIR(status.st_mode)) {
            throw_io_error(detail::format_message("cannot create directory {}", path), ENOTDIR);
        }
        return false;
    } else if (failure != ENOENT && failure != ENOTDIR) {
        // ENOTDIR: a file is in the way higher up; creating the parents below names it.
        throw_io_error(detail::format_message("cannot inspect {}", path), failure);
    }
    const std::filesystem::path parent = target.parent_path();
    if (!parent.empty() && parent != target) {
        make_directories(parent.string(), access);
    }
    const int failure = run_checked(file_operation::make_directory, path, [&] {
        return ::mkdir(path.c_str(), static_cast<mode_t>(folder_permissions(access)));
    });
    if (failure == EEXIST) {
        if (path_status(path, status, true) == 0 && S_ISDIR(status.st_mode)) {
            return false;  // created concurrently by someone else
        }
        throw_io_error(detail::format_message("cannot create directory {}", path), ENOTDIR);
    }
    if (failure != 0) {
        throw_io_error(detail::format_message("cannot create directory {}", path), failure);
    }
    fsync_directory(parent.empty() ? std::string(".") : parent.string());
    return true;
}

std::vector<directory_entry> list_directory(const std::string& directory)
{
    if (const int injected = injected_error(file_operation::list_directory, directory); injected != 0) {
        throw_io_error(detail::format_message("cannot list directory {}", directory), injected);
    }
    const std::unique_ptr<DIR, int (*)(DIR*)> handle(::opendir(directory.c_str()), &::closedir);
    if (handle == nullptr) {
        const int error_number = errno;  // read before the message is built: building it may set errno
        throw_io_error(detail::format_message("cannot list directory {}", directory), error_number);
    }
    std::vector<directory_entry> entries;
    while (true) {
        errno = 0;
        const dirent* entry = ::readdir(handle.get());
        if (entry == nullptr) {
            if (errno != 0) {
                const int error_number = errno;  // read before the message is built: building it may set errno
                throw_io_error(detail::format_message("cannot list directory {}", directory), error_number);
            }
            break;
        }
        const std::string_view name(entry->d_name);
        if (name == "." || name == "..") {
            continue;
        }
        entry_kind kind = entry_kind::other;
        unsigned char type = entry->d_type;
        if (type == DT_UNKNOWN) {
            struct stat status {};
            const std::string path = directory + "/" + std::string(name);
            if (const int failure = path_status(path, status, false); failure != 0) {
                if (failure == ENOENT) {
                    continue;  // removed while we were listing
                }
                throw_io_error(detail::format_message("cannot inspect {}", path), failure);
            }
            type = S_ISREG(status.st_mode) ? DT_REG : S_ISDIR(status.st_mode) ? DT_DIR : DT_UNKNOWN;
        }
        if (type == DT_REG) {
            kind = entry_kind::file;
        } else if (type == DT_DIR) {
            kind = entry_kind::directory;
        }
        entries.push_back(directory_entry{std::string(name), kind});
    }
    std::sort(entries.begin(), entries.end(),
              [](const directory_entry& left, const directory_entry& right) { return left.name < right.name; });
    return entries;
}

std::size_t remove_temporary_files(const std::string& directory)
{
    if (!path_exists(directory)) {
        return 0;
    }
    std::size_t removed = 0;
    for (const directory_entry& entry : list_directory(directory)) {
        if (entry.name.size() > temporary_suffix.size() && entry.name.ends_with(temporary_suffix)) {
            if (remove_recursively(directory + "/" + entry.name)) {
                ++removed;
            }
        }
    }
    return removed;
}

directory_lock::directory_lock(const std::string& directory, file_access access)
    : lock_file_(open_file(directory + "/" + std::string(lock_file_name), open_mode::create_or_open, access))
{
    const int failure = run_checked(file_operation::lock, lock_file_.path(),
                                    [&] { return ::flock(lock_file_.get(), LOCK_EX | LOCK_NB); });
    if (failure == EWOULDBLOCK) {
        throw error(errc::io_error,
                    detail::format_message("cannot open {}: the directory is already open by another queue (in "
                                           "this process or another one holding the lock on {})",
                                           directory, lock_file_.path()));
    }
    if (failure != 0) {
        throw_io_error(detail::format_message("cannot lock {}", lock_file_.path()), failure);
    }
}

std::optional<unique_fd> try_lock_file(const std::string& path, file_access access)
{
    unique_fd file = open_file(path, open_mode::create_or_open, access);
    const int failure =
        run_checked(file_operation::lock, file.path(), [&] { return ::flock(file.get(), LOCK_EX | LOCK_NB); });
    if (failure == EWOULDBLOCK) {
        return std::nullopt;
    }
    if (failure != 0) {
        throw_io_error(detail::format_message("cannot lock {}", file.path()), failure);
    }
    return file;
}

shared_directory_lock::shared_directory_lock(const std::string& directory, file_access access)
    : open_lock_file_(open_file(directory + "/" + std::string(open_lock_file_name), open_mode::create_or_open, access)),
      lock_file_(open_file(directory + "/" + std::string(lock_file_name), open_mode::create_or_open, access))
{
    // Blocking: another shared queue holds it only while it opens (and the kernel drops it if that
    // process dies meanwhile).
    if (const int failure = run_checked(file_operation::lock, open_lock_file_.path(),
                                        [&] { return ::flock(open_lock_file_.get(), LOCK_EX); });
        failure != 0) {
        throw_io_error(detail::format_message("cannot lock {}", open_lock_file_.path()), failure);
    }
    // Exclusive first, to learn whether anyone else holds the directory, then shared at once. A
    // conversion is not atomic, but every other shared queue waits for the open lock and an
    // exclusive one does not wait at all, so the only thing that can happen in between is an
    // exclusive queue taking the directory - which the shared attempt then reports.
    const int exclusive = run_checked(file_operation::lock, lock_file_.path(),
                                      [&] { return ::flock(lock_file_.get(), LOCK_EX | LOCK_NB); });
    if (exclusive != 0 && exclusive != EWOULDBLOCK) {
        throw_io_error(detail::format_message("cannot lock {}", lock_file_.path()), exclusive);
    }
    first_ = exclusive == 0;
    const int shared = run_checked(file_operation::lock, lock_file_.path(),
                                   [&] { return ::flock(lock_file_.get(), LOCK_SH | LOCK_NB); });
    if (shared == EWOULDBLOCK) {
        throw error(errc::io_error,
                    detail::format_message(
                        "cannot open {} process-shared: the directory is already open by a queue that is not "
                        "process-shared (in this process or another one holding the lock on {})",
                        directory, lock_file_.path()));
    }
    if (shared != 0) {
        throw_io_error(detail::format_message("cannot lock {}", lock_file_.path()), shared);
    }
}

void shared_directory_lock::finish_opening() noexcept
{
    open_lock_file_ = unique_fd{};  // closing the descriptor releases its flock
}

}  // namespace bufferqueue::detail
