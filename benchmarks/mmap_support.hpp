// What the persistent-topic benchmarks (bench_mmap, bench_shared) share: their 64-byte record and
// a scratch directory on the disk being measured.
#pragma once

#include "bufferqueue/mmap/detail/file.hpp"

#include <msgpack.hpp>
#include <nlohmann/json.hpp>
#include <stdlib.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace bufferqueue::bench {

/// A 64-byte record.
struct record {
    std::int64_t id = 0;
    std::int64_t timestamp = 0;
    std::array<double, 6> values{};

    MSGPACK_DEFINE(id, timestamp, values)
};
static_assert(sizeof(record) == 64);
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(record, id, timestamp, values)

/// Record `id`, with fixed values.
inline record make_record(std::int64_t id)
{
    return record{.id = id, .timestamp = id * 1000 + 7, .values = {0.5, 1.25, 2.0, -3.5, 1e-3, 12345.678}};
}

/// A scratch directory under $BUFFERQUEUE_BENCH_DIR (default: the working directory, which should be
/// on the disk being measured, not a tmpfs), removed afterwards.
class scratch_directory {
public:
    scratch_directory()
    {
        const char* base = std::getenv("BUFFERQUEUE_BENCH_DIR");
        std::string pattern =
            (std::filesystem::path(base != nullptr && *base != '\0' ? base : ".") / "bench-data-XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) {
            throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
        }
        path_ = pattern;
    }
    scratch_directory(const scratch_directory&) = delete;
    scratch_directory& operator=(const scratch_directory&) = delete;
    ~scratch_directory()
    {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    const std::filesystem::path& path() const noexcept { return path_; }

private:
    std::filesystem::path path_;
};

/// A preallocated file of `size` bytes in a scratch directory, mapped through the library's file
/// layer (detail/file.hpp): what the msync floors copy records into and flush.
struct mapped_scratch_file {
    explicit mapped_scratch_file(std::size_t size)
        : file(detail::open_file((directory.path() / "floor").string(), detail::open_mode::create_or_truncate)),
          region((detail::preallocate(file, 0, size), detail::map_file(file, size))), size(size)
    {
    }

    scratch_directory directory;
    detail::unique_fd file;
    detail::mapped_region region;
    std::size_t size;
};

}  // namespace bufferqueue::bench
