// Internal: memory mappings of files in the file layer (file.hpp).
#pragma once

#include "bufferqueue/mmap/detail/file_handle.hpp"

#include <cstddef>
#include <span>
#include <string>
#include <utility>

namespace bufferqueue::detail {

/// The memory page size (sysconf). Thread-safe; never allocates.
std::size_t page_size() noexcept;

/// How `map_file` maps a file.
enum class map_access {
    read_write,  ///< PROT_READ | PROT_WRITE; the file must be open read-write
    read_only,   ///< PROT_READ; the file may be open read-only; writing through the region faults
};

/// A shared mapping of the first `size()` bytes of a file (read-write unless made with
/// `map_access::read_only`, whose bytes must only be read). Move-only; unmaps when
/// destroyed. The mapping stays valid after the descriptor it was made from is closed.
/// Bytes of the mapping past the end of the file must not be touched (SIGBUS): size the file
/// (`truncate_file`) and reserve its blocks (`preallocate`) before writing through the mapping.
/// Thread-safety: several threads may read and write disjoint bytes and call `flush` at once.
class mapped_region {
public:
    /// An empty region (no mapping). Never allocates.
    mapped_region() noexcept = default;

    /// Takes over `other`'s mapping; `other` is left empty. Never throws.
    mapped_region(mapped_region&& other) noexcept;
    /// Unmaps the current mapping and takes over `other`'s. Never throws.
    mapped_region& operator=(mapped_region&& other) noexcept;
    mapped_region(const mapped_region&) = delete;
    mapped_region& operator=(const mapped_region&) = delete;

    /// Unmaps the region.
    ~mapped_region();

    /// The mapped bytes.
    std::span<std::byte> bytes() const noexcept { return {data_, size_}; }

    /// The first mapped byte (page-aligned), or nullptr when empty.
    std::byte* data() const noexcept { return data_; }

    /// The number of mapped bytes.
    std::size_t size() const noexcept { return size_; }

    /// The path of the mapped file.
    const std::string& path() const noexcept { return path_; }

    /// Writes bytes [offset, offset + length) of the region to the file and waits for the
    /// device (msync with MS_SYNC over the page-aligned range that covers them). A zero length
    /// does nothing. Throws `error(errc::invalid_argument)` when the range is outside the region
    /// and `error(errc::io_error)` naming the path and the range when msync fails.
    void flush(std::size_t offset, std::size_t length) const;

    /// Unmaps now; the region is empty afterwards. Never throws.
    void unmap() noexcept;

private:
    friend mapped_region map_file(const unique_fd& file, std::size_t length, map_access access);

    mapped_region(std::byte* data, std::size_t size, std::string path) noexcept
        : data_(data), size_(size), path_(std::move(path))
    {
    }

    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    std::string path_;
};

/// Maps the first `length` bytes of `file` shared (mmap with MAP_SHARED): read-write (PROT_READ |
/// PROT_WRITE; `file` must be open read-write) or, with `map_access::read_only`, PROT_READ alone
/// (`file` may be open read-only, so read-only files and mounts can be mapped). Throws
/// `error(errc::invalid_argument)` for a zero length and `error(errc::io_error)` naming the path
/// when mmap fails.
mapped_region map_file(const unique_fd& file, std::size_t length, map_access access = map_access::read_write);

}  // namespace bufferqueue::detail
