// libFuzzer target: the segment scanner on arbitrary bytes. The input is a whole segment (cut to a
// multiple of 8 bytes). Checks that validate_segment_header, read_record, is_segment_end,
// scan_segment, is_record_boundary and normalize_offset never read outside the segment, agree with
// each other, and that every record they accept really has a matching CRC-32C.
#include "bufferqueue/mmap/detail/crc32c.hpp"
#include "bufferqueue/mmap/detail/segment_format.hpp"

#include "fuzz_support.hpp"

#include <cstdint>
#include <limits>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    namespace bq = bufferqueue;
    namespace detail = bufferqueue::detail;
    using bq::fuzz::require;
    // A copy of exactly the segment's size, so ASan sees any read past its end.
    const std::size_t segment_size = size / detail::record_alignment * detail::record_alignment;
    const std::vector<std::byte> copy(reinterpret_cast<const std::byte*>(data),
                                      reinterpret_cast<const std::byte*>(data) + segment_size);
    const std::span<const std::byte> segment(copy);

    (void)detail::validate_segment_header(segment, 0, segment.size());

    const detail::scan_result scanned = detail::scan_segment(segment, detail::segment_header_size);
    require(scanned.end_position <= segment.size() || scanned.reason == detail::scan_stop::invalid_start_position,
            "scan_segment ended past the segment");
    require(!detail::describe(scanned.reason).empty(), "a scan_stop without a description");

    // Walk the same records one by one: the walk and the scan must agree.
    std::uint64_t position = detail::segment_header_size;
    std::uint64_t count = 0;
    while (const auto record = detail::read_record(segment, position)) {
        require(record->next_position > position && record->next_position <= segment.size(),
                "read_record returned a record outside the segment");
        require(record->next_position % detail::record_alignment == 0, "a record ends off the 8-byte grid");
        require(record->payload.size() == detail::load_u32_little_endian(segment.data() + position),
                "a record's payload size differs from its length field");
        // The CRC-32C, computed here with the portable table, covers the length field and the payload.
        const std::uint32_t expected =
            detail::crc32c_portable(record->payload, detail::crc32c_portable(segment.subspan(position, 4)));
        require(expected == detail::load_u32_little_endian(segment.data() + position + 4),
                "read_record accepted a record whose CRC-32C does not match");
        require(detail::is_record_boundary(segment, record->next_position), "the end of a record is not a boundary");
        position = record->next_position;
        ++count;
    }
    if (segment.size() >= detail::segment_header_size) {
        require(count == scanned.record_count && position == scanned.end_position,
                "read_record and scan_segment disagree");
        require(scanned.segment_complete() == detail::is_segment_end(segment, position),
                "scan_segment and is_segment_end disagree about the end of the segment");
        const std::uint64_t normalized =
            detail::normalize_offset(segment, 0, position, std::numeric_limits<std::uint64_t>::max());
        require(normalized == position || normalized == segment.size() + detail::segment_header_size,
                "normalize_offset moved a position somewhere unexpected");
    }
    // Every 8-aligned position: read_record is either nothing or a record inside the segment.
    for (std::uint64_t at = 0; at < segment.size(); at += detail::record_alignment) {
        if (const auto record = detail::read_record(segment, at)) {
            require(record->next_position <= segment.size(), "read_record ran past the segment");
        }
    }
    // A scan up to a stop position never goes past a record boundary after it.
    const std::uint64_t stop = segment.size() / 2 / detail::record_alignment * detail::record_alignment;
    const detail::scan_result partial = detail::scan_segment(segment, detail::segment_header_size, stop);
    require(partial.record_count <= scanned.record_count || segment.size() < detail::segment_header_size,
            "a scan with a stop position found more records than a full scan");
    return 0;
}
