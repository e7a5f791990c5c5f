// bufferqueue: CRC-32C (Castagnoli) checksums for the persistent record format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace bufferqueue::detail {

/// Computes the CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of `data`, continuing from
/// `crc`, the checksum of the bytes that precede `data` (0 for none). Uses the standard initial
/// value and final complement, so `crc32c("123456789") == 0xE3069283` and checksums chain:
/// `crc32c(b, crc32c(a)) == crc32c(a + b)`; an empty `data` returns `crc` unchanged.
///
/// Uses the SSE4.2 `crc32` instruction on x86-64 when the processor has it (checked at run time),
/// the ARMv8 CRC32 instructions when the build targets them, and a slicing-by-8 table otherwise.
/// Thread-safe (pure function); never allocates; never fails.
std::uint32_t crc32c(std::span<const std::byte> data, std::uint32_t crc = 0) noexcept;

/// The table-driven (slicing-by-8) implementation that `crc32c` falls back to; same contract and
/// results. Exposed so tests can compare it with the hardware path. Thread-safe; never allocates.
std::uint32_t crc32c_portable(std::span<const std::byte> data, std::uint32_t crc = 0) noexcept;

/// True when `crc32c` uses a hardware instruction on this machine. Thread-safe; never allocates.
bool crc32c_uses_hardware() noexcept;

}  // namespace bufferqueue::detail
