// bufferqueue: the on-disk format of `{topic}/topic.options`, the options that define a persistent
// topic's stored data (format version 1). Written when a folder is first opened (or first opened by
// a release that knows the file), rewritten when `partitions` grows, compared at every open.
//
// docs/mmap-format.md ("Topic options") describes the same layout for readers of the files. All
// integers are little-endian. 36 + N bytes:
//
//   offset size field
//        0    8 magic "BQTOPIC\0" (42 51 54 4F 50 49 43 00)
//        8    4 format version, 1
//       12    4 serializer name length N, at most 4000
//       16    8 partitions, at least 1
//       24    8 segment size in bytes (a valid segment_size: a multiple of 8, 64 .. 2^40)
//       32    N serializer name: the type name of the topic's serializer (no terminating NUL)
//   32 + N    4 CRC-32C of bytes 0 .. 31 + N
//
// A file of another size than 36 + N, another magic or version, a CRC that does not match, no
// partitions or an invalid segment size is corrupt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace bufferqueue::detail {

/// The options of a persistent topic that define its stored data. `max_retained_consumed_segments`
/// is not one of them: it only decides which consumed segments are deleted from now on, so it may
/// change between opens (process-shared queues that have the folder open at once compare it in the
/// shared header).
struct stored_topic_options {
    std::uint64_t partitions = 1;
    std::uint64_t segment_size = 0;
    std::string serializer_name{};  ///< at most `topic_options_layout::max_serializer_name` bytes

    /// Member-wise equality.
    friend bool operator==(const stored_topic_options&, const stored_topic_options&) = default;
};

/// Names and sizes of the layout above.
struct topic_options_layout {
    static constexpr std::string_view file_name = "topic.options";
    static constexpr std::uint32_t version = 1;
    static constexpr std::size_t fixed_size = 36;  ///< the file without the serializer name
    static constexpr std::size_t max_serializer_name = 4000;
    static constexpr std::size_t max_size = fixed_size + max_serializer_name;
};

/// `name` cut to the bytes the file keeps (`topic_options_layout::max_serializer_name`). Never
/// throws except `std::bad_alloc`.
std::string stored_serializer_name(std::string_view name);

/// The bytes of a topic options file holding `options` (its serializer name cut as
/// `stored_serializer_name` cuts it). Thread-safe; allocates the result.
std::vector<std::byte> encode_topic_options(const stored_topic_options& options);

/// What decoding a topic options file found: the options, or why the file is corrupt (a sentence
/// fragment such as "fails its checksum (stored 0x..., computed 0x...)", to follow the file's name
/// in an error message).
using topic_options_decoding = std::variant<stored_topic_options, std::string>;

/// Decodes the complete contents of a topic options file. Thread-safe; never reads outside
/// `contents`; allocates the name or the explanation; never throws except `std::bad_alloc`.
topic_options_decoding decode_topic_options(std::span<const std::byte> contents);

}  // namespace bufferqueue::detail
