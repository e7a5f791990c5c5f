#include "bufferqueue/mmap/inspect/folder_reader.hpp"

#include "bufferqueue/error.hpp"
#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/group_path.hpp"
#include "bufferqueue/mmap/detail/mmap_partition.hpp"
#include "bufferqueue/mmap/detail/segment_format.hpp"
#include "bufferqueue/mmap/detail/topic_options_file.hpp"

#include "bufferqueue/detail/message.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <utility>

namespace bufferqueue::inspect {

namespace detail = bufferqueue::detail;

namespace {

std::vector<std::uint64_t> segment_indices(const std::string& folder)
{
    std::vector<std::uint64_t> indices;
    for (const detail::directory_entry& entry : detail::list_directory(folder)) {
        if (const auto index = detail::parse_segment_file_name(entry.name);
            index && entry.kind == detail::entry_kind::file) {
            indices.push_back(*index);
        }
    }
    std::sort(indices.begin(), indices.end());
    return indices;
}

// The topic's segment size as the segment files `indices` of `folder` show it: the size declared by
// the first header that is entirely valid (magic, version, checksum, its index) and matches its
// file's size; when no header is, the size most files have, if it is a valid segment size; 0 when
// there is no segment. One damaged file (empty, or with a damaged header) never decides it, so the
// intact files are not blamed for its damage.
std::uint64_t discover_segment_size(const std::string& folder, const std::vector<std::uint64_t>& indices)
{
    std::map<std::uint64_t, std::size_t> sizes;  // file size -> files of that size
    for (const std::uint64_t index : indices) {
        try {
            const detail::unique_fd file =
                detail::open_file(folder + "/" + detail::segment_file_name(index), detail::open_mode::read_only);
            const std::uint64_t size = detail::file_size(file);
            std::array<std::byte, detail::segment_header_size> header{};
            if (detail::read_at(file, 0, header) == header.size()) {
                const std::uint64_t declared = detail::load_u64_little_endian(header.data() + 24);  // its size field
                if (declared == size && detail::is_valid_segment_size(declared) &&
                    !detail::validate_segment_header(header, index, declared)) {
                    return declared;
                }
            }
            ++sizes[size];
        } catch (const error&) {
            // A file that cannot be read decides nothing; recovery and verify name it.
        }
    }
    std::uint64_t common = 0;
    std::size_t count = 0;
    for (const auto& [size, files] : sizes) {
        if (detail::is_valid_segment_size(size) && files > count) {
            common = size;
            count = files;
        }
    }
    return common;
}

std::string describe_partition(const std::string& topic, std::size_t partition)
{
    return detail::format_message("topic '{}' partition {}", topic, partition);
}

}  // namespace

struct partition_reader::segments {
    std::optional<detail::mmap_recovered_state> state;               // when recovery succeeded
    std::vector<std::unique_ptr<detail::mmap_segment_file>> opened;  // otherwise: what could be opened
    std::vector<const detail::mmap_segment_file*> list;              // either way, oldest first
};

std::optional<detail::stored_topic_options> read_topic_options(const std::string& data_directory,
                                                               const std::string& topic)
{
    return detail::read_topic_options(topic_folder(data_directory, topic));
}

partition_reader::partition_reader(partition_reader&&) noexcept = default;
partition_reader& partition_reader::operator=(partition_reader&&) noexcept = default;
partition_reader::~partition_reader() = default;

const detail::mmap_recovered_state* partition_reader::recovered() const noexcept
{
    return segments_->state ? &*segments_->state : nullptr;
}

partition_reader::partition_reader(const std::string& data_directory, const std::string& topic, std::size_t partition)
    : segments_(std::make_unique<segments>())
{
    const std::vector<std::size_t> partitions = list_partitions(data_directory, topic);
    if (std::find(partitions.begin(), partitions.end(), partition) == partitions.end()) {
        throw error(errc::invalid_argument,
                    detail::format_message("no partition {} in topic '{}' (it has {} partition{}, numbered from 0)",
                                           partition, topic, partitions.size(), partitions.size() == 1 ? "" : "s"));
    }
    const std::string folder = inspect::partition_folder(data_directory, topic, partition);
    const std::uint64_t segment_size = discover_segment_size(folder, segment_indices(folder));
    files_ = {.description = describe_partition(topic, partition),
              .folder = folder,
              .segment_size = segment_size == 0 ? detail::min_segment_size : segment_size};
    summary_.topic = topic;
    summary_.partition = partition;
    summary_.folder = folder;
    summary_.segment_size = segment_size;
    try {
        segments_->state = detail::recover_mmap_partition(files_, detail::map_access::read_only);
    } catch (const error& failure) {
        summary_.problem = failure.what();
    }
    if (segments_->state) {
        const detail::mmap_recovered_state& state = *segments_->state;
        for (const auto& segment : state.segments) {
            segments_->list.push_back(segment.get());
        }
        summary_.earliest = state.earliest.items;
        summary_.earliest_log_offset = state.earliest.offset;
        summary_.end = state.tail.end_items;
        const std::uint64_t last = state.first_segment_index + state.segments.size() - 1;
        summary_.end_log_offset = detail::logical_offset(state.create_successor.value_or(last),
                                                         state.tail.tail_position, files_.segment_size);
        if (state.segments.empty()) {
            summary_.end_log_offset = summary_.earliest_log_offset;
        }
        summary_.tail_bytes = state.cut_to > state.cut_from ? state.cut_to - state.cut_from : 0;
        for (const auto& [group, position] : state.groups) {
            summary_.groups.push_back(
                {.group = group,
                 .committed = position.items,
                 .committed_log_offset = position.offset,
                 .checkpoint_path = files_.group_checkpoint_path(detail::escape_group_name(group))});
        }
    } else {
        open_readable_segments();
    }
    summary_.segments = segments_->list.size();
    summary_.bytes = summary_.segments * files_.segment_size;
}

void partition_reader::open_readable_segments()
{
    // Damaged: open what can be opened, so that its records can still be dumped; name what cannot.
    std::vector<std::uint64_t> indices;
    try {
        indices = segment_indices(files_.folder);
    } catch (const error& failure) {
        summary_.unreadable.push_back({.path = files_.folder, .reason = failure.what()});
        return;
    }
    for (const std::uint64_t index : indices) {
        auto segment = std::make_unique<detail::mmap_segment_file>();
        segment->index = index;
        segment->path = files_.segment_path(index);
        try {
            segment->file = detail::open_file(segment->path, detail::open_mode::read_only);
            if (const std::uint64_t size = detail::file_size(segment->file); size != files_.segment_size) {
                summary_.unreadable.push_back(
                    {.path = segment->path,
                     .reason = detail::format_message("has {} bytes, but the segment size is {}", size,
                                                      files_.segment_size)});
                continue;
            }
            segment->region = detail::map_file(segment->file, files_.segment_size, detail::map_access::read_only);
        } catch (const error& failure) {
            summary_.unreadable.push_back({.path = segment->path, .reason = failure.what()});
            continue;
        }
        if (const auto damage = detail::validate_segment_header(segment->region.bytes(), index, files_.segment_size)) {
            summary_.unreadable.push_back(
                {.path = segment->path,
                 .reason = detail::format_message("the segment header is damaged: {}", *damage)});
            continue;
        }
        segments_->list.push_back(segment.get());
        segments_->opened.push_back(std::move(segment));
    }
}

std::uint64_t partition_reader::log_offset_of(std::uint64_t item) const
{
    if (!segments_->state) {
        throw error(errc::corrupt_data,
                    detail::format_message("{} is damaged: {}", files_.description, summary_.problem.value_or("")));
    }
    if (item < summary_.earliest || item > summary_.end) {
        throw error(errc::invalid_argument,
                    detail::format_message("{}: offset {} is outside the valid range {} to {} (earliest to log end)",
                                           files_.description, item, summary_.earliest, summary_.end));
    }
    if (item == summary_.end) {
        return summary_.end_log_offset;
    }
    const auto& list = segments_->list;
    std::size_t slot = 0;
    while (slot + 1 < list.size() && list[slot + 1]->first_item <= item) {
        ++slot;
    }
    const detail::mmap_segment_file& segment = *list[slot];
    std::uint64_t position = detail::segment_header_size;
    for (std::uint64_t skip = item - segment.first_item; skip > 0; --skip) {
        const auto record = detail::read_record(segment.region.bytes(), position);
        if (!record) {
            throw error(errc::corrupt_data, detail::format_message("{}: record {} cannot be found in {}",
                                                                   files_.description, item, segment.path));
        }
        position = record->next_position;
    }
    return detail::logical_offset(segment.index, position, files_.segment_size);
}

void partition_reader::read_records(std::uint64_t from, std::uint64_t count,
                                    const std::function<void(const record_entry&)>& visit) const
{
    const bool recovered = segments_->state.has_value();
    if (recovered && (from < summary_.earliest || from > summary_.end)) {
        throw error(errc::invalid_argument,
                    detail::format_message("{}: offset {} is outside the valid range {} to {} (earliest to log end)",
                                           files_.description, from, summary_.earliest, summary_.end));
    }
    const auto& list = segments_->list;
    std::uint64_t item = recovered ? summary_.earliest : 0;
    std::uint64_t emitted = 0;
    for (std::size_t slot = 0; slot < list.size() && emitted < count; ++slot) {
        const detail::mmap_segment_file& segment = *list[slot];
        const bool last = slot + 1 == list.size();
        if (recovered) {
            item = segment.first_item;
            if (!last && list[slot + 1]->first_item <= from) {
                continue;  // every record of this segment lies before `from`
            }
        }
        const std::span<const std::byte> bytes = segment.region.bytes();
        std::uint64_t position = detail::segment_header_size;
        for (;;) {
            if (const auto record = detail::read_record(bytes, position)) {
                if (item >= from) {
                    visit({.item = item,
                           .log_offset = detail::logical_offset(segment.index, position, files_.segment_size),
                           .segment_file = detail::segment_file_name(segment.index),
                           .position = position,
                           .size = record->payload.size(),
                           .payload = record->payload});
                    if (++emitted == count) {
                        return;
                    }
                }
                ++item;
                position = record->next_position;
                continue;
            }
            if (detail::is_segment_end(bytes, position)) {
                break;
            }
            const detail::scan_result stopped = detail::scan_segment(bytes, position);
            const bool tail = recovered && last;
            if (stopped.reason == detail::scan_stop::zero_header && (!tail || summary_.tail_bytes == 0)) {
                if (!last) {
                    visit({.item = item,
                           .log_offset = detail::logical_offset(segment.index, position, files_.segment_size),
                           .segment_file = detail::segment_file_name(segment.index),
                           .position = position,
                           .valid = false,
                           .problem = "no record here (zero bytes), but a later segment exists"});
                }
                break;
            }
            const std::uint64_t declared = detail::load_u32_little_endian(bytes.data() + position);
            const std::uint64_t available = bytes.size() - position - detail::record_header_size;
            visit({.item = item,
                   .log_offset = detail::logical_offset(segment.index, position, files_.segment_size),
                   .segment_file = detail::segment_file_name(segment.index),
                   .position = position,
                   .size = declared,
                   .valid = false,
                   .payload = bytes.subspan(position + detail::record_header_size, std::min(declared, available)),
                   .problem = tail ? "tail being written (or torn by a crash; the next open cuts it off)"
                                   : std::string(detail::describe(stopped.reason)),
                   .tail = tail});
            break;
        }
    }
}

}  // namespace bufferqueue::inspect
