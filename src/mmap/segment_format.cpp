#include "bufferqueue/mmap/detail/segment_format.hpp"

#include "bufferqueue/error.hpp"
#include "bufferqueue/mmap/detail/crc32c.hpp"

#include "bufferqueue/detail/message.hpp"

#include <algorithm>
#include <cstring>

namespace bufferqueue::detail {
namespace {

constexpr std::size_t version_field = 8;
constexpr std::size_t header_size_field = 12;
constexpr std::size_t index_field = 16;
constexpr std::size_t size_field = 24;
constexpr std::size_t reserved_field = 32;
constexpr std::size_t header_checksum_field = 36;

constexpr std::string_view segment_file_extension = ".log";
constexpr std::size_t segment_file_digits = 20;

std::uint32_t header_checksum(const std::byte* header) noexcept
{
    return crc32c(std::span<const std::byte>(header, header_checksum_field));
}

std::uint32_t record_checksum(const std::byte* length_field, std::span<const std::byte> payload) noexcept
{
    return crc32c(payload, crc32c(std::span<const std::byte>(length_field, 4)));
}

// What lies at a position: a valid record (reason unset) or why there is none.
struct decoded {
    std::optional<scan_stop> stop;
    std::span<const std::byte> payload;
    std::uint64_t next_position = 0;
};

decoded decode_at(std::span<const std::byte> segment, std::uint64_t position) noexcept
{
    if (position < segment_header_size || position % record_alignment != 0 || position > segment.size()) {
        return {scan_stop::invalid_start_position, {}, position};
    }
    const std::uint64_t remaining = segment.size() - position;
    if (remaining < record_header_size) {
        return {scan_stop::segment_full, {}, position};
    }
    const std::byte* header = segment.data() + position;
    const std::uint32_t length = load_u32_little_endian(header);
    const std::uint32_t stored_checksum = load_u32_little_endian(header + 4);
    if (length == segment_end_length) {
        return {stored_checksum == segment_end_checksum ? scan_stop::segment_end_marker : scan_stop::bad_checksum,
                {},
                position};
    }
    if (length == 0 && stored_checksum == 0) {
        return {scan_stop::zero_header, {}, position};
    }
    if (record_size(length) > remaining) {
        return {scan_stop::length_past_segment_end, {}, position};
    }
    const std::span<const std::byte> payload = segment.subspan(position + record_header_size, length);
    if (record_checksum(header, payload) != stored_checksum) {
        return {scan_stop::bad_checksum, {}, position};
    }
    const std::uint64_t next_position = position + record_size(length);
    const auto padding =
        segment.subspan(position + record_header_size + length, next_position - position - record_header_size - length);
    if (std::any_of(padding.begin(), padding.end(), [](std::byte value) { return value != std::byte{0}; })) {
        return {scan_stop::nonzero_padding, {}, position};
    }
    return {std::nullopt, payload, next_position};
}

}  // namespace

// ---- header ---------------------------------------------------------------------------------

std::array<std::byte, segment_header_size> make_segment_header(std::uint64_t segment_index,
                                                               std::uint64_t segment_size) noexcept
{
    std::array<std::byte, segment_header_size> header{};
    std::copy(segment_magic.begin(), segment_magic.end(), header.begin());
    store_u32_little_endian(header.data() + version_field, segment_format_version);
    store_u32_little_endian(header.data() + header_size_field, static_cast<std::uint32_t>(segment_header_size));
    store_u64_little_endian(header.data() + index_field, segment_index);
    store_u64_little_endian(header.data() + size_field, segment_size);
    store_u32_little_endian(header.data() + reserved_field, 0);
    store_u32_little_endian(header.data() + header_checksum_field, header_checksum(header.data()));
    return header;
}

std::optional<std::string> validate_segment_header(std::span<const std::byte> segment, std::uint64_t expected_index,
                                                   std::uint64_t expected_size)
{
    if (segment.size() < segment_header_size) {
        return detail::format_message("the file is {} bytes long, shorter than the {}-byte segment header",
                                      segment.size(), segment_header_size);
    }
    const std::byte* header = segment.data();
    if (!std::equal(segment_magic.begin(), segment_magic.end(), header)) {
        return std::string("the magic at offset 0 is not \"BQSEGMT\": this is not a bufferqueue segment file");
    }
    const std::uint32_t version = load_u32_little_endian(header + version_field);
    if (version != segment_format_version) {
        return detail::format_message("the format version at offset {} is {}, this build reads version {}",
                                      version_field, version, segment_format_version);
    }
    const std::uint32_t header_size = load_u32_little_endian(header + header_size_field);
    if (header_size != segment_header_size) {
        return detail::format_message("the header size at offset {} is {}, expected {}", header_size_field, header_size,
                                      segment_header_size);
    }
    const std::uint32_t stored_checksum = load_u32_little_endian(header + header_checksum_field);
    if (const std::uint32_t checksum = header_checksum(header); checksum != stored_checksum) {
        return detail::format_message(
            "the header checksum at offset {} does not match its contents (the header is damaged)",
            header_checksum_field);
    }
    if (const std::uint32_t reserved = load_u32_little_endian(header + reserved_field); reserved != 0) {
        return detail::format_message("the reserved field at offset {} is {}, expected 0", reserved_field, reserved);
    }
    if (const std::uint64_t index = load_u64_little_endian(header + index_field); index != expected_index) {
        return detail::format_message("the segment index at offset {} is {}, but the file name says {}", index_field,
                                      index, expected_index);
    }
    if (const std::uint64_t size = load_u64_little_endian(header + size_field); size != expected_size) {
        return detail::format_message("the segment size at offset {} is {} bytes, but the topic's segment size is {}",
                                      size_field, size, expected_size);
    }
    return std::nullopt;
}

void check_segment_header(std::span<const std::byte> segment, std::uint64_t expected_index, std::uint64_t expected_size,
                          const std::string& file_path)
{
    if (auto problem = validate_segment_header(segment, expected_index, expected_size)) {
        throw error(errc::corrupt_data,
                    detail::format_message("segment file {} has an invalid header: {}", file_path, *problem));
    }
}

// ---- records --------------------------------------------------------------------------------

std::uint64_t encode_record(std::span<std::byte> destination, std::span<const std::byte> payload)
{
    if (payload.size() > max_record_payload_size) {
        throw error(errc::invalid_argument,
                    detail::format_message("a record payload of {} bytes is larger than the format's limit of {} bytes",
                                           payload.size(), max_record_payload_size));
    }
    const std::uint64_t size = record_size(payload.size());
    if (destination.size() < size) {
        throw error(errc::invalid_argument,
                    detail::format_message("a record of {} bytes does not fit in {} bytes", size, destination.size()));
    }
    std::byte* header = destination.data();
    store_u32_little_endian(header, static_cast<std::uint32_t>(payload.size()));
    if (!payload.empty()) {
        std::memcpy(header + record_header_size, payload.data(), payload.size());
    }
    std::fill(header + record_header_size + payload.size(), header + size, std::byte{0});
    store_u32_little_endian(header + 4, record_checksum(header, payload));
    return size;
}

void encode_segment_end(std::span<std::byte> destination)
{
    if (destination.size() < record_header_size) {
        throw error(errc::invalid_argument,
                    detail::format_message("a segment-end marker of {} bytes does not fit in {} bytes",
                                           record_header_size, destination.size()));
    }
    store_u32_little_endian(destination.data(), segment_end_length);
    store_u32_little_endian(destination.data() + 4, segment_end_checksum);
}

std::optional<record_view> read_record(std::span<const std::byte> segment, std::uint64_t position) noexcept
{
    const decoded found = decode_at(segment, position);
    if (found.stop) {
        return std::nullopt;
    }
    return record_view{found.payload, found.next_position};
}

bool is_segment_end(std::span<const std::byte> segment, std::uint64_t position) noexcept
{
    if (position > segment.size()) {
        return false;
    }
    if (segment.size() - position < record_header_size) {
        return true;
    }
    return load_u32_little_endian(segment.data() + position) == segment_end_length &&
           load_u32_little_endian(segment.data() + position + 4) == segment_end_checksum;
}

std::string_view describe(scan_stop reason) noexcept
{
    switch (reason) {
    case scan_stop::reached_stop_position: return "the requested stop position";
    case scan_stop::segment_end_marker: return "a segment-end marker";
    case scan_stop::segment_full: return "the end of a full segment";
    case scan_stop::zero_header: return "the end of the written data";
    case scan_stop::bad_checksum: return "a record with a bad checksum";
    case scan_stop::length_past_segment_end: return "a record length that points past the end of the segment";
    case scan_stop::nonzero_padding: return "a record with non-zero padding";
    case scan_stop::invalid_start_position: return "a start position that is not a record boundary";
    }
    return "an unknown reason";
}

scan_result scan_segment(std::span<const std::byte> segment, std::uint64_t start_position,
                         std::uint64_t stop_position) noexcept
{
    scan_result result{start_position, 0, scan_stop::reached_stop_position};
    while (result.end_position < stop_position) {
        const decoded found = decode_at(segment, result.end_position);
        if (found.stop) {
            result.reason = *found.stop;
            return result;
        }
        result.end_position = found.next_position;
        ++result.record_count;
    }
    result.reason = scan_stop::reached_stop_position;
    return result;
}

bool is_record_boundary(std::span<const std::byte> segment, std::uint64_t position) noexcept
{
    if (position < segment_header_size || position > segment.size()) {
        return false;
    }
    return scan_segment(segment, segment_header_size, position).end_position == position;
}

// ---- offsets --------------------------------------------------------------------------------

std::uint64_t normalize_offset(std::span<const std::byte> segment, std::uint64_t segment_index, std::uint64_t position,
                               std::uint64_t log_end) noexcept
{
    const std::uint64_t next_segment = first_record_offset(segment_index + 1, segment.size());
    if (next_segment <= log_end && is_segment_end(segment, position)) {
        return next_segment;
    }
    return logical_offset(segment_index, position, segment.size());
}

// ---- flush mark -----------------------------------------------------------------------------

std::array<std::byte, flush_mark_size> make_flush_mark(std::uint64_t offset) noexcept
{
    std::array<std::byte, flush_mark_size> mark{};
    store_u64_little_endian(mark.data(), offset);
    store_u32_little_endian(mark.data() + 8, crc32c(std::span<const std::byte>(mark.data(), 8)));
    return mark;
}

std::optional<std::uint64_t> read_flush_mark(std::span<const std::byte> mark) noexcept
{
    if (mark.size() < flush_mark_size ||
        load_u32_little_endian(mark.data() + 8) != crc32c(std::span<const std::byte>(mark.data(), 8)) ||
        load_u32_little_endian(mark.data() + 12) != 0) {
        return std::nullopt;
    }
    return load_u64_little_endian(mark.data());
}

// ---- file names -----------------------------------------------------------------------------

std::string segment_file_name(std::uint64_t segment_index)
{
    std::string digits = std::to_string(segment_index);
    return std::string(segment_file_digits - digits.size(), '0') + digits + std::string(segment_file_extension);
}

std::optional<std::uint64_t> parse_segment_file_name(std::string_view name) noexcept
{
    if (name.size() != segment_file_digits + segment_file_extension.size() || !name.ends_with(segment_file_extension)) {
        return std::nullopt;
    }
    std::uint64_t value = 0;
    for (const char digit : name.substr(0, segment_file_digits)) {
        if (digit < '0' || digit > '9') {
            return std::nullopt;
        }
        const auto digit_value = static_cast<std::uint64_t>(digit - '0');
        if (value > (std::numeric_limits<std::uint64_t>::max() - digit_value) / 10) {
            return std::nullopt;
        }
        value = value * 10 + digit_value;
    }
    return value;
}

}  // namespace bufferqueue::detail
