// The topic options file format; the layout is described in topic_options_format.hpp.
#include "bufferqueue/mmap/detail/topic_options_format.hpp"

#include "bufferqueue/mmap/detail/crc32c.hpp"
#include "bufferqueue/mmap/detail/segment_format.hpp"

#include "bufferqueue/detail/message.hpp"

#include <algorithm>
#include <array>
#include <cstring>

namespace bufferqueue::detail {

namespace {

using layout = topic_options_layout;

constexpr std::array<char, 8> magic = {'B', 'Q', 'T', 'O', 'P', 'I', 'C', '\0'};

// Field offsets (see the layout in the header file).
constexpr std::size_t version_offset = 8;
constexpr std::size_t name_length_offset = 12;
constexpr std::size_t partitions_offset = 16;
constexpr std::size_t segment_size_offset = 24;
constexpr std::size_t name_offset = 32;
static_assert(name_offset + 4 == layout::fixed_size);

}  // namespace

std::string stored_serializer_name(std::string_view name)
{
    return std::string(name.substr(0, std::min(name.size(), layout::max_serializer_name)));
}

std::vector<std::byte> encode_topic_options(const stored_topic_options& options)
{
    const std::string name = stored_serializer_name(options.serializer_name);
    std::vector<std::byte> bytes(layout::fixed_size + name.size());
    std::memcpy(bytes.data(), magic.data(), magic.size());
    store_u32_little_endian(bytes.data() + version_offset, layout::version);
    store_u32_little_endian(bytes.data() + name_length_offset, static_cast<std::uint32_t>(name.size()));
    store_u64_little_endian(bytes.data() + partitions_offset, options.partitions);
    store_u64_little_endian(bytes.data() + segment_size_offset, options.segment_size);
    std::memcpy(bytes.data() + name_offset, name.data(), name.size());
    const std::size_t checksummed = name_offset + name.size();
    store_u32_little_endian(bytes.data() + checksummed, crc32c(std::span<const std::byte>(bytes).first(checksummed)));
    return bytes;
}

topic_options_decoding decode_topic_options(std::span<const std::byte> contents)
{
    if (contents.size() < layout::fixed_size) {
        return detail::format_message("is {} bytes long, shorter than the {} bytes of a topic options file",
                                      contents.size(), layout::fixed_size);
    }
    if (std::memcmp(contents.data(), magic.data(), magic.size()) != 0) {
        return std::string("does not start with the magic \"BQTOPIC\": it is not a topic options file");
    }
    const std::uint32_t version = load_u32_little_endian(contents.data() + version_offset);
    if (version != layout::version) {
        return detail::format_message("has format version {}; this library reads version {}", version, layout::version);
    }
    const std::uint32_t name_length = load_u32_little_endian(contents.data() + name_length_offset);
    if (name_length > layout::max_serializer_name || contents.size() != layout::fixed_size + name_length) {
        return detail::format_message("is {} bytes long, but its serializer name length (offset {}) is {}: the file "
                                      "would be {} bytes (the name holds at most {})",
                                      contents.size(), name_length_offset, name_length,
                                      layout::fixed_size + std::uint64_t{name_length}, layout::max_serializer_name);
    }
    const std::size_t checksummed = name_offset + name_length;
    const std::uint32_t stored = load_u32_little_endian(contents.data() + checksummed);
    const std::uint32_t computed = crc32c(contents.first(checksummed));
    if (stored != computed) {
        return detail::format_message("fails its checksum (stored 0x{:08X}, computed 0x{:08X})", stored, computed);
    }
    stored_topic_options options{
        .partitions = load_u64_little_endian(contents.data() + partitions_offset),
        .segment_size = load_u64_little_endian(contents.data() + segment_size_offset),
        .serializer_name = std::string(reinterpret_cast<const char*>(contents.data() + name_offset),  // NOLINT
                                       name_length)};
    if (options.partitions == 0) {
        return std::string("holds 0 partitions");
    }
    if (!is_valid_segment_size(options.segment_size)) {
        return detail::format_message("holds a segment size of {} bytes, which is not a valid segment_size",
                                      options.segment_size);
    }
    return options;
}

}  // namespace bufferqueue::detail
