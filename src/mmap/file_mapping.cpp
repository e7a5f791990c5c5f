#include "bufferqueue/mmap/detail/file_mapping.hpp"

#include "file_system_call.hpp"

#include "bufferqueue/detail/message.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <utility>

namespace bufferqueue::detail {

using file_system::report_flush;
using file_system::run_checked;
using file_system::throw_io_error;

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
        throw error(errc::invalid_argument,
                    detail::format_message(
                        "cannot flush bytes [{}, {} + {}) of the {}-byte mapping of {}: the range is outside "
                        "the mapping",
                        offset, offset, length, size_, path_));
    }
    if (length == 0) {
        return;
    }
    const std::size_t start = offset - offset % page_size();
    const std::size_t end = offset + length;
    const int failure =
        run_checked(file_operation::msync, path_, [&] { return ::msync(data_ + start, end - start, MS_SYNC); });
    if (failure != 0) {
        throw_io_error(detail::format_message("cannot msync bytes [{}, {}) of {}", start, end, path_), failure);
    }
    report_flush(file_operation::msync, path_, start, end - start);
}

mapped_region map_file(const unique_fd& file, std::size_t length, map_access access)
{
    if (length == 0) {
        throw error(errc::invalid_argument, detail::format_message("cannot map 0 bytes of {}", file.path()));
    }
    void* address = MAP_FAILED;
    const int protection = access == map_access::read_only ? PROT_READ : PROT_READ | PROT_WRITE;
    const int failure = run_checked(file_operation::map, file.path(), [&] {
        address = ::mmap(nullptr, length, protection, MAP_SHARED, file.get(), 0);
        return address == MAP_FAILED ? -1 : 0;
    });
    if (failure != 0) {
        throw_io_error(detail::format_message("cannot map {} bytes of {}", length, file.path()), failure);
    }
    return mapped_region(static_cast<std::byte*>(address), length, file.path());
}

}  // namespace bufferqueue::detail
