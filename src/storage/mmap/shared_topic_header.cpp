#include "bufferqueue/storage/mmap/detail/shared_topic_header.hpp"

#include "bufferqueue/error.hpp"
#include "bufferqueue/storage/mmap/detail/file_handle.hpp"
#include "bufferqueue/storage/mmap/detail/topic_options_file.hpp"

#include "bufferqueue/detail/message.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <string>

namespace bufferqueue::detail {

namespace {

using layout = shared_header_layout;

constexpr std::array<char, 8> magic = {'B', 'Q', 'S', 'H', 'A', 'R', 'E', '\0'};

// Field offsets of the header (see the layout in the header file).
constexpr std::size_t version_offset = 8;
constexpr std::size_t state_offset = 12;
constexpr std::size_t header_size_offset = 16;
constexpr std::size_t slot_size_offset = 20;
constexpr std::size_t partitions_offset = 24;
constexpr std::size_t segment_size_offset = 32;
constexpr std::size_t retention_offset = 40;
constexpr std::size_t name_length_offset = 56;
constexpr std::size_t name_offset = 60;
static_assert(name_offset + layout::max_serializer_name == layout::header_size);
static_assert(layout::wake_offset + process_shared_event::storage_size <= name_length_offset);

template <class Integer>
Integer load(const std::byte* bytes, std::size_t offset) noexcept
{
    Integer value{};
    std::memcpy(&value, bytes + offset, sizeof value);
    return value;
}

template <class Integer>
void store(std::byte* bytes, std::size_t offset, Integer value) noexcept
{
    std::memcpy(bytes + offset, &value, sizeof value);
}

std::uint64_t stored_retention(const std::optional<std::size_t>& segments) noexcept
{
    return segments ? static_cast<std::uint64_t>(*segments) + 1 : 0;
}

std::string retention_text(std::uint64_t stored)
{
    return stored == 0 ? std::string("none (never deletes)") : std::to_string(stored - 1);
}

std::string_view stored_name(std::string_view name) noexcept
{
    return name.substr(0, std::min(name.size(), layout::max_serializer_name));
}

// Refuses the open header `file` when another user owns it and `access` does not share the folder
// with the group: that user could rewrite it and stop every process that appends (issue 51).
void require_owned(const unique_fd& file, std::string_view topic, file_access access)
{
    const file_ownership owner = ownership_of(file);
    if (owner.user != effective_user() && access != file_access::group_write) {
        throw error(errc::invalid_argument,
                    detail::format_message("mmap topic '{}': {} belongs to user id {}, not to this process's user id "
                                           "{}; whoever owns it can stop every process that appends. Set the option "
                                           "'access' (mmap_topic_options) to file_access::group_write to share the "
                                           "folder with another user of its group",
                                           topic, file.path(), owner.user, effective_user()));
    }
}

}  // namespace

shared_topic_header::shared_topic_header(std::string_view topic, const std::string& topic_folder,
                                         const shared_topic_options& options, bool first, file_access access)
    : topic_(topic), partitions_(options.partitions)
{
    const std::string path = topic_folder + "/" + std::string(layout::file_name);
    const std::uint64_t size = layout::file_size(options.partitions);
    const std::string_view name = stored_name(options.serializer_name);
    if (first) {
        // Nobody else has the folder open: whatever the file holds is from processes that are gone.
        const unique_fd file = open_file(path, open_mode::create_or_open, access);
        require_owned(file, topic, access);
        truncate_file(file, 0);
        preallocate(file, 0, size);  // writing through the mapping cannot hit a full disk
        region_ = map_file(file, size);
        std::byte* bytes = region_.data();
        std::memcpy(bytes, magic.data(), magic.size());
        store<std::uint32_t>(bytes, version_offset, layout::version);
        store<std::uint32_t>(bytes, header_size_offset, layout::header_size);
        store<std::uint32_t>(bytes, slot_size_offset, layout::slot_size);
        store<std::uint64_t>(bytes, partitions_offset, options.partitions);
        store<std::uint64_t>(bytes, segment_size_offset, options.segment_size);
        store<std::uint64_t>(bytes, retention_offset, stored_retention(options.max_retained_consumed_segments));
        process_shared_event::initialize(bytes + layout::wake_offset);
        store<std::uint32_t>(bytes, name_length_offset, static_cast<std::uint32_t>(name.size()));
        std::memcpy(bytes + name_offset, name.data(), name.size());
        for (std::uint64_t partition = 0; partition < options.partitions; ++partition) {
            process_shared_mutex::initialize(
                bytes + layout::header_size + partition * layout::slot_size,
                detail::format_message("append lock of partition {} in {}", partition, path));
        }
        std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(bytes + state_offset))  // NOLINT
            .store(1, std::memory_order_release);
        return;
    }

    const unique_fd file = open_file(path, open_mode::read_write);
    require_owned(file, topic, access);
    const std::uint64_t actual_size = file_size(file);
    if (actual_size < layout::header_size) {
        throw error(errc::corrupt_data,
                    detail::format_message("{} is {} bytes, shorter than a shared header ({} bytes)", path, actual_size,
                                           layout::header_size));
    }
    mapped_region header = map_file(file, layout::header_size);
    const std::byte* bytes = header.data();
    if (std::memcmp(bytes, magic.data(), magic.size()) != 0 ||
        load<std::uint32_t>(bytes, version_offset) != layout::version ||
        load<std::uint32_t>(bytes, header_size_offset) != layout::header_size ||
        load<std::uint32_t>(bytes, slot_size_offset) != layout::slot_size ||
        std::atomic_ref<const std::uint32_t>(*reinterpret_cast<const std::uint32_t*>(bytes + state_offset))  // NOLINT
                .load(std::memory_order_acquire) != 1 ||
        load<std::uint32_t>(bytes, name_length_offset) > layout::max_serializer_name) {
        throw error(errc::corrupt_data,
                    detail::format_message("{} is not a version {} shared header of a process-shared topic", path,
                                           layout::version));
    }
    const std::string_view stored_serializer(reinterpret_cast<const char*>(bytes + name_offset),  // NOLINT
                                             load<std::uint32_t>(bytes, name_length_offset));
    require_same_options(
        topic, topic_folder, options_origin::open_elsewhere,
        {.partitions = options.partitions, .segment_size = options.segment_size, .serializer_name = std::string(name)},
        {.partitions = load<std::uint64_t>(bytes, partitions_offset),
         .segment_size = load<std::uint64_t>(bytes, segment_size_offset),
         .serializer_name = std::string(stored_serializer)});
    if (const auto stored = load<std::uint64_t>(bytes, retention_offset);
        stored != stored_retention(options.max_retained_consumed_segments)) {
        throw option_mismatch(topic, topic_folder, options_origin::open_elsewhere, "max_retained_consumed_segments",
                              retention_text(stored_retention(options.max_retained_consumed_segments)),
                              retention_text(stored));
    }
    if (actual_size < size) {
        throw error(errc::corrupt_data,
                    detail::format_message("{} is {} bytes, shorter than the {} bytes of a shared header of "
                                           "{} partitions",
                                           path, actual_size, size, options.partitions));
    }
    header.unmap();
    region_ = map_file(file, size);
}

process_shared_mutex shared_topic_header::append_lock(std::size_t partition) const
{
    if (partition >= partitions_) {
        throw error(errc::invalid_argument, detail::format_message("mmap topic '{}': no partition {} in {} (it has {})",
                                                                   topic_, partition, region_.path(), partitions_));
    }
    return process_shared_mutex(region_.data() + layout::header_size + partition * layout::slot_size,
                                detail::format_message("append lock of topic '{}' partition {}", topic_, partition));
}

shared_log_slot shared_topic_header::log_slot(std::size_t partition) const
{
    static_assert(shared_log_slot::offset_in_slot >= process_shared_mutex::storage_size &&
                  shared_log_slot::offset_in_slot + shared_log_slot::size <= layout::slot_size);
    if (partition >= partitions_) {
        throw error(errc::invalid_argument, detail::format_message("mmap topic '{}': no partition {} in {} (it has {})",
                                                                   topic_, partition, region_.path(), partitions_));
    }
    return shared_log_slot(region_.data() + layout::header_size + partition * layout::slot_size +
                           shared_log_slot::offset_in_slot);
}

process_shared_event shared_topic_header::wake_event() const noexcept
{
    return process_shared_event(region_.data() + layout::wake_offset);
}

}  // namespace bufferqueue::detail
