#include "bufferqueue/storage/mmap/detail/file.hpp"

#include "bufferqueue/error.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <filesystem>
#include <mutex>
#include <system_error>

namespace bufferqueue::detail {
namespace {

// ---- hooks ----------------------------------------------------------------------------------

std::atomic<bool> hooks_installed{false};

std::mutex& hooks_mutex()
{
    static std::mutex instance;
    return instance;
}

std::shared_ptr<const file_hooks>& hooks_storage()
{
    static std::shared_ptr<const file_hooks> instance;
    return instance;
}

std::shared_ptr<const file_hooks> current_hooks()
{
    if (!hooks_installed.load(std::memory_order_relaxed)) {
        return nullptr;
    }
    const std::lock_guard lock(hooks_mutex());
    return hooks_storage();
}

// Returns the errno a hook wants injected into `operation` on `path`, or 0.
int injected_error(file_operation operation, const std::string& path)
{
    const auto hooks = current_hooks();
    if (hooks == nullptr || !hooks->before_operation) {
        return 0;
    }
    return hooks->before_operation(operation, path);
}

void report_flush(file_operation operation, const std::string& path, std::uint64_t offset, std::uint64_t length)
{
    const auto hooks = current_hooks();
    if (hooks != nullptr && hooks->after_flush) {
        hooks->after_flush(operation, path, offset, length);
    }
}

// ---- errors ---------------------------------------------------------------------------------

std::string error_text(int error_number)
{
    return std::system_category().message(error_number);
}

[[noreturn]] void throw_io_error(const std::string& what, int error_number)
{
    throw error(errc::io_error, what + ": " + error_text(error_number));
}

// Runs `call` (a system call returning -1 and setting errno on failure) unless a hook injects an
// error, retrying on EINTR. Returns 0 on success or the error number.
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

std::string parent_directory(const std::string& path)
{
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    return parent.empty() ? std::string(".") : parent.string();
}

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

// Opens `path`; returns the descriptor or -errno.
int open_descriptor(const std::string& path, int flags)
{
    int descriptor = -1;
    const int failure = run_checked(file_operation::open, path, [&] {
        descriptor = ::open(path.c_str(), flags, 0666);
        return descriptor;
    });
    return failure != 0 ? -failure : descriptor;
}

// Removes `path` and, for a directory, everything inside it. Returns false when nothing existed.
bool remove_recursively(const std::string& path)
{
    struct stat status {};
    if (::lstat(path.c_str(), &status) == -1) {
        if (errno == ENOENT) {
            return false;
        }
        throw_io_error("cannot inspect " + path, errno);
    }
    if (S_ISDIR(status.st_mode)) {
        for (const directory_entry& entry : list_directory(path)) {
            remove_recursively(path + "/" + entry.name);
        }
    }
    return remove_file(path);
}

}  // namespace

// ---- hooks ----------------------------------------------------------------------------------

std::string_view operation_name(file_operation operation) noexcept
{
    switch (operation) {
    case file_operation::open: return "open";
    case file_operation::read: return "read";
    case file_operation::write: return "write";
    case file_operation::preallocate: return "preallocate";
    case file_operation::truncate: return "truncate";
    case file_operation::size: return "size";
    case file_operation::map: return "map";
    case file_operation::msync: return "msync";
    case file_operation::fsync: return "fsync";
    case file_operation::fsync_directory: return "fsync_directory";
    case file_operation::rename: return "rename";
    case file_operation::remove: return "remove";
    case file_operation::make_directory: return "make_directory";
    case file_operation::list_directory: return "list_directory";
    case file_operation::lock: return "lock";
    }
    return "unknown";
}

std::shared_ptr<const file_hooks> install_file_hooks(std::shared_ptr<const file_hooks> hooks)
{
    const std::lock_guard lock(hooks_mutex());
    const bool installed = hooks != nullptr;
    std::swap(hooks_storage(), hooks);
    hooks_installed.store(installed, std::memory_order_relaxed);
    return hooks;
}

// ---- unique_fd ------------------------------------------------------------------------------

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
        throw_io_error("cannot close " + path_, errno);
    }
}

int unique_fd::release() noexcept
{
    return std::exchange(descriptor_, -1);
}

// ---- files ----------------------------------------------------------------------------------

unique_fd open_file(const std::string& path, open_mode mode)
{
    const int result = open_descriptor(path, open_flags(mode));
    if (result < 0) {
        throw_io_error("cannot open " + path, -result);
    }
    return unique_fd(result, path);
}

std::optional<unique_fd> try_open_file(const std::string& path, open_mode mode)
{
    const int result = open_descriptor(path, open_flags(mode));
    if (result == -ENOENT) {
        return std::nullopt;
    }
    if (result < 0) {
        throw_io_error("cannot open " + path, -result);
    }
    return unique_fd(result, path);
}

std::uint64_t file_size(const unique_fd& file)
{
    struct stat status {};
    const int failure = run_checked(file_operation::size, file.path(), [&] { return ::fstat(file.get(), &status); });
    if (failure != 0) {
        throw_io_error("cannot get the size of " + file.path(), failure);
    }
    return static_cast<std::uint64_t>(status.st_size);
}

void truncate_file(const unique_fd& file, std::uint64_t length)
{
    const int failure = run_checked(file_operation::truncate, file.path(),
                                    [&] { return ::ftruncate(file.get(), static_cast<off_t>(length)); });
    if (failure != 0) {
        throw_io_error("cannot set the size of " + file.path() + " to " + std::to_string(length) + " bytes", failure);
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
    const std::string what = "cannot preallocate " + std::to_string(length) + " bytes at offset " +
                             std::to_string(offset) + " of " + file.path();
    if (failure == ENOSPC || failure == EDQUOT) {
        throw error(errc::io_error, what + ": the disk is full (" + error_text(failure) + ")");
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
        throw_io_error("cannot write " + std::to_string(bytes.size()) + " bytes at offset " +
                           std::to_string(offset + written) + " of " + file.path(),
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
        throw_io_error("cannot read " + std::to_string(buffer.size()) + " bytes at offset " +
                           std::to_string(offset + read) + " of " + file.path(),
                       failure);
    }
    return read;
}

void fsync_file(const unique_fd& file)
{
    const int failure = run_checked(file_operation::fsync, file.path(), [&] { return ::fsync(file.get()); });
    if (failure != 0) {
        throw_io_error("cannot fsync " + file.path(), failure);
    }
    if (const auto hooks = current_hooks(); hooks != nullptr && hooks->after_flush) {
        struct stat status {};
        const std::uint64_t size = ::fstat(file.get(), &status) == 0 ? static_cast<std::uint64_t>(status.st_size) : 0;
        hooks->after_flush(file_operation::fsync, file.path(), 0, size);
    }
}

void fsync_directory(const std::string& directory)
{
    const int result = open_descriptor(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (result < 0) {
        throw_io_error("cannot open directory " + directory + " to fsync it", -result);
    }
    const unique_fd handle(result, directory);
    const int failure = run_checked(file_operation::fsync_directory, directory, [&] { return ::fsync(result); });
    if (failure != 0) {
        throw_io_error("cannot fsync directory " + directory, failure);
    }
    report_flush(file_operation::fsync_directory, directory, 0, 0);
}

bool make_directories(const std::string& directory)
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
    if (::stat(path.c_str(), &status) == 0) {
        if (!S_ISDIR(status.st_mode)) {
            throw_io_error("cannot create directory " + path, ENOTDIR);
        }
        return false;
    }
    const std::filesystem::path parent = target.parent_path();
    if (!parent.empty() && parent != target) {
        make_directories(parent.string());
    }
    const int failure = run_checked(file_operation::make_directory, path, [&] { return ::mkdir(path.c_str(), 0777); });
    if (failure == EEXIST) {
        if (::stat(path.c_str(), &status) == 0 && S_ISDIR(status.st_mode)) {
            return false;  // created concurrently by someone else
        }
        throw_io_error("cannot create directory " + path, ENOTDIR);
    }
    if (failure != 0) {
        throw_io_error("cannot create directory " + path, failure);
    }
    fsync_directory(parent.empty() ? std::string(".") : parent.string());
    return true;
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
        throw_io_error("cannot remove " + path, failure);
    }
    return true;
}

void rename_file(const std::string& from, const std::string& to)
{
    const int failure = run_checked(file_operation::rename, to, [&] { return ::rename(from.c_str(), to.c_str()); });
    if (failure != 0) {
        throw_io_error("cannot rename " + from + " to " + to, failure);
    }
}

bool path_exists(const std::string& path)
{
    struct stat status {};
    if (::lstat(path.c_str(), &status) == 0) {
        return true;
    }
    if (errno == ENOENT) {
        return false;
    }
    throw_io_error("cannot inspect " + path, errno);
}

std::vector<directory_entry> list_directory(const std::string& directory)
{
    if (const int injected = injected_error(file_operation::list_directory, directory); injected != 0) {
        throw_io_error("cannot list directory " + directory, injected);
    }
    const std::unique_ptr<DIR, int (*)(DIR*)> handle(::opendir(directory.c_str()), &::closedir);
    if (handle == nullptr) {
        throw_io_error("cannot list directory " + directory, errno);
    }
    std::vector<directory_entry> entries;
    while (true) {
        errno = 0;
        const dirent* entry = ::readdir(handle.get());
        if (entry == nullptr) {
            if (errno != 0) {
                throw_io_error("cannot list directory " + directory, errno);
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
            if (::lstat(path.c_str(), &status) == -1) {
                if (errno == ENOENT) {
                    continue;  // removed while we were listing
                }
                throw_io_error("cannot inspect " + path, errno);
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

// ---- memory mapping -------------------------------------------------------------------------

std::size_t page_size() noexcept
{
    static const std::size_t size = [] {
        const long value = ::sysconf(_SC_PAGESIZE);
        return value > 0 ? static_cast<std::size_t>(value) : std::size_t{4096};
    }();
    return size;
}

mapped_region::mapped_region(mapped_region&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)), path_(std::move(other.path_))
{
}

mapped_region& mapped_region::operator=(mapped_region&& other) noexcept
{
    if (this != &other) {
        unmap();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        path_ = std::move(other.path_);
    }
    return *this;
}

mapped_region::~mapped_region()
{
    unmap();
}

void mapped_region::unmap() noexcept
{
    if (data_ != nullptr) {
        ::munmap(data_, size_);
        data_ = nullptr;
        size_ = 0;
    }
}

void mapped_region::flush(std::size_t offset, std::size_t length) const
{
    if (offset > size_ || length > size_ - offset) {
        throw error(errc::invalid_argument, "cannot flush bytes [" + std::to_string(offset) + ", " +
                                                std::to_string(offset) + " + " + std::to_string(length) + ") of the " +
                                                std::to_string(size_) + "-byte mapping of " + path_ +
                                                ": the range is outside the mapping");
    }
    if (length == 0) {
        return;
    }
    const std::size_t start = offset - offset % page_size();
    const std::size_t end = offset + length;
    const int failure =
        run_checked(file_operation::msync, path_, [&] { return ::msync(data_ + start, end - start, MS_SYNC); });
    if (failure != 0) {
        throw_io_error("cannot msync bytes [" + std::to_string(start) + ", " + std::to_string(end) + ") of " + path_,
                       failure);
    }
    report_flush(file_operation::msync, path_, start, end - start);
}

mapped_region map_file(const unique_fd& file, std::size_t length)
{
    if (length == 0) {
        throw error(errc::invalid_argument, "cannot map 0 bytes of " + file.path());
    }
    void* address = MAP_FAILED;
    const int failure = run_checked(file_operation::map, file.path(), [&] {
        address = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, file.get(), 0);
        return address == MAP_FAILED ? -1 : 0;
    });
    if (failure != 0) {
        throw_io_error("cannot map " + std::to_string(length) + " bytes of " + file.path(), failure);
    }
    return mapped_region(static_cast<std::byte*>(address), length, file.path());
}

// ---- directory lock -------------------------------------------------------------------------

directory_lock::directory_lock(const std::string& directory)
    : directory_(directory),
      lock_file_(open_file(directory + "/" + std::string(lock_file_name), open_mode::create_or_open))
{
    const int failure = run_checked(file_operation::lock, lock_file_.path(),
                                    [&] { return ::flock(lock_file_.get(), LOCK_EX | LOCK_NB); });
    if (failure == EWOULDBLOCK) {
        throw error(errc::io_error, "cannot open " + directory +
                                        ": the directory is already open by another queue (in this process or "
                                        "another one holding the lock on " +
                                        lock_file_.path() + ")");
    }
    if (failure != 0) {
        throw_io_error("cannot lock " + lock_file_.path(), failure);
    }
}

// ---- checkpoints ----------------------------------------------------------------------------

void write_checkpoint(const std::string& path, std::uint64_t value)
{
    if (value > max_checkpoint_value) {
        throw error(errc::invalid_argument, "cannot write checkpoint " + path + ": the value " + std::to_string(value) +
                                                " is larger than the largest checkpoint value " +
                                                std::to_string(max_checkpoint_value));
    }
    const std::array<std::byte, checkpoint_size> bytes = encode_checkpoint(value);
    const std::string temporary_path = path + std::string(temporary_suffix);
    {
        unique_fd file = open_file(temporary_path, open_mode::create_or_truncate);
        try {
            write_at(file, 0, bytes);
            fsync_file(file);
            file.close();
            rename_file(temporary_path, path);
        } catch (...) {
            ::unlink(temporary_path.c_str());  // best effort; leftovers are removed at the next open
            throw;
        }
    }
    fsync_directory(parent_directory(path));
}

std::optional<std::uint64_t> read_checkpoint(const std::string& path)
{
    std::optional<unique_fd> file = try_open_file(path, open_mode::read_only);
    if (!file) {
        return std::nullopt;
    }
    struct stat status {};
    const int failure = run_checked(file_operation::size, path, [&] { return ::fstat(file->get(), &status); });
    if (failure != 0) {
        throw_io_error("cannot get the size of " + path, failure);
    }
    if (!S_ISREG(status.st_mode)) {
        throw error(errc::corrupt_data, "checkpoint file " + path + " is not a regular file");
    }
    // One byte more than the largest format, so a longer file reads as too long.
    std::array<std::byte, checkpoint_size + 1> bytes{};
    const auto size = static_cast<std::uint64_t>(status.st_size);
    std::size_t read = 0;
    if (size <= checkpoint_size) {
        read = read_at(*file, 0, bytes);
    }
    if (size > checkpoint_size || read != size) {
        throw error(errc::corrupt_data, "checkpoint file " + path + " is " + std::to_string(size) +
                                            " bytes long; a checkpoint is " + std::to_string(checkpoint_size) +
                                            " bytes (format version 2) or " + std::to_string(checkpoint_v1_size) +
                                            " bytes (version 1)");
    }
    checkpoint_decoding decoded = decode_checkpoint(std::span<const std::byte>(bytes.data(), read));
    if (auto* problem = std::get_if<std::string>(&decoded)) {
        throw error(errc::corrupt_data, "checkpoint file " + path + " " + *problem);
    }
    return std::get<std::uint64_t>(decoded);
}

}  // namespace bufferqueue::detail
