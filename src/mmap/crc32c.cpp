#include "bufferqueue/mmap/detail/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#define BUFFERQUEUE_CRC32C_X86_64 1
#elif defined(__ARM_FEATURE_CRC32)
#include <arm_acle.h>
#define BUFFERQUEUE_CRC32C_ARM 1
#endif

namespace bufferqueue::detail {
namespace {

constexpr std::uint32_t castagnoli_polynomial_reflected = 0x82F63B78U;

using crc_table = std::array<std::array<std::uint32_t, 256>, 8>;

// tables[0] is the classic byte-at-a-time table; tables[k][b] is the CRC of byte b followed by
// k zero bytes, which lets the loop below fold eight input bytes per step.
constexpr crc_table make_tables() noexcept
{
    crc_table tables{};
    for (std::uint32_t byte = 0; byte < 256; ++byte) {
        std::uint32_t crc = byte;
        for (int bit = 0; bit < 8; ++bit) {
            crc = (crc & 1U) != 0 ? (crc >> 1) ^ castagnoli_polynomial_reflected : crc >> 1;
        }
        tables[0][byte] = crc;
    }
    for (std::size_t slice = 1; slice < tables.size(); ++slice) {
        for (std::size_t byte = 0; byte < 256; ++byte) {
            const std::uint32_t previous = tables[slice - 1][byte];
            tables[slice][byte] = (previous >> 8) ^ tables[0][previous & 0xFFU];
        }
    }
    return tables;
}

constexpr crc_table tables = make_tables();

inline std::uint64_t load_word_little_endian(const std::byte* bytes) noexcept
{
    std::uint64_t value = 0;
    for (int index = 7; index >= 0; --index) {
        value = (value << 8) | std::to_integer<std::uint64_t>(bytes[index]);
    }
    return value;
}

inline std::uint32_t update_byte(std::uint32_t state, std::byte value) noexcept
{
    return (state >> 8) ^ tables[0][(state ^ std::to_integer<std::uint32_t>(value)) & 0xFFU];
}

#if defined(BUFFERQUEUE_CRC32C_X86_64)

__attribute__((target("sse4.2"))) std::uint32_t crc32c_sse42(std::span<const std::byte> data,
                                                             std::uint32_t crc) noexcept
{
    const std::byte* position = data.data();
    std::size_t remaining = data.size();
    std::uint64_t state = ~crc;
    while (remaining > 0 && reinterpret_cast<std::uintptr_t>(position) % 8 != 0) {
        state = _mm_crc32_u8(static_cast<std::uint32_t>(state), std::to_integer<std::uint8_t>(*position));
        ++position;
        --remaining;
    }
    while (remaining >= 8) {
        std::uint64_t word;
        std::memcpy(&word, position, sizeof word);
        state = _mm_crc32_u64(state, word);
        position += 8;
        remaining -= 8;
    }
    while (remaining > 0) {
        state = _mm_crc32_u8(static_cast<std::uint32_t>(state), std::to_integer<std::uint8_t>(*position));
        ++position;
        --remaining;
    }
    return ~static_cast<std::uint32_t>(state);
}

#elif defined(BUFFERQUEUE_CRC32C_ARM)

std::uint32_t crc32c_arm(std::span<const std::byte> data, std::uint32_t crc) noexcept
{
    const std::byte* position = data.data();
    std::size_t remaining = data.size();
    std::uint32_t state = ~crc;
    while (remaining > 0 && reinterpret_cast<std::uintptr_t>(position) % 8 != 0) {
        state = __crc32cb(state, std::to_integer<std::uint8_t>(*position));
        ++position;
        --remaining;
    }
    while (remaining >= 8) {
        state = __crc32cd(state, load_word_little_endian(position));
        position += 8;
        remaining -= 8;
    }
    while (remaining > 0) {
        state = __crc32cb(state, std::to_integer<std::uint8_t>(*position));
        ++position;
        --remaining;
    }
    return ~state;
}

#endif

}  // namespace

std::uint32_t crc32c_portable(std::span<const std::byte> data, std::uint32_t crc) noexcept
{
    const std::byte* position = data.data();
    std::size_t remaining = data.size();
    std::uint32_t state = ~crc;
    while (remaining >= 8) {
        const std::uint64_t word = load_word_little_endian(position) ^ state;
        state = tables[7][word & 0xFFU] ^ tables[6][(word >> 8) & 0xFFU] ^ tables[5][(word >> 16) & 0xFFU] ^
                tables[4][(word >> 24) & 0xFFU] ^ tables[3][(word >> 32) & 0xFFU] ^ tables[2][(word >> 40) & 0xFFU] ^
                tables[1][(word >> 48) & 0xFFU] ^ tables[0][word >> 56];
        position += 8;
        remaining -= 8;
    }
    while (remaining > 0) {
        state = update_byte(state, *position);
        ++position;
        --remaining;
    }
    return ~state;
}

bool crc32c_uses_hardware() noexcept
{
#if defined(BUFFERQUEUE_CRC32C_X86_64)
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") != 0;
#elif defined(BUFFERQUEUE_CRC32C_ARM)
    return true;
#else
    return false;
#endif
}

std::uint32_t crc32c(std::span<const std::byte> data, std::uint32_t crc) noexcept
{
#if defined(BUFFERQUEUE_CRC32C_X86_64)
    static const bool has_sse42 = [] {
        __builtin_cpu_init();  // harmless when already done; needed if called before static constructors ran
        return __builtin_cpu_supports("sse4.2") != 0;
    }();
    if (has_sse42) {
        return crc32c_sse42(data, crc);
    }
    return crc32c_portable(data, crc);
#elif defined(BUFFERQUEUE_CRC32C_ARM)
    return crc32c_arm(data, crc);
#else
    return crc32c_portable(data, crc);
#endif
}

}  // namespace bufferqueue::detail
