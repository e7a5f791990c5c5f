#include "bufferqueue/mmap/detail/shared_topic_header.hpp"

#include "bufferqueue/error.hpp"
#include "bufferqueue/mmap/detail/file_handle.hpp"
#include "bufferqueue/mmap/detail/segment_format.hpp"
#include "bufferqueue/mmap/detail/topic_options_file.hpp"

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
constexpr std::size_t name_length_offset = 60;
constexpr std::size_t name_offset = 64;
static_assert(name_offset + layout::max_serializer_name == layout::header_size);
static_assert(layout::wake_offset + shared_wakeups::storage_size <= name_length_offset);
static_assert(layout::wake_offset % 4 == 0);

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

shared_header_fields check_shared_header(std::span<const std::byte> header, std::uint64_t file_size,
                                         const std::string& path)
{
    const auto corrupt = [&](std::string_view field, const std::string& value, std::string_view expected) {
        return error(errc::corrupt_data,
                     detail::format_message("{} is not a version {} shared header of a process-shared topic: its {} is "
                                            "{}, {}",
                                            path, layout::version, field, value, expected));
    };
    if (header.size() < layout::header_size) {
        throw corrupt("size", std::to_string(header.size()) + " bytes",
                      detail::format_message("shorter than a shared header ({} bytes)", layout::header_size));
    }
    const std::byte* bytes = header.data();
    if (std::memcmp(bytes, magic.data(), magic.size()) != 0) {
        std::string shown;
        for (std::size_t index = 0; index < magic.size(); ++index) {
            shown += detail::format_message("{}{:02x}", index == 0 ? "" : " ", std::to_integer<unsigned>(bytes[index]));
        }
        throw corrupt("magic", shown, "not 42 51 53 48 41 52 45 00 (\"BQSHARE\\0\")");
    }
    if (const auto version = load<std::uint32_t>(bytes, version_offset); version == 1) {
        // Only a process that has the topic open now can have made it (the first opener makes the
        // header anew), so a process of an older bufferqueue is running: its watchers and memberships
        // would not hear this version's, nor this version theirs.
        throw error(errc::invalid_argument,
                    detail::format_message("{} is a version 1 shared header: a process of an older bufferqueue "
                                           "has the process-shared topic open, and processes of both versions "
                                           "cannot share it (this one uses version {}). Close the older "
                                           "processes first; the header is made anew when every process closed "
                                           "the topic",
                                           path, layout::version));
    } else if (version != layout::version) {
        throw corrupt("format version", std::to_string(version), detail::format_message("not {}", layout::version));
    }
    // Read once, atomically: the first opener stores it last, with release.
    if (const auto state = std::atomic_ref<const std::uint32_t>(
                               *reinterpret_cast<const std::uint32_t*>(bytes + state_offset))  // NOLINT
                               .load(std::memory_order_acquire);
        state != 1) {
        throw corrupt("state", std::to_string(state),
                      "not 1 (the queue that made it did not finish, or it was overwritten)");
    }
    if (const auto size = load<std::uint32_t>(bytes, header_size_offset); size != layout::header_size) {
        throw corrupt("header size", std::to_string(size), detail::format_message("not {}", layout::header_size));
    }
    if (const auto size = load<std::uint32_t>(bytes, slot_size_offset); size != layout::slot_size) {
        throw corrupt("partition slot size", std::to_string(size), detail::format_message("not {}", layout::slot_size));
    }
    shared_header_fields fields;
    fields.partitions = load<std::uint64_t>(bytes, partitions_offset);
    const std::uint64_t slots =
        file_size < layout::header_size ? 0 : (file_size - layout::header_size) / layout::slot_size;
    if (fields.partitions == 0 || fields.partitions > slots) {
        throw corrupt(
            "partition count", std::to_string(fields.partitions),
            detail::format_message("but the file's {} bytes hold {} partition slots (and a topic has at least "
                                   "one partition)",
                                   file_size, slots));
    }
    fields.segment_size = load<std::uint64_t>(bytes, segment_size_offset);
    if (!is_valid_segment_size(fields.segment_size)) {
        throw corrupt("segment size", std::to_string(fields.segment_size),
                      detail::format_message("not a multiple of {} between {} and {}", record_alignment,
                                             min_segment_size, max_segment_size));
    }
    fields.retention = load<std::uint64_t>(bytes, retention_offset);
    const auto name_length = load<std::uint32_t>(bytes, name_length_offset);
    if (name_length > layout::max_serializer_name) {
        throw corrupt("serializer name length", std::to_string(name_length),
                      detail::format_message("more than {}", layout::max_serializer_name));
    }
    for (std::size_t index = name_length; index < layout::max_serializer_name; ++index) {
        if (bytes[name_offset + index] != std::byte{0}) {
            throw corrupt(detail::format_message("byte {}", name_offset + index),
                          std::to_string(std::to_integer<unsigned>(bytes[name_offset + index])),
                          detail::format_message("not 0 (after the serializer name of {} bytes)", name_length));
        }
    }
    fields.serializer_name.assign(reinterpret_cast<const char*>(bytes + name_offset), name_length);  // NOLINT
    return fields;
}

void check_shared_slots(std::span<const std::byte> file, std::uint64_t partitions, const std::string& path)
{
    static_assert(shared_log_slot::offset_in_slot >= process_shared_mutex::storage_size &&
                  shared_log_slot::offset_in_slot + shared_log_slot::size <= layout::slot_size);
    constexpr std::size_t reserved_from = shared_log_slot::offset_in_slot + shared_log_slot::used_size;
    if (file.size() < layout::file_size(partitions)) {
        throw error(errc::corrupt_data,
                    detail::format_message("{} is {} bytes, shorter than the {} bytes of a shared header of {} "
                                           "partitions",
                                           path, file.size(), layout::file_size(partitions), partitions));
    }
    for (std::uint64_t partition = 0; partition < partitions; ++partition) {
        const std::byte* slot = file.data() + layout::header_size + partition * layout::slot_size;
        if (const std::optional<std::string> wrong = process_shared_mutex::check(slot)) {
            throw error(errc::corrupt_data,
                        detail::format_message("{}: the append lock of partition {} is not a robust process-shared "
                                               "mutex: {}",
                                               path, partition, *wrong));
        }
        for (std::size_t byte = reserved_from; byte < layout::slot_size; ++byte) {
            if (slot[byte] != std::byte{0}) {
                throw error(errc::corrupt_data,
                            detail::format_message("{}: byte {} of the slot of partition {} (reserved) is {}, not 0",
                                                   path, byte, partition, std::to_integer<unsigned>(slot[byte])));
            }
        }
    }
}

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
        shared_wakeups::initialize(bytes + layout::wake_offset);
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
    const shared_header_fields stored = check_shared_header(header.bytes(), actual_size, path);
    header.unmap();
    require_same_options(
        topic, topic_folder, options_origin::open_elsewhere,
        {.partitions = options.partitions, .segment_size = options.segment_size, .serializer_name = std::string(name)},
        {.partitions = stored.partitions,
         .segment_size = stored.segment_size,
         .serializer_name = stored.serializer_name});
    if (stored.retention != stored_retention(options.max_retained_consumed_segments)) {
        throw option_mismatch(topic, topic_folder, options_origin::open_elsewhere, "max_retained_consumed_segments",
                              retention_text(stored_retention(options.max_retained_consumed_segments)),
                              retention_text(stored.retention));
    }
    region_ = map_file(file, size);
    check_shared_slots(region_.bytes(), partitions_, path);
}

process_shared_mutex shared_topic_header::append_lock(std::size_t partition) const
{
    if (partition >= partitions_) {
        throw error(errc::invalid_argument, detail::format_message("mmap topic '{}': no partition {} in {} (it has {})",
                                                                   topic_, partition, region_.path(), partitions_));
    }
    return process_shared_mutex(
        region_.data() + layout::header_size + partition * layout::slot_size,
        detail::format_message("append lock of topic '{}' partition {} in {}", topic_, partition, region_.path()));
}

shared_log_slot shared_topic_header::log_slot(std::size_t partition) const
{
    if (partition >= partitions_) {
        throw error(errc::invalid_argument, detail::format_message("mmap topic '{}': no partition {} in {} (it has {})",
                                                                   topic_, partition, region_.path(), partitions_));
    }
    return shared_log_slot(region_.data() + layout::header_size + partition * layout::slot_size +
                           shared_log_slot::offset_in_slot);
}

shared_wakeups shared_topic_header::wakeups() const noexcept
{
    return shared_wakeups(region_.data() + layout::wake_offset);
}

}  // namespace bufferqueue::detail
