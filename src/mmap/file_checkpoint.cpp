#include "bufferqueue/mmap/detail/file_checkpoint.hpp"

#include "bufferqueue/mmap/detail/file_directory.hpp"
#include "bufferqueue/mmap/detail/file_handle.hpp"

#include "file_system_call.hpp"

#include "bufferqueue/error.hpp"

#include "bufferqueue/detail/message.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

namespace bufferqueue::detail {

using file_system::run_checked;
using file_system::throw_io_error;

namespace {

std::string parent_directory(const std::string& path)
{
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    return parent.empty() ? std::string(".") : parent.string();
}

// Durably replaces `path` with `bytes`: `path + ".tmp"` written, fsynced, renamed over `path`, then
// the parent directory fsynced. The new file gets `file_permissions(access)` less the umask.
void write_atomically(const std::string& path, std::span<const std::byte> bytes, file_access access)
{
    const std::string temporary_path = path + std::string(temporary_suffix);
    {
        unique_fd file = open_file(temporary_path, open_mode::create_or_truncate, access);
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

// The contents of the small regular file at `path` (`what` names its kind in errors), when it is at
// most `Limit` bytes long; `sizes` describes the valid sizes for the error of a longer one.
template <std::size_t Limit>
std::optional<std::vector<std::byte>> read_small_file(const std::string& path, std::string_view what,
                                                      const std::string& sizes)
{
    std::optional<unique_fd> file = try_open_file(path, open_mode::read_only);
    if (!file) {
        return std::nullopt;
    }
    struct stat status {};
    const int failure = run_checked(file_operation::size, path, [&] { return ::fstat(file->get(), &status); });
    if (failure != 0) {
        throw_io_error(detail::format_message("cannot get the size of {}", path), failure);
    }
    if (!S_ISREG(status.st_mode)) {
        throw error(errc::corrupt_data, detail::format_message("{} file {} is not a regular file", what, path));
    }
    // One byte more than the largest format, so a longer file reads as too long.
    std::array<std::byte, Limit + 1> bytes{};
    const auto size = static_cast<std::uint64_t>(status.st_size);
    std::size_t read = 0;
    if (size <= Limit) {
        read = read_at(*file, 0, bytes);
    }
    if (size > Limit || read != size) {
        throw error(errc::corrupt_data,
                    detail::format_message("{} file {} is {} bytes long; {}", what, path, size, sizes));
    }
    return std::vector<std::byte>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(read));
}

}  // namespace

void write_checkpoint(const std::string& path, std::uint64_t value, file_access access)
{
    if (value > max_checkpoint_value) {
        throw error(errc::invalid_argument,
                    detail::format_message(
                        "cannot write checkpoint {}: the value {} is larger than the largest checkpoint value {}", path,
                        value, max_checkpoint_value));
    }
    write_atomically(path, encode_checkpoint(value), access);
}

std::optional<std::uint64_t> read_checkpoint(const std::string& path)
{
    const auto bytes = read_small_file<checkpoint_size>(
        path, "checkpoint",
        detail::format_message("a checkpoint is {} bytes (format version 2) or {} bytes (version 1)", checkpoint_size,
                               checkpoint_v1_size));
    if (!bytes) {
        return std::nullopt;
    }
    checkpoint_decoding decoded = decode_checkpoint(*bytes);
    if (auto* problem = std::get_if<std::string>(&decoded)) {
        throw error(errc::corrupt_data, detail::format_message("checkpoint file {} {}", path, *problem));
    }
    return std::get<std::uint64_t>(decoded);
}

void write_item_position(const std::string& path, log_position position, file_access access)
{
    if (position.offset > max_checkpoint_value) {
        throw error(
            errc::invalid_argument,
            detail::format_message("cannot write item position {}: the offset {} is too large", path, position.offset));
    }
    write_atomically(path, encode_item_position(position), access);
}

std::optional<log_position> read_item_position(const std::string& path)
{
    const auto bytes = read_small_file<item_position_size>(
        path, "item position", detail::format_message("an item position is {} bytes", item_position_size));
    if (!bytes) {
        return std::nullopt;
    }
    item_position_decoding decoded = decode_item_position(*bytes);
    if (auto* problem = std::get_if<std::string>(&decoded)) {
        throw error(errc::corrupt_data, detail::format_message("item position file {} {}", path, *problem));
    }
    return std::get<log_position>(decoded);
}

void write_file_atomically(const std::string& path, std::span<const std::byte> bytes, file_access access)
{
    write_atomically(path, bytes, access);
}

std::optional<std::vector<std::byte>> read_small_file(const std::string& path, std::string_view what)
{
    return read_small_file<max_small_file_size>(
        path, what, detail::format_message("the largest such file is {} bytes", max_small_file_size));
}

}  // namespace bufferqueue::detail
