// Helpers shared by the libFuzzer targets (see docs/reliability.md).
#pragma once

#include "bufferqueue/error.hpp"

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>

namespace bufferqueue::fuzz {

/// Aborts (a libFuzzer finding) with `message` when `condition` is false.
inline void require(bool condition, const char* message)
{
    if (!condition) {
        std::fprintf(stderr, "fuzz invariant violated: %s\n", message);
        std::abort();
    }
}

/// The input as bytes.
inline std::span<const std::byte> as_bytes(const std::uint8_t* data, std::size_t size) noexcept
{
    return {reinterpret_cast<const std::byte*>(data), size};
}

/// A rejected input must be rejected as `corrupt_data` with a message; anything else escaping (a
/// foreign exception type, another code) is a finding.
inline void require_corrupt_data(const bufferqueue::error& failure)
{
    require(failure.code() == errc::corrupt_data, failure.what());
    require(std::string(failure.what()).size() > 0, "an error without a message");
}

}  // namespace bufferqueue::fuzz
