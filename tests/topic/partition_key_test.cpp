#include "bufferqueue/partition_key.hpp"

#include "catch.hpp"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace partition_key_test {

namespace {

namespace bq = bufferqueue;
using bq::partition_for_key;

constexpr std::uint32_t all_values = std::numeric_limits<std::uint32_t>::max();

// The reference fold of the issue, over UTF-16 code units written out by hand in each test.
std::uint64_t fold_units(std::initializer_list<std::uint32_t> units)
{
    std::uint64_t folded = 0;
    for (std::uint32_t unit : units) {
        folded = folded * 31 + unit;
    }
    return folded;
}

std::uint32_t string_partition(std::string_view key, std::uint32_t partitions)
{
    return partition_for_key(key, partitions);
}

// The code of the bufferqueue::error `action` throws, or a default code when it throws nothing.
template <class Action>
std::error_code thrown_code(Action&& action)
{
    try {
        action();
    } catch (const bq::error& failure) {
        return failure.code();
    }
    return {};
}

struct keyed {
    std::string name;
    std::int64_t id = 0;
    double weight = 0;
};

}  // namespace

// Routing is a pure function of the key, so it can even run at compile time: no std::hash, no seed.
static_assert(partition_for_key(17, 16) == 0);
static_assert(partition_for_key(std::string_view("cust-0001"), 16) == 3);
static_assert(bq::partition_key_type<int> && bq::partition_key_type<std::uint64_t> && bq::partition_key_type<double>);
static_assert(bq::partition_key_type<std::string> && bq::partition_key_type<std::string_view> &&
              bq::partition_key_type<const char*>);
static_assert(!bq::partition_key_type<bool> && !bq::partition_key_type<void*>);

TEST_CASE("partition key: integral keys use the normalized modulo of key - 1 (the issue's table)", "[routing]")
{
    CHECK(partition_for_key(17, 16) == 0);
    CHECK(partition_for_key(16, 16) == 15);
    CHECK(partition_for_key(0, 16) == 15);
    CHECK(partition_for_key(-1, 16) == 14);
    CHECK(partition_for_key(std::numeric_limits<std::int32_t>::min(), 16) == 15);
    CHECK(partition_for_key(std::numeric_limits<std::int32_t>::max(), 16) == 14);
    CHECK(partition_for_key(1, 16) == 0);
    CHECK(partition_for_key(2, 16) == 1);
    CHECK(partition_for_key(-15, 16) == 0);
    CHECK(partition_for_key(-16, 16) == 15);
}

TEST_CASE("partition key: integral routing matches (key - 1) mod n for small keys of every width", "[routing]")
{
    for (std::uint32_t partitions = 1; partitions <= 20; ++partitions) {
        for (std::int64_t key = -100; key <= 100; ++key) {
            const auto n = static_cast<std::int64_t>(partitions);
            const auto expected = static_cast<std::uint32_t>((((key - 1) % n) + n) % n);
            INFO("key " << key << ", partitions " << partitions);
            CHECK(partition_for_key(key, partitions) == expected);
            CHECK(partition_for_key(static_cast<std::int32_t>(key), partitions) == expected);
            CHECK(partition_for_key(static_cast<short>(key), partitions) == expected);
            CHECK(partition_for_key(static_cast<signed char>(key), partitions) == expected);
            if (key >= 0) {
                CHECK(partition_for_key(static_cast<std::uint64_t>(key), partitions) == expected);
                CHECK(partition_for_key(static_cast<std::uint32_t>(key), partitions) == expected);
                CHECK(partition_for_key(static_cast<unsigned char>(key), partitions) == expected);
            }
        }
    }
}

TEST_CASE("partition key: unsigned and 64-bit extremes route without overflow", "[routing]")
{
    constexpr auto int64_min = std::numeric_limits<std::int64_t>::min();
    constexpr auto int64_max = std::numeric_limits<std::int64_t>::max();
    constexpr auto uint64_max = std::numeric_limits<std::uint64_t>::max();
    constexpr auto uint32_max = std::numeric_limits<std::uint32_t>::max();

    // Expected values: (key - 1) mod n in arbitrary precision.
    CHECK(partition_for_key(int64_min, 16) == 15);
    CHECK(partition_for_key(int64_max, 16) == 14);
    CHECK(partition_for_key(uint64_max, 16) == 14);
    CHECK(partition_for_key(uint32_max, 16) == 14);
    CHECK(partition_for_key(std::uint64_t{0}, 16) == 15);
    CHECK(partition_for_key(std::uint32_t{0}, 16) == 15);

    CHECK(partition_for_key(int64_min, 7) == 5);
    CHECK(partition_for_key(int64_max, 7) == 6);
    CHECK(partition_for_key(uint64_max, 7) == 0);
    CHECK(partition_for_key(uint32_max, 7) == 2);
    CHECK(partition_for_key(std::numeric_limits<std::int32_t>::min(), 7) == 4);

    CHECK(partition_for_key(int64_min, 1000) == 191);
    CHECK(partition_for_key(int64_max, 1000) == 806);
    CHECK(partition_for_key(uint64_max, 1000) == 614);
    CHECK(partition_for_key(std::uint64_t{10'000'000'000'000'000'000U}, 1000) == 999);

    CHECK(partition_for_key(int64_min, all_values) == 2147483646);
    CHECK(partition_for_key(int64_max, all_values) == 2147483646);
    CHECK(partition_for_key(uint64_max, all_values) == 4294967294);
    CHECK(partition_for_key(std::uint64_t{0}, all_values) == 4294967294);
    CHECK(partition_for_key(std::int64_t{0}, all_values) == 4294967294);
    CHECK(partition_for_key(std::uint64_t{10'000'000'000'000'000'000U}, all_values) == 347022084);

    // One partition: everything goes to partition 0.
    CHECK(partition_for_key(int64_min, 1) == 0);
    CHECK(partition_for_key(uint64_max, 1) == 0);
    CHECK(partition_for_key(0, 1) == 0);
}

TEST_CASE("partition key: floating keys holding an integer route like that integer", "[routing]")
{
    for (std::uint32_t partitions : {1U, 3U, 16U, 1000U, all_values}) {
        INFO("partitions " << partitions);
        for (std::int64_t key : {std::int64_t{-1'000'001}, std::int64_t{-17}, std::int64_t{-1}, std::int64_t{0},
                                 std::int64_t{1}, std::int64_t{16}, std::int64_t{17}, std::int64_t{123'456'789}}) {
            INFO("key " << key);
            CHECK(partition_for_key(static_cast<double>(key), partitions) == partition_for_key(key, partitions));
            // A float may round the key to a neighbouring integer; it routes like the integer it holds.
            const auto as_float = static_cast<float>(key);
            CHECK(partition_for_key(as_float, partitions) ==
                  partition_for_key(static_cast<std::int64_t>(as_float), partitions));
            CHECK(partition_for_key(static_cast<long double>(key), partitions) == partition_for_key(key, partitions));
        }
        CHECK(partition_for_key(-0.0, partitions) == partition_for_key(0, partitions));
        CHECK(partition_for_key(2147483647.0, partitions) ==
              partition_for_key(std::numeric_limits<std::int32_t>::max(), partitions));
        CHECK(partition_for_key(-2147483648.0, partitions) ==
              partition_for_key(std::numeric_limits<std::int32_t>::min(), partitions));
        // Exactly representable doubles far beyond 2^53.
        CHECK(partition_for_key(-9223372036854775808.0, partitions) ==
              partition_for_key(std::numeric_limits<std::int64_t>::min(), partitions));
        CHECK(partition_for_key(1e19, partitions) ==
              partition_for_key(std::uint64_t{10'000'000'000'000'000'000U}, partitions));
    }
    CHECK(partition_for_key(17.0, 16) == 0);
    CHECK(partition_for_key(16.0, 16) == 15);
    CHECK(partition_for_key(0.0, 16) == 15);
    CHECK(partition_for_key(-1.0, 16) == 14);
    CHECK(partition_for_key(-1.0F, 16) == 14);
    // 1e20 = 100000000000000000000 exactly; (1e20 - 1) mod 7 = 1, mod 1000 = 999.
    CHECK(partition_for_key(1e20, 7) == 1);
    CHECK(partition_for_key(1e20, 1000) == 999);
}

TEST_CASE("partition key: NaN, infinities and fractions are rejected with invalid_argument", "[routing]")
{
    const double rejected[] = {std::numeric_limits<double>::quiet_NaN(),
                               std::numeric_limits<double>::infinity(),
                               -std::numeric_limits<double>::infinity(),
                               1.5,
                               -0.5,
                               16.000001,
                               std::numeric_limits<double>::denorm_min()};
    for (double key : rejected) {
        INFO("key " << key);
        CHECK(thrown_code([&] { (void)partition_for_key(key, 16); }) == bq::errc::invalid_argument);
    }
    CHECK(thrown_code([] { (void)partition_for_key(1.5F, 16); }) == bq::errc::invalid_argument);
    CHECK(thrown_code([] { (void)partition_for_key(std::numeric_limits<float>::quiet_NaN(), 16); }) ==
          bq::errc::invalid_argument);

    const bq::key_selector<keyed> by_weight([](const keyed& item) { return item.weight; });
    CHECK(thrown_code([&] { (void)by_weight.partition_for(keyed{"x", 0, 1.5}, 16); }) == bq::errc::invalid_argument);
    CHECK(by_weight.partition_for(keyed{"x", 0, 17.0}, 16) == 0);
}

TEST_CASE("partition key: string keys fold their first four UTF-16 code units", "[routing]")
{
    // ASCII: one unit per character; only "cust" counts.
    const std::uint64_t cust = fold_units({'c', 'u', 's', 't'});
    CHECK(cust == 3065427);
    CHECK(string_partition("cust-0001", all_values) == cust);
    CHECK(string_partition("cust-0001", 16) == cust % 16);
    CHECK(string_partition("cust-0001", 16) == 3);
    CHECK(string_partition("cust-0001", 7) == string_partition("cust-9999", 7));
    CHECK(string_partition("cust-0001", 16) == string_partition("cust-9999", 16));
    CHECK(string_partition("cust", 16) == string_partition("cust-9999", 16));
    CHECK(string_partition("a", all_values) == fold_units({'a'}));
    CHECK(string_partition("ab", all_values) == fold_units({'a', 'b'}));
    CHECK(string_partition("abc", all_values) == fold_units({'a', 'b', 'c'}));
    CHECK(string_partition("abcd", all_values) == fold_units({'a', 'b', 'c', 'd'}));
    CHECK(string_partition("abcdz", all_values) == fold_units({'a', 'b', 'c', 'd'}));
    CHECK(string_partition("abce", all_values) != string_partition("abcd", all_values));

    // The empty key folds to 0.
    CHECK(string_partition("", 16) == 0);
    CHECK(string_partition("", 7) == 0);
    CHECK(string_partition("", all_values) == 0);

    // Two-byte UTF-8 (U+00E9) and three-byte UTF-8 (U+65E5 U+672C) are one unit per code point.
    CHECK(string_partition("\xC3\xA9", all_values) == 0xE9);
    CHECK(string_partition("\xC3\xA9", 16) == 9);
    CHECK(string_partition("\xE6\x97\xA5\xE6\x9C\xAC", all_values) == fold_units({0x65E5, 0x672C}));
    CHECK(string_partition("\xE6\x97\xA5\xE6\x9C\xAC", all_values) == 835047);
    // "Ünïcödé": the fifth unit (U+00F6) is ignored.
    CHECK(string_partition("\xC3\x9Cn\xC3\xAF"
                           "c\xC3\xB6"
                           "d\xC3\xA9",
                           all_values) == fold_units({0xDC, 'n', 0xEF, 'c'}));

    // A four-byte character (U+1F600) is a surrogate pair: two of the four units.
    const std::uint64_t with_emoji = fold_units({'a', 0xD83D, 0xDE00, 'b'});
    CHECK(with_emoji == 57849694);
    CHECK(string_partition("a\xF0\x9F\x98\x80"
                           "bc",
                           all_values) == with_emoji);
    CHECK(string_partition("a\xF0\x9F\x98\x80"
                           "bc",
                           16) == 14);
    CHECK(string_partition("a\xF0\x9F\x98\x80"
                           "b",
                           16) == string_partition("a\xF0\x9F\x98\x80"
                                                   "bz",
                                                   16));
    CHECK(string_partition("\xF0\x9F\x98\x80\xF0\x9F\x98\x80", all_values) ==
          fold_units({0xD83D, 0xDE00, 0xD83D, 0xDE00}));
    CHECK(string_partition("\xF0\x9F\x98\x80\xF0\x9F\x98\x80", all_values) == 1705528838);

    // Every routed value is a valid partition.
    for (std::uint32_t partitions = 1; partitions <= 40; ++partitions) {
        CHECK(string_partition("\xF0\x9F\x98\x80\xF0\x9F\x98\x80", partitions) < partitions);
        CHECK(string_partition("zzzz", partitions) == fold_units({'z', 'z', 'z', 'z'}) % partitions);
    }
}

TEST_CASE("partition key: malformed UTF-8 routes to a valid partition without crashing", "[routing]")
{
    // A byte that can never start a sequence counts as U+FFFD.
    CHECK(string_partition("\xFF", all_values) == 0xFFFD);
    CHECK(string_partition("\xFF\xFE", all_values) == fold_units({0xFFFD, 0xFFFD}));

    const std::string_view malformed[] = {
        std::string_view("\x80", 1),                  // lone continuation byte
        std::string_view("\xC3", 1),                  // truncated two-byte sequence
        std::string_view("\xE6\x97", 2),              // truncated three-byte sequence
        std::string_view("\xF0\x9F\x98", 3),          // truncated four-byte sequence
        std::string_view("\xC0\x80", 2),              // overlong NUL
        std::string_view("\xED\xA0\x80", 3),          // an encoded surrogate
        std::string_view("\xF4\x90\x80\x80", 4),      // beyond U+10FFFF
        std::string_view("\xF8\x88\x80\x80\x80", 5),  // five-byte form
        std::string_view("ab\xE6", 3),                // truncated at the very end
        std::string_view("\0\0\0\0\0", 5),            // embedded NULs are ordinary units
    };
    for (std::string_view key : malformed) {
        for (std::uint32_t partitions : {1U, 2U, 16U, 1000U, all_values}) {
            const std::uint32_t routed = string_partition(key, partitions);
            CHECK(routed < partitions);
            CHECK(routed == string_partition(key, partitions));  // deterministic
        }
    }
    CHECK(string_partition(std::string_view("\0\0\0\0\0", 5), all_values) == 0);
}

TEST_CASE("partition key: key_selector routes string, string_view and const char* keys alike", "[routing]")
{
    const bq::key_selector<keyed> none;
    CHECK_FALSE(none);

    const bq::key_selector<keyed> by_string([](const keyed& item) { return item.name; });
    const bq::key_selector<keyed> by_view([](const keyed& item) { return std::string_view(item.name); });
    const bq::key_selector<keyed> by_pointer([](const keyed& item) { return item.name.c_str(); });
    const bq::key_selector<keyed> by_reference([](const keyed& item) -> const std::string& { return item.name; });
    REQUIRE(by_string);
    REQUIRE(by_view);
    REQUIRE(by_pointer);
    REQUIRE(by_reference);

    for (const char* name : {"", "cust-0001", "cust-9999", "a", "\xC3\xA9t\xC3\xA9", "a\xF0\x9F\x98\x80"}) {
        const keyed item{name, 0, 0};
        for (std::uint32_t partitions : {1U, 6U, 16U, all_values}) {
            INFO("key '" << name << "', partitions " << partitions);
            const std::uint32_t expected = string_partition(name, partitions);
            CHECK(by_string.partition_for(item, partitions) == expected);
            CHECK(by_view.partition_for(item, partitions) == expected);
            CHECK(by_pointer.partition_for(item, partitions) == expected);
            CHECK(by_reference.partition_for(item, partitions) == expected);
        }
    }
    CHECK(by_string.partition_for(keyed{"cust-0001", 0, 0}, 16) == 3);
    CHECK(by_pointer.partition_for(keyed{"", 0, 0}, 16) == 0);
}

TEST_CASE("partition key: key_selector routes integral keys by the modulo rule", "[routing]")
{
    const bq::key_selector<keyed> by_id([](const keyed& item) { return item.id; });
    const bq::key_selector<keyed> by_narrow_id([](const keyed& item) { return static_cast<std::int32_t>(item.id); });
    const bq::key_selector<keyed> by_unsigned_id([](const keyed& item) { return static_cast<std::uint64_t>(item.id); });
    CHECK(by_id.partition_for(keyed{"", 17, 0}, 16) == 0);
    CHECK(by_id.partition_for(keyed{"", 16, 0}, 16) == 15);
    CHECK(by_id.partition_for(keyed{"", 0, 0}, 16) == 15);
    CHECK(by_id.partition_for(keyed{"", -1, 0}, 16) == 14);
    CHECK(by_narrow_id.partition_for(keyed{"", -1, 0}, 16) == 14);
    CHECK(by_unsigned_id.partition_for(keyed{"", 0, 0}, 16) == 15);
    CHECK(by_id.partition_for(keyed{"", std::numeric_limits<std::int64_t>::min(), 0}, 16) == 15);
}

}  // namespace partition_key_test
