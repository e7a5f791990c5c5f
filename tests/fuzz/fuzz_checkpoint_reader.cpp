// libFuzzer target: the checkpoint reader and the consumer-group folder names, the two parsers of
// small files and names a partition folder holds. A checkpoint file with arbitrary contents reads
// as its value or throws corrupt_data naming the file: a value is accepted only from an 8-byte
// version-1 file (its little-endian bytes) or from exactly the 16 bytes a version-2 write of that
// value produces (so a checksum that fails, or any other change, is caught); a folder name unescapes to a group whose
// escaping gives the same folder name back, or throws.
#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/group_path.hpp"
#include "bufferqueue/mmap/detail/segment_format.hpp"

#include "fuzz_support.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>

namespace {

std::string scratch_file()
{
    const char* shm = "/dev/shm";
    const std::filesystem::path base =
        std::filesystem::is_directory(shm) ? std::filesystem::path(shm) : std::filesystem::temp_directory_path();
    return (base / ("bufferqueue-fuzz-checkpoint-" + std::to_string(::getpid()))).string();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    namespace bq = bufferqueue;
    namespace detail = bufferqueue::detail;
    using bq::fuzz::require;
    static const std::string path = scratch_file();
    {
        const detail::unique_fd file = detail::open_file(path, detail::open_mode::create_or_truncate);
        detail::write_at(file, 0, bq::fuzz::as_bytes(data, size));
    }
    try {
        const std::optional<std::uint64_t> value = detail::read_checkpoint(path);
        require(value.has_value(), "an existing checkpoint file read as missing");
        const auto* bytes = reinterpret_cast<const std::byte*>(data);
        if (size == detail::checkpoint_v1_size) {
            require(*value == detail::load_u64_little_endian(bytes),
                    "a version-1 checkpoint read back as something other than its 8 little-endian bytes");
        } else {
            const auto written = detail::encode_checkpoint(*value);
            require(size == written.size() && std::equal(written.begin(), written.end(), bytes),
                    "a checkpoint was accepted that is not what writing its value produces");
        }
        require(*value <= detail::max_checkpoint_value, "a negative checkpoint was accepted");
    } catch (const bq::error& failure) {
        bq::fuzz::require_corrupt_data(failure);
        require(std::string(failure.what()).find(path) != std::string::npos, "the error does not name the file");
    }

    const std::string name(reinterpret_cast<const char*>(data), size);
    try {
        const std::string group = detail::unescape_group_name(name);
        require(detail::escape_group_name(group) == name, "a folder name does not round-trip through its group");
    } catch (const bq::error& failure) {
        require(failure.code() == bq::errc::invalid_argument || failure.code() == bq::errc::corrupt_data,
                failure.what());
    }
    try {
        const std::string folder = detail::escape_group_name(name);
        require(detail::unescape_group_name(folder) == name, "a group does not round-trip through its folder name");
        require(folder != "." && folder != ".." && folder.find('/') == std::string::npos &&
                    folder.find('\0') == std::string::npos,
                "a group's folder name escapes the offsets folder");
    } catch (const bq::error& failure) {
        // Only an empty name or one whose folder name would be too long is refused.
        require(failure.code() == bq::errc::invalid_argument, failure.what());
    }
    return 0;
}
