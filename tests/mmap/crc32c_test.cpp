#include "bufferqueue/mmap/detail/crc32c.hpp"

#include "catch.hpp"

#include <cstdint>
#include <random>
#include <span>
#include <string_view>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace crc32c_test {

namespace {

using bufferqueue::detail::crc32c;
using bufferqueue::detail::crc32c_portable;

std::span<const std::byte> as_bytes(std::string_view text)
{
    return std::as_bytes(std::span<const char>(text.data(), text.size()));
}

std::vector<std::byte> random_bytes(std::size_t size, std::uint32_t seed)
{
    std::mt19937 generator(seed);
    std::uniform_int_distribution<int> distribution(0, 255);
    std::vector<std::byte> bytes(size);
    for (std::byte& byte : bytes) {
        byte = static_cast<std::byte>(distribution(generator));
    }
    return bytes;
}

}  // namespace

TEST_CASE("crc32c: the check value of \"123456789\" is 0xE3069283 on both paths", "[crc32c]")
{
    CHECK(crc32c(as_bytes("123456789")) == 0xE3069283U);
    CHECK(crc32c_portable(as_bytes("123456789")) == 0xE3069283U);
}

TEST_CASE("crc32c: the iSCSI test vectors of RFC 3720 match on both paths", "[crc32c]")
{
    std::vector<std::byte> zeros(32, std::byte{0x00});
    std::vector<std::byte> ones(32, std::byte{0xFF});
    std::vector<std::byte> ascending(32);
    std::vector<std::byte> descending(32);
    for (std::size_t index = 0; index < 32; ++index) {
        ascending[index] = static_cast<std::byte>(index);
        descending[index] = static_cast<std::byte>(31 - index);
    }
    for (const auto checksum : {&crc32c, &crc32c_portable}) {
        CHECK(checksum(zeros, 0) == 0x8A9136AAU);
        CHECK(checksum(ones, 0) == 0x62A8AB43U);
        CHECK(checksum(ascending, 0) == 0x46DD794EU);
        CHECK(checksum(descending, 0) == 0x113FDB5CU);
    }
}

TEST_CASE("crc32c: an empty input leaves the running checksum unchanged", "[crc32c]")
{
    CHECK(crc32c({}) == 0U);
    CHECK(crc32c({}, 0xDEADBEEFU) == 0xDEADBEEFU);
    CHECK(crc32c_portable({}, 0xDEADBEEFU) == 0xDEADBEEFU);
}

TEST_CASE("crc32c: four zero bytes have a nonzero checksum, so a zero-filled record header is invalid", "[crc32c]")
{
    const std::vector<std::byte> zeros(4, std::byte{0});
    CHECK(crc32c(zeros) == 0x48674BC7U);
    CHECK(crc32c(zeros) != 0U);
}

TEST_CASE("crc32c: checksums chain at every split point", "[crc32c]")
{
    const std::vector<std::byte> data = random_bytes(100, 7);
    const std::span<const std::byte> whole(data);
    const std::uint32_t expected = crc32c(whole);
    for (std::size_t split = 0; split <= data.size(); ++split) {
        INFO("split at " << split);
        CHECK(crc32c(whole.subspan(split), crc32c(whole.first(split))) == expected);
        CHECK(crc32c_portable(whole.subspan(split), crc32c_portable(whole.first(split))) == expected);
    }
}

TEST_CASE("crc32c: hardware and table paths agree on every length and alignment", "[crc32c]")
{
    INFO("hardware path in use: " << bufferqueue::detail::crc32c_uses_hardware());
    const std::vector<std::byte> data = random_bytes(300 + 16, 42);
    for (std::size_t start = 0; start < 16; ++start) {
        for (std::size_t length = 0; length + start <= data.size() && length <= 300; ++length) {
            const auto slice = std::span<const std::byte>(data).subspan(start, length);
            const std::uint32_t seed = static_cast<std::uint32_t>(start * 0x9E3779B9U);
            if (crc32c(slice, seed) != crc32c_portable(slice, seed)) {
                FAIL("the paths disagree at start " << start << ", length " << length);
            }
        }
    }
    SUCCEED();
}

TEST_CASE("crc32c: a single changed byte always changes the checksum", "[crc32c]")
{
    std::vector<std::byte> data = random_bytes(64, 3);
    const std::uint32_t original = crc32c(data);
    for (std::size_t index = 0; index < data.size(); ++index) {
        for (const std::byte mask : {std::byte{0x01}, std::byte{0x80}, std::byte{0xFF}}) {
            data[index] ^= mask;
            CHECK(crc32c(data) != original);
            data[index] ^= mask;
        }
    }
}

}  // namespace crc32c_test
