#include "bufferqueue/mmap/detail/file_hooks.hpp"

#include "file_system_call.hpp"

#include "bufferqueue/detail/message.hpp"

#include <fcntl.h>

#include <atomic>
#include <mutex>
#include <system_error>

namespace bufferqueue::detail {

namespace {

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

}  // namespace

namespace file_system {

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

std::string error_text(int error_number)
{
    return std::system_category().message(error_number);
}

[[noreturn]] void throw_io_error(const std::string& what, int error_number)
{
    throw error(errc::io_error, detail::format_message("{}: {}", what, error_text(error_number)));
}

int open_descriptor(const std::string& path, int flags, unsigned permissions)
{
    int descriptor = -1;
    const int failure = run_checked(file_operation::open, path, [&] {
        descriptor = ::open(path.c_str(), flags, static_cast<mode_t>(permissions));
        return descriptor;
    });
    return failure != 0 ? -failure : descriptor;
}

int path_status(const std::string& path, struct stat& status, bool follow_links)
{
    return run_checked(file_operation::status, path,
                       [&] { return follow_links ? ::stat(path.c_str(), &status) : ::lstat(path.c_str(), &status); });
}

}  // namespace file_system

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
    case file_operation::seek_data: return "seek_data";
    case file_operation::status: return "status";
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

}  // namespace bufferqueue::detail
