// Internal: checkpoint files in the file layer (file.hpp), written atomically and read back with
// validation (the byte layout is in checkpoint_format.hpp), and the same atomic write and bounded
// read for other small files (topic.options, topic_options_file.hpp).
#pragma once

#include "bufferqueue/mmap/detail/checkpoint_format.hpp"
#include "bufferqueue/mmap/file_access.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bufferqueue::detail {

/// Durably replaces the checkpoint at `path` with `value` in the format of checkpoint_format.hpp
/// (version 2: the value and a CRC-32C): writes the 16 bytes to `path + ".tmp"`, fsyncs it, renames
/// it over `path` and fsyncs the parent directory, so a reader sees either the old or the new value,
/// never a torn one; the new file gets `file_permissions(access)` less the umask. When it throws, the old checkpoint
/// (if any) is still in place unless the final directory fsync failed, in which case the new value may or may not
/// survive a power loss. Throws `error(errc::invalid_argument)` when `value` exceeds `max_checkpoint_value`,
/// `error(errc::io_error)` naming the path and the failed step otherwise.
void write_checkpoint(const std::string& path, std::uint64_t value, file_access access = file_access::owner);

/// Reads the checkpoint at `path` (format version 2, or a version-1 file of 8 bytes written by an
/// earlier release): `std::nullopt` when the file does not exist. Throws `error(errc::corrupt_data)`
/// naming the file when it is not a regular file, has neither size, fails its checksum, has an
/// unknown version or holds a negative value; `error(errc::io_error)` naming the path when it cannot
/// be read.
std::optional<std::uint64_t> read_checkpoint(const std::string& path);

/// Durably replaces the item position file at `path` with `position` (checkpoint_format.hpp), the way
/// `write_checkpoint` replaces a checkpoint (with the same `access`). Throws `error(errc::invalid_argument)` when the
/// offset exceeds `max_checkpoint_value`, `error(errc::io_error)` naming the path and the failed step.
void write_item_position(const std::string& path, log_position position, file_access access = file_access::owner);

/// Reads the item position file at `path`: `std::nullopt` when it does not exist. Throws
/// `error(errc::corrupt_data)` naming the file when it is not a regular file, has the wrong size,
/// fails its checksum, has an unknown version or a negative offset; `error(errc::io_error)` naming
/// the path when it cannot be read.
std::optional<log_position> read_item_position(const std::string& path);

/// Durably replaces the file at `path` with `bytes` the way `write_checkpoint` replaces a checkpoint
/// (`path + ".tmp"` written, fsynced, renamed over `path`, the parent directory fsynced), so a reader
/// sees the old or the new contents, never a mix. Throws `error(errc::io_error)` naming the path and
/// the failed step; the old file is then still in place unless the directory fsync failed. A new
/// file gets the mode of `access`.
void write_file_atomically(const std::string& path, std::span<const std::byte> bytes, file_access access);

/// The largest file `read_small_file` reads.
inline constexpr std::size_t max_small_file_size = 4096;

/// The contents of the regular file at `path`, of at most `max_small_file_size` bytes: `std::nullopt`
/// when it does not exist. Throws `error(errc::corrupt_data)` naming the file (as a `what` file,
/// e.g. "topic options") when it is not a regular file or is longer, `error(errc::io_error)` naming
/// the path when it cannot be read.
std::optional<std::vector<std::byte>> read_small_file(const std::string& path, std::string_view what);

}  // namespace bufferqueue::detail
