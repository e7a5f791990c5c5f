// The checkpoint file format; the layout is described in checkpoint_format.hpp.
#include "bufferqueue/mmap/detail/checkpoint_format.hpp"

#include "bufferqueue/mmap/detail/crc32c.hpp"
#include "bufferqueue/mmap/detail/segment_format.hpp"

#include "bufferqueue/detail/message.hpp"

namespace bufferqueue::detail {

namespace {

constexpr std::size_t checksummed_bytes = 12;  // value and version

std::string hex(std::uint32_t value)
{
    return detail::format_message("0x{:08X}", value);
}

std::string negative(std::uint64_t value)
{
    return detail::format_message("holds a negative offset ({})", static_cast<std::int64_t>(value));
}

}  // namespace

std::array<std::byte, checkpoint_size> encode_checkpoint(std::uint64_t value) noexcept
{
    std::array<std::byte, checkpoint_size> bytes{};
    store_u64_little_endian(bytes.data(), value);
    store_u32_little_endian(bytes.data() + 8, checkpoint_format_version);
    store_u32_little_endian(bytes.data() + checksummed_bytes,
                            crc32c(std::span<const std::byte>(bytes.data(), checksummed_bytes)));
    return bytes;
}

checkpoint_decoding decode_checkpoint(std::span<const std::byte> contents)
{
    if (contents.size() == checkpoint_v1_size) {
        const std::uint64_t value = load_u64_little_endian(contents.data());
        if (value > max_checkpoint_value) {
            return negative(value);
        }
        return value;
    }
    if (contents.size() != checkpoint_size) {
        return detail::format_message(
            "is {} bytes long; a checkpoint is {} bytes (format version 2) or {} bytes (version 1)", contents.size(),
            checkpoint_size, checkpoint_v1_size);
    }
    const std::uint32_t stored = load_u32_little_endian(contents.data() + checksummed_bytes);
    const std::uint32_t computed = crc32c(contents.first(checksummed_bytes));
    if (stored != computed) {
        return detail::format_message("fails its checksum (stored {}, computed {})", hex(stored), hex(computed));
    }
    const std::uint32_t version = load_u32_little_endian(contents.data() + 8);
    if (version != checkpoint_format_version) {
        return detail::format_message("has format version {}; this library reads versions 1 and {}", version,
                                      checkpoint_format_version);
    }
    const std::uint64_t value = load_u64_little_endian(contents.data());
    if (value > max_checkpoint_value) {
        return negative(value);
    }
    return value;
}

std::array<std::byte, item_position_size> encode_item_position(log_position position) noexcept
{
    std::array<std::byte, item_position_size> bytes{};
    store_u64_little_endian(bytes.data(), position.offset);
    store_u64_little_endian(bytes.data() + 8, position.items);
    store_u32_little_endian(bytes.data() + 16, item_position_format_version);
    store_u32_little_endian(bytes.data() + 20, crc32c(std::span<const std::byte>(bytes.data(), 20)));
    return bytes;
}

item_position_decoding decode_item_position(std::span<const std::byte> contents)
{
    if (contents.size() != item_position_size) {
        return detail::format_message("is {} bytes long; an item position is {} bytes", contents.size(),
                                      item_position_size);
    }
    const std::uint32_t stored = load_u32_little_endian(contents.data() + 20);
    const std::uint32_t computed = crc32c(contents.first(20));
    if (stored != computed) {
        return detail::format_message("fails its checksum (stored {}, computed {})", hex(stored), hex(computed));
    }
    const std::uint32_t version = load_u32_little_endian(contents.data() + 16);
    if (version != item_position_format_version) {
        return detail::format_message("has format version {}; this library reads version {}", version,
                                      item_position_format_version);
    }
    const log_position position{load_u64_little_endian(contents.data()), load_u64_little_endian(contents.data() + 8)};
    if (position.offset > max_checkpoint_value) {
        return negative(position.offset);
    }
    return position;
}

}  // namespace bufferqueue::detail
