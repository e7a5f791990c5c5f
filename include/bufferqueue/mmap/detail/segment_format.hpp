// bufferqueue: the on-disk format of segment files (format version 1).
//
// docs/mmap-format.md describes the same layout for readers of the files. All integers are
// little-endian; every record starts at a multiple of 8 bytes from the start of the file.
//
// Segment header, at offset 0 of every segment file (40 bytes):
//
//   offset size field
//        0    8 magic "BQSEGMT\0" (42 51 53 45 47 4D 54 00)
//        8    4 format version, 1
//       12    4 header size in bytes, 40 (where the first record starts)
//       16    8 segment index (the number in the file name)
//       24    8 segment size in bytes (the size of the file)
//       32    4 reserved, 0
//       36    4 CRC-32C of bytes 0..35
//
// Record, at a record boundary (8 + payload length rounded up to a multiple of 8 bytes):
//
//   offset size field
//        0    4 payload length L, 0 .. 0xFFFFFFFE
//        4    4 CRC-32C of bytes 0..3 (the length field as stored) followed by the L payload bytes
//        8    L payload (the serializer's output); an empty payload is a valid record
//      8+L    P zero bytes, 0 <= P < 8, so the record ends at a multiple of 8
//
// Segment-end marker (8 bytes): length 0xFFFFFFFF, then the CRC-32C of those 4 bytes followed by
// the 8 magic bytes, 0x148C3D26 (stored 26 3D 8C 14; the magic is mixed in because the CRC of
// four 0xFF bytes alone is 0xFFFFFFFF, which an area of 0xFF bytes would match). A writer puts it
// where the next record does not fit; the rest of the segment is unused. Since the header and every record are
// multiples of 8 and segment sizes are too, a segment whose last record ends exactly at its end
// needs no marker (that is the only case with fewer than 8 bytes left).
//
// The end of the written data is the first position that does not hold a valid record: space
// never written is zero, and 8 zero bytes are not a valid record header because the CRC-32C of
// four zero bytes is 0x48674BC7, not 0. A torn record fails its CRC (or its length points past
// the end of the segment, or its padding is not zero), and so does a flipped bit anywhere in a
// record or in a marker.
//
// Flush mark: the partition file `flush.mark` (16 bytes) says how far the log was flushed, so that
// recovery can tell damage inside flushed data from a torn tail without an extra fsync per flush:
//
//   offset size field
//        0    8 logical offset F (below): every byte of the log before F was flushed (msync done)
//        8    4 CRC-32C of bytes 0..7
//       12    4 reserved, 0
//
// The writer maps the file once and stores a new mark after every msync of the log has completed:
// a memory store, never synced itself. It reaches the disk with the kernel's writeback, so after a
// crash that kept the page cache (SIGKILL) it covers every completed flush, and after a power loss
// it may be older (or absent, or not valid: then recovery ignores it) but never claims more than
// was flushed. F is always a record boundary. The segment format itself is unchanged by it.
//
// Logical offsets: `offset = segment_index * segment_size + position`, where position is a byte
// position within the segment file. A record boundary is position 40 (right after the header) or
// the position right after a complete valid record. An offset that points at a segment-end marker
// or at the very end of a full segment is equivalent to the first record boundary of the next
// segment (once that segment exists); `normalize_offset` maps it there, and checkpoints always hold normalized offsets,
// so the first offset of a partition is 40 and no checkpoint is ever `k * segment_size + p` with p < 40.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace bufferqueue::detail {

// ---------------------------------------------------------------------------------------------
// Constants and sizes
// ---------------------------------------------------------------------------------------------

/// The first 8 bytes of every segment file.
inline constexpr std::array<std::byte, 8> segment_magic = {std::byte{'B'}, std::byte{'Q'}, std::byte{'S'},
                                                           std::byte{'E'}, std::byte{'G'}, std::byte{'M'},
                                                           std::byte{'T'}, std::byte{0}};

/// The format version this build writes and reads.
inline constexpr std::uint32_t segment_format_version = 1;

/// The size of the segment header; also the position of the first record boundary of a segment.
inline constexpr std::uint64_t segment_header_size = 40;

/// The size of a record's length and CRC fields; also the size of a segment-end marker.
inline constexpr std::uint64_t record_header_size = 8;

/// Records start at and are padded to multiples of this many bytes.
inline constexpr std::uint64_t record_alignment = 8;

/// The length field value that marks the end of a segment's records.
inline constexpr std::uint32_t segment_end_length = 0xFFFF'FFFFU;

/// The checksum field of a segment-end marker: the CRC-32C of the length field (four 0xFF bytes)
/// followed by the 8 magic bytes. (The CRC-32C of the four 0xFF bytes alone is 0xFFFFFFFF, which
/// would let an area of 0xFF bytes pass for a marker.)
inline constexpr std::uint32_t segment_end_checksum = 0x148C'3D26U;

/// The largest payload length a record can declare.
inline constexpr std::uint64_t max_record_payload_size = 0xFFFF'FFFEU;

/// The smallest valid segment size, 64 bytes: the header, one record of up to 8 payload bytes and
/// the segment-end marker after it. The one definition of the minimum: `is_valid_segment_size`
/// (and so the `segment_size` option of mmap topics) and docs/mmap-format.md use it.
inline constexpr std::uint64_t min_segment_size = 64;

/// The largest valid segment size, 2^40 bytes.
inline constexpr std::uint64_t max_segment_size = std::uint64_t{1} << 40;

/// The bytes a record with a `payload_size`-byte payload takes: 8 + payload rounded up to 8.
/// `payload_size` must not exceed `max_record_payload_size`.
constexpr std::uint64_t record_size(std::uint64_t payload_size) noexcept
{
    return record_header_size + (payload_size + record_alignment - 1) / record_alignment * record_alignment;
}

static_assert(min_segment_size == segment_header_size + record_size(8) + record_header_size);

/// True when `segment_size` is a multiple of `record_alignment` between `min_segment_size` and
/// `max_segment_size`: the one check of a segment size (the `segment_size` option of mmap topics).
constexpr bool is_valid_segment_size(std::uint64_t segment_size) noexcept
{
    return segment_size % record_alignment == 0 && segment_size >= min_segment_size && segment_size <= max_segment_size;
}

/// The largest payload a segment of `segment_size` bytes can hold (in a record right after the
/// header); producers reject a larger payload with `errc::invalid_argument`. 0 for a segment size
/// below 48 bytes (a header and an empty record).
constexpr std::uint64_t max_payload_size(std::uint64_t segment_size) noexcept
{
    constexpr std::uint64_t headers = segment_header_size + record_header_size;
    if (segment_size < headers) {
        return 0;
    }
    const std::uint64_t room = (segment_size - headers) / record_alignment * record_alignment;
    return room < max_record_payload_size ? room : max_record_payload_size;
}

/// True when a record with a `payload_size`-byte payload, written at `position`, ends within a
/// segment of `segment_size` bytes. When it does not fit the writer ends the segment with
/// `encode_segment_end` (if any bytes remain) and writes the record in the next segment.
constexpr bool fits(std::uint64_t segment_size, std::uint64_t position, std::uint64_t payload_size) noexcept
{
    return payload_size <= max_record_payload_size && position <= segment_size &&
           record_size(payload_size) <= segment_size - position;
}

// ---------------------------------------------------------------------------------------------
// Little-endian helpers
// ---------------------------------------------------------------------------------------------

/// Reads a little-endian u32 from the first 4 bytes of `source`. Never allocates.
constexpr std::uint32_t load_u32_little_endian(const std::byte* source) noexcept
{
    return std::to_integer<std::uint32_t>(source[0]) | std::to_integer<std::uint32_t>(source[1]) << 8 |
           std::to_integer<std::uint32_t>(source[2]) << 16 | std::to_integer<std::uint32_t>(source[3]) << 24;
}

/// Reads a little-endian u64 from the first 8 bytes of `source`. Never allocates.
constexpr std::uint64_t load_u64_little_endian(const std::byte* source) noexcept
{
    return std::uint64_t{load_u32_little_endian(source)} | std::uint64_t{load_u32_little_endian(source + 4)} << 32;
}

/// Writes `value` little-endian into the first 4 bytes of `destination`. Never allocates.
constexpr void store_u32_little_endian(std::byte* destination, std::uint32_t value) noexcept
{
    for (int index = 0; index < 4; ++index) {
        destination[index] = static_cast<std::byte>(value >> (8 * index));
    }
}

/// Writes `value` little-endian into the first 8 bytes of `destination`. Never allocates.
constexpr void store_u64_little_endian(std::byte* destination, std::uint64_t value) noexcept
{
    for (int index = 0; index < 8; ++index) {
        destination[index] = static_cast<std::byte>(value >> (8 * index));
    }
}

// ---------------------------------------------------------------------------------------------
// Segment header
// ---------------------------------------------------------------------------------------------

/// The header of segment `segment_index` of a topic with `segment_size`-byte segments.
/// Thread-safe; never allocates.
std::array<std::byte, segment_header_size> make_segment_header(std::uint64_t segment_index,
                                                               std::uint64_t segment_size) noexcept;

/// Checks the header at the start of `segment` (the whole segment, or at least its first
/// `segment_header_size` bytes): magic, version, header size, CRC, reserved field, and that it
/// belongs to segment `expected_index` of `expected_size` bytes. Returns `std::nullopt` when it
/// is valid, otherwise a description of the first problem ("the magic is not ..."). Thread-safe;
/// allocates only the description.
std::optional<std::string> validate_segment_header(std::span<const std::byte> segment, std::uint64_t expected_index,
                                                   std::uint64_t expected_size);

/// Like `validate_segment_header`, but throws `error(errc::corrupt_data)` whose message names
/// `file_path` and the problem when the header is invalid.
void check_segment_header(std::span<const std::byte> segment, std::uint64_t expected_index, std::uint64_t expected_size,
                          const std::string& file_path);

// ---------------------------------------------------------------------------------------------
// Records
// ---------------------------------------------------------------------------------------------

/// Writes a record holding `payload` at the start of `destination` (length, CRC, payload, zero
/// padding) and returns its size, `record_size(payload.size())`. Throws
/// `error(errc::invalid_argument)` when the payload is longer than `max_record_payload_size` or
/// `destination` is shorter than the record. Thread-safe for disjoint destinations; never
/// allocates except for the exception.
std::uint64_t encode_record(std::span<std::byte> destination, std::span<const std::byte> payload);

/// Writes a segment-end marker (`record_header_size` bytes) at the start of `destination`.
/// Throws `error(errc::invalid_argument)` when `destination` is shorter than that.
void encode_segment_end(std::span<std::byte> destination);

/// A valid record found by `read_record`.
struct record_view {
    std::span<const std::byte> payload;  ///< the payload bytes, inside the segment passed in
    std::uint64_t next_position;         ///< the record boundary right after this record
};

/// The valid record at `position` of `segment`, or `std::nullopt` when there is none: the end of
/// the written data, a segment-end marker or the end of the segment (see `is_segment_end`), a
/// damaged or torn record, or a position that is not 8-aligned, before the first record boundary
/// or past the end. Verifies the CRC. Thread-safe; never allocates.
std::optional<record_view> read_record(std::span<const std::byte> segment, std::uint64_t position) noexcept;

/// True when `position` of `segment` holds a valid segment-end marker or fewer than
/// `record_header_size` bytes remain after it (the segment has no further records).
/// Thread-safe; never allocates.
bool is_segment_end(std::span<const std::byte> segment, std::uint64_t position) noexcept;

/// Why `scan_segment` stopped.
enum class scan_stop {
    reached_stop_position,    ///< reached the `stop_position` it was given
    segment_end_marker,       ///< found a valid segment-end marker: the segment is complete
    segment_full,             ///< fewer than 8 bytes left after the last record: the segment is complete
    zero_header,              ///< 8 zero bytes: the end of the written data
    bad_checksum,             ///< a record (or marker) whose CRC does not match: torn or damaged
    length_past_segment_end,  ///< a length field that points past the end of the segment
    nonzero_padding,          ///< a record whose padding bytes are not zero: torn or damaged
    invalid_start_position,   ///< the start position is not 8-aligned, before 40 or past the end
};

/// A short English description of `reason` ("a record with a bad checksum"). Never allocates.
std::string_view describe(scan_stop reason) noexcept;

/// What `scan_segment` found.
struct scan_result {
    std::uint64_t end_position;  ///< the record boundary after the last valid record scanned
    std::uint64_t record_count;  ///< how many valid records it walked over
    scan_stop reason;            ///< why it stopped at `end_position`

    /// True when the segment holds no further records: it ended with a segment-end marker at
    /// `end_position` or is full.
    bool segment_complete() const noexcept
    {
        return reason == scan_stop::segment_end_marker || reason == scan_stop::segment_full;
    }
};

/// Walks the valid records of `segment` (the whole segment file's bytes) from the record boundary
/// `start_position`, stopping at the first position that does not hold a valid record or at
/// `stop_position`, whichever comes first. Returns the position after the last valid record and why
/// it stopped. A record that would extend past `stop_position` is still walked over, so
/// `is_record_boundary` can check a position by scanning to it. Thread-safe; never allocates.
scan_result scan_segment(std::span<const std::byte> segment, std::uint64_t start_position,
                         std::uint64_t stop_position = std::numeric_limits<std::uint64_t>::max()) noexcept;

/// True when `position` is a record boundary of `segment`: the first record boundary, or reached
/// by walking valid records from it (this reads every record before `position`).
bool is_record_boundary(std::span<const std::byte> segment, std::uint64_t position) noexcept;

// ---------------------------------------------------------------------------------------------
// Logical offsets
// ---------------------------------------------------------------------------------------------

/// A logical offset split into a segment and a byte position within it.
struct segment_position {
    std::uint64_t segment_index;  ///< the segment (the number in its file name)
    std::uint64_t position;       ///< the byte position within that segment file

    /// Member-wise equality.
    friend bool operator==(const segment_position&, const segment_position&) = default;
};

/// `segment_index * segment_size + position`. Never allocates.
constexpr std::uint64_t logical_offset(std::uint64_t segment_index, std::uint64_t position,
                                       std::uint64_t segment_size) noexcept
{
    return segment_index * segment_size + position;
}

/// The inverse of `logical_offset`: `{offset / segment_size, offset % segment_size}`. The position
/// of a normalized offset is always at least `segment_header_size`. Never allocates.
constexpr segment_position split_offset(std::uint64_t offset, std::uint64_t segment_size) noexcept
{
    return {offset / segment_size, offset % segment_size};
}

/// The offset of the first record boundary of segment `segment_index`. Never allocates.
constexpr std::uint64_t first_record_offset(std::uint64_t segment_index, std::uint64_t segment_size) noexcept
{
    return logical_offset(segment_index, segment_header_size, segment_size);
}

/// The normalized logical offset of the record boundary `position` in segment `segment_index`, whose
/// bytes are `segment`: the first record boundary of the next segment when the log reaches it
/// (`log_end`, the logical offset one past the last published record, is at least that offset) and
/// `is_segment_end(segment, position)`; otherwise `logical_offset(segment_index, position,
/// segment.size())`. The one normalization rule: readers, retention and tests use it. It reads
/// `segment` at `position` only once the next segment exists, so bytes a writer may still be
/// writing are never read. Does not check that `position` is a record boundary. Thread-safe;
/// never allocates.
std::uint64_t normalize_offset(std::span<const std::byte> segment, std::uint64_t segment_index, std::uint64_t position,
                               std::uint64_t log_end) noexcept;

// ---------------------------------------------------------------------------------------------
// Flush mark
// ---------------------------------------------------------------------------------------------

/// The size of a partition's flush mark file, `flush.mark`.
inline constexpr std::uint64_t flush_mark_size = 16;

/// The 16 bytes of a flush mark for logical offset `offset`. Never allocates.
std::array<std::byte, flush_mark_size> make_flush_mark(std::uint64_t offset) noexcept;

/// The offset in the flush mark `mark` (its first `flush_mark_size` bytes), or `std::nullopt` when
/// it is shorter, its CRC does not match or its reserved field is not zero (a mark never written,
/// or torn: recovery then knows no more than the checkpoints say). Never allocates.
std::optional<std::uint64_t> read_flush_mark(std::span<const std::byte> mark) noexcept;

// ---------------------------------------------------------------------------------------------
// File names
// ---------------------------------------------------------------------------------------------

/// The file name of segment `segment_index`: 20 decimal digits and ".log"
/// ("00000000000000000001.log"). Allocates the result.
std::string segment_file_name(std::uint64_t segment_index);

/// The segment index in a file name made by `segment_file_name`, or `std::nullopt` when `name`
/// is not exactly 20 decimal digits (within the u64 range) followed by ".log". Never allocates.
std::optional<std::uint64_t> parse_segment_file_name(std::string_view name) noexcept;

}  // namespace bufferqueue::detail
