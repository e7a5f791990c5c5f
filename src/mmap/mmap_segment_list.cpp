#include "bufferqueue/mmap/detail/mmap_segment_list.hpp"

#include "bufferqueue/error.hpp"

#include "bufferqueue/detail/message.hpp"

#include <string>

namespace bufferqueue::detail {

mmap_segment_file& mmap_segment_list::at(std::uint64_t index) const
{
    if (index < first_index_ || index - first_index_ >= segments_.size()) {
        throw error(errc::corrupt_data,
                    detail::format_message("{}: segment {} is not retained (retained: {} to {})", files_.description,
                                           index, first_index_, first_index_ + segments_.size()));
    }
    return *segments_[index - first_index_];
}

std::uint64_t mmap_segment_list::normalize(std::uint64_t offset, std::uint64_t log_end) const noexcept
{
    const segment_position at = split_offset(offset, files_.segment_size);
    if (at.segment_index < first_index_ || at.segment_index - first_index_ >= segments_.size()) {
        return offset;
    }
    return normalize_offset(segments_[at.segment_index - first_index_]->region.bytes(), at.segment_index, at.position,
                            log_end);
}

std::optional<std::uint64_t> mmap_segment_list::items_at(std::uint64_t offset) const noexcept
{
    const std::shared_lock lock(mutex_);
    const segment_position at = split_offset(offset, files_.segment_size);
    if (at.segment_index < first_index_ || at.segment_index - first_index_ >= segments_.size()) {
        return std::nullopt;
    }
    const mmap_segment_file& segment = *segments_[at.segment_index - first_index_];
    const scan_result scanned = scan_segment(segment.region.bytes(), segment_header_size, at.position);
    if (scanned.end_position != at.position) {
        return std::nullopt;
    }
    return segment.first_item + scanned.record_count;
}

mmap_segment_file& mmap_segment_list::append(std::unique_ptr<mmap_segment_file> segment)
{
    const std::unique_lock lock(mutex_);
    segments_.push_back(std::move(segment));
    return *segments_.back();
}

std::vector<std::unique_ptr<mmap_segment_file>> mmap_segment_list::release_below(std::uint64_t index)
{
    std::vector<std::unique_ptr<mmap_segment_file>> removed;
    const std::unique_lock lock(mutex_);
    while (first_index_ < index && segments_.size() > 1) {
        removed.push_back(std::move(segments_.front()));
        segments_.pop_front();
        ++first_index_;
    }
    return removed;
}

std::vector<std::unique_ptr<mmap_segment_file>>
mmap_segment_list::restart_at(std::unique_ptr<mmap_segment_file> segment)
{
    std::vector<std::unique_ptr<mmap_segment_file>> removed;
    const std::unique_lock lock(mutex_);
    for (auto& each : segments_) {
        removed.push_back(std::move(each));
    }
    segments_.clear();
    first_index_ = segment->index;
    segments_.push_back(std::move(segment));
    return removed;
}

void mmap_segment_list::close() noexcept
{
    const std::unique_lock lock(mutex_);
    closed_.store(true, std::memory_order_release);
    segments_.clear();
}

}  // namespace bufferqueue::detail
