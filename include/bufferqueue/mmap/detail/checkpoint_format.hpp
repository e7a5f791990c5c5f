// bufferqueue: the on-disk format of checkpoint files (producer.offset, earliest.offset and
// offsets/{group}/consumer.offset), format version 2.
//
// docs/mmap-format.md describes the same layout for readers of the files. All integers are
// little-endian.
//
// Version 2 (written by this library; 16 bytes):
//
//   offset size field
//        0    8 the value: a log offset, 0 .. 0x7FFFFFFFFFFFFFFF
//        8    4 format version, 2
//       12    4 CRC-32C of bytes 0..11
//
// Version 1 (written by earlier releases; still read): exactly 8 bytes, the value alone. It
// carries no checksum, so a damaged version-1 file can only be rejected when its value is
// negative; the next write of that checkpoint replaces it with version 2.
//
// The size tells the versions apart. Any other size, a version-2 file whose checksum does not
// match, a version other than 2 in a 16-byte file, or a negative value is corrupt.
//
// Item position (`earliest.items`, format version 1; 24 bytes): where a partition's item count
// stands at a log offset, so that item statistics survive the deletion of old segments.
//
//   offset size field
//        0    8 a log offset: the first record boundary of a segment, 0 .. 0x7FFFFFFFFFFFFFFF
//        8    8 the item index of the record at that offset (how many records came before it)
//       16    4 format version, 1
//       20    4 CRC-32C of bytes 0..19
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <variant>

namespace bufferqueue::detail {

/// The largest value a checkpoint can hold: checkpoints are read as signed 64-bit integers, and a
/// negative one is corrupt.
inline constexpr std::uint64_t max_checkpoint_value = 0x7FFF'FFFF'FFFF'FFFFULL;

/// The version of the checkpoint files this library writes.
inline constexpr std::uint32_t checkpoint_format_version = 2;

/// The size of a version-2 checkpoint file.
inline constexpr std::size_t checkpoint_size = 16;

/// The size of a version-1 checkpoint file (read, never written).
inline constexpr std::size_t checkpoint_v1_size = 8;

/// The bytes of a version-2 checkpoint holding `value` (which must not exceed
/// `max_checkpoint_value`; the caller checks). Thread-safe; never allocates.
std::array<std::byte, checkpoint_size> encode_checkpoint(std::uint64_t value) noexcept;

/// What decoding the contents of a checkpoint file found: its value, or why it is corrupt (a
/// sentence fragment such as "fails its checksum (stored 0x..., computed 0x...)", to follow the
/// file's name in an error message).
using checkpoint_decoding = std::variant<std::uint64_t, std::string>;

/// Decodes the complete contents of a checkpoint file, version 2 or version 1. Thread-safe;
/// allocates only the explanation of a corrupt file; never throws except `std::bad_alloc`.
checkpoint_decoding decode_checkpoint(std::span<const std::byte> contents);

/// A log offset and the item index of the record there (records before it, counted from the first
/// record the partition ever held).
struct log_position {
    std::uint64_t offset = 0;
    std::uint64_t items = 0;

    /// Member-wise equality.
    friend bool operator==(const log_position&, const log_position&) = default;
};

/// The version of the item position files this library writes.
inline constexpr std::uint32_t item_position_format_version = 1;

/// The size of an item position file.
inline constexpr std::size_t item_position_size = 24;

/// The bytes of an item position file holding `position` (whose offset must not exceed
/// `max_checkpoint_value`; the caller checks). Thread-safe; never allocates.
std::array<std::byte, item_position_size> encode_item_position(log_position position) noexcept;

/// What decoding an item position file found: the position, or why it is corrupt (as in
/// `checkpoint_decoding`).
using item_position_decoding = std::variant<log_position, std::string>;

/// Decodes the complete contents of an item position file. Thread-safe; allocates only the
/// explanation of a corrupt file; never throws except `std::bad_alloc`.
item_position_decoding decode_item_position(std::span<const std::byte> contents);

}  // namespace bufferqueue::detail
