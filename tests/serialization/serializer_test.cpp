#include "bufferqueue/serialization/serializer.hpp"

#include "bufferqueue/dead_letter.hpp"

#include "catch.hpp"
#include "test_support.hpp"

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace serializer_test {

namespace serializer_test_types {

struct order {
    std::int64_t id = 0;
    std::string name;
    std::vector<double> prices;

    MSGPACK_DEFINE(id, name, prices)

    friend bool operator==(const order&, const order&) = default;
};

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(order, id, name, prices)

struct quote {
    std::int64_t sequence;
    double price;
    std::int32_t quantity;
    std::int32_t flags;

    friend bool operator==(const quote&, const quote&) = default;
};

struct without_json_support {
    int value = 0;
};

// Not serializers: the operations are not callable on a const object, or return the wrong type.
struct serializer_with_mutable_operations {
    void serialize(const order&, std::vector<std::byte>&) {}
    order deserialize(std::span<const std::byte>) { return {}; }
};

struct serializer_returning_the_wrong_type {
    void serialize(const order&, std::vector<std::byte>&) const {}
    int deserialize(std::span<const std::byte>) const { return 0; }
};

}  // namespace serializer_test_types

namespace {

using bufferqueue::test::error_from;
using bufferqueue::test::missing_from;

using bufferqueue::errc;
using bufferqueue::json_serializer;
using bufferqueue::msgpack_serializer;
using bufferqueue::msgpack_unpack_limits;
using bufferqueue::raw_serializer;
using bufferqueue::serializer_for;
using serializer_test_types::order;
using serializer_test_types::quote;

static_assert(serializer_for<json_serializer<order>, order>);
static_assert(serializer_for<msgpack_serializer<order>, order>);
static_assert(serializer_for<raw_serializer<quote>, quote>);
static_assert(!serializer_for<serializer_test_types::serializer_with_mutable_operations, order>);
static_assert(!serializer_for<serializer_test_types::serializer_returning_the_wrong_type, order>);
static_assert(!serializer_for<json_serializer<order>, quote>);
static_assert(bufferqueue::detail::json_convertible<order>);
static_assert(!bufferqueue::detail::json_convertible<serializer_test_types::without_json_support>);
// Naming json_serializer<T> for an unsupported T is fine; only calling it fails to compile.
static_assert(std::is_default_constructible_v<json_serializer<serializer_test_types::without_json_support>>);

std::vector<std::byte> bytes_of(std::initializer_list<unsigned char> values)
{
    std::vector<std::byte> bytes;
    for (const unsigned char value : values) {
        bytes.push_back(static_cast<std::byte>(value));
    }
    return bytes;
}

std::vector<std::byte> bytes_of(std::string_view text)
{
    const auto bytes = std::as_bytes(std::span<const char>(text.data(), text.size()));
    return {bytes.begin(), bytes.end()};
}

template <typename T>
std::vector<std::byte> msgpack_bytes(const T& value)
{
    std::vector<std::byte> out;
    msgpack_serializer<T>{}.serialize(value, out);
    return out;
}

const order sample_order{42, "widgets/\"quoted\" \xC3\xBC", {1.5, -2.25, 1e300}};

}  // namespace

// ---- json -----------------------------------------------------------------------------------

TEST_CASE("serializer: json round-trips an item and appends to the buffer", "[serializer][json]")
{
    const json_serializer<order> serializer;
    std::vector<std::byte> out = bytes_of({0xAA, 0xBB});
    serializer.serialize(sample_order, out);
    REQUIRE(out.size() > 2);
    CHECK(out[0] == std::byte{0xAA});
    CHECK(out[1] == std::byte{0xBB});
    const auto payload = std::span<const std::byte>(out).subspan(2);
    CHECK(serializer.deserialize(payload) == sample_order);
    CHECK(std::string(reinterpret_cast<const char*>(payload.data()), payload.size()).starts_with("{\"id\":42,"));
}

TEST_CASE("serializer: json handles built-in types and empty values", "[serializer][json]")
{
    std::vector<std::byte> out;
    json_serializer<std::string>{}.serialize("", out);
    CHECK(json_serializer<std::string>{}.deserialize(out).empty());
    out.clear();
    json_serializer<std::vector<int>>{}.serialize({1, 2, 3}, out);
    CHECK(json_serializer<std::vector<int>>{}.deserialize(out) == std::vector<int>{1, 2, 3});
}

TEST_CASE("serializer: malformed or mismatched json is corrupt_data", "[serializer][json]")
{
    const json_serializer<order> serializer;
    for (const std::string_view text :
         {"", "{", "not json", "{\"id\":1,\"name\":\"x\"}", "{\"id\":\"one\",\"name\":\"x\",\"prices\":[]}", "[1,2,3]",
          "{\"id\":1,\"name\":\"x\",\"prices\":[]} trailing"}) {
        INFO("payload " << text);
        const auto failure = error_from([&] { serializer.deserialize(bytes_of(text)); });
        REQUIRE(failure);
        CHECK(failure->code() == errc::corrupt_data);
        CHECK(missing_from(failure->what(), {"json_serializer", std::to_string(text.size()) + "-byte"}) == "");
    }
}

TEST_CASE("serializer: json round-trips dead letters, with and without an item, payload and offset",
          "[serializer][json][dead_letter]")
{
    const json_serializer<bufferqueue::dead_letter<int>> serializer;
    const std::vector<bufferqueue::dead_letter<int>> letters{
        {.item = 42, .topic = "orders", .partition = 3, .attempts = 5, .error = "handler \"failed\""},
        {.item = std::nullopt,
         .payload = {std::byte{0}, std::byte{0xFF}, std::byte{'x'}},
         .topic = "orders",
         .partition = 0,
         .offset = 4096,
         .attempts = 1,
         .error = "cannot decode"}};
    for (const auto& letter : letters) {
        std::vector<std::byte> stored;
        serializer.serialize(letter, stored);
        CHECK(serializer.deserialize(stored) == letter);
    }
    // A field missing is corrupt data, not a default.
    const auto failure = error_from([&] {
        serializer.deserialize(bytes_of(R"({"item":1,"payload":[],"topic":"t","partition":0,"offset":null})"));
    });
    REQUIRE(failure);
    CHECK(failure->code() == errc::corrupt_data);
}

TEST_CASE("serializer: json rejects a string that is not UTF-8 with invalid_argument", "[serializer][json]")
{
    std::vector<std::byte> out;
    const auto failure = error_from([&] { json_serializer<std::string>{}.serialize("bad \xFF byte", out); });
    REQUIRE(failure);
    CHECK(failure->code() == errc::invalid_argument);
    CHECK(missing_from(failure->what(), {"json_serializer"}) == "");
}

// ---- msgpack --------------------------------------------------------------------------------

TEST_CASE("serializer: msgpack round-trips an item and appends to the buffer", "[serializer][msgpack]")
{
    const msgpack_serializer<order> serializer;
    std::vector<std::byte> out = bytes_of({0x01});
    serializer.serialize(sample_order, out);
    REQUIRE(out.size() > 1);
    CHECK(out[0] == std::byte{0x01});
    CHECK(out[1] == std::byte{0x93});  // MSGPACK_DEFINE encodes a 3-element array
    CHECK(serializer.deserialize(std::span<const std::byte>(out).subspan(1)) == sample_order);

    const std::vector<std::byte> empty_string = msgpack_bytes(std::string());
    CHECK(msgpack_serializer<std::string>{}.deserialize(empty_string).empty());
}

TEST_CASE("serializer: truncated msgpack is corrupt_data at every length", "[serializer][msgpack]")
{
    const msgpack_serializer<order> serializer;
    const std::vector<std::byte> encoded = msgpack_bytes(sample_order);
    for (std::size_t length = 0; length < encoded.size(); ++length) {
        INFO("length " << length);
        const auto failure = error_from([&] { serializer.deserialize(std::span(encoded).first(length)); });
        REQUIRE(failure);
        CHECK(failure->code() == errc::corrupt_data);
    }
}

TEST_CASE("serializer: malformed, mismatched or trailing msgpack is corrupt_data", "[serializer][msgpack]")
{
    const msgpack_serializer<order> serializer;
    SECTION("a reserved type byte")
    {
        const auto failure = error_from([&] { serializer.deserialize(bytes_of({0xC1})); });
        REQUIRE(failure);
        CHECK(failure->code() == errc::corrupt_data);
        CHECK(missing_from(failure->what(), {"msgpack_serializer"}) == "");
    }
    SECTION("another type")
    {
        const auto failure = error_from([&] { serializer.deserialize(msgpack_bytes(std::string("text"))); });
        REQUIRE(failure);
        CHECK(failure->code() == errc::corrupt_data);
        CHECK(missing_from(failure->what(), {"shape"}) == "");
    }
    SECTION("bytes after the object")
    {
        std::vector<std::byte> encoded = msgpack_bytes(sample_order);
        encoded.push_back(std::byte{0x00});
        const auto failure = error_from([&] { serializer.deserialize(encoded); });
        REQUIRE(failure);
        CHECK(failure->code() == errc::corrupt_data);
        CHECK(missing_from(failure->what(), {"ends at byte " + std::to_string(encoded.size() - 1) + " of " +
                                             std::to_string(encoded.size())}) == "");
    }
}

TEST_CASE("serializer: msgpack unpack limits reject oversized containers, strings and nesting", "[serializer][msgpack]")
{
    const std::vector<std::byte> hundred_ints = msgpack_bytes(std::vector<int>(100, 7));
    const std::vector<std::byte> long_string = msgpack_bytes(std::string(1000, 's'));
    const std::vector<std::byte> nested = msgpack_bytes(std::vector<std::vector<std::vector<int>>>{{{1}}});

    CHECK(msgpack_serializer<std::vector<int>>{}.deserialize(hundred_ints).size() == 100);

    msgpack_unpack_limits limits;
    limits.max_array_elements = 99;
    const auto arrays = error_from([&] { msgpack_serializer<std::vector<int>>{limits}.deserialize(hundred_ints); });
    REQUIRE(arrays);
    CHECK(arrays->code() == errc::corrupt_data);
    limits.max_array_elements = 100;
    CHECK(msgpack_serializer<std::vector<int>>{limits}.deserialize(hundred_ints).size() == 100);

    limits = {};
    limits.max_string_bytes = 999;
    CHECK_THROWS_AS(msgpack_serializer<std::string>{limits}.deserialize(long_string), bufferqueue::error);

    limits = {};
    limits.max_depth = 2;
    const msgpack_serializer<std::vector<std::vector<std::vector<int>>>> shallow(limits);
    CHECK(shallow.limits().max_depth == 2);
    CHECK_THROWS_AS(shallow.deserialize(nested), bufferqueue::error);
    limits.max_depth = 3;
    CHECK(msgpack_serializer<std::vector<std::vector<std::vector<int>>>>{limits}.deserialize(nested).size() == 1);

    using int_map = std::map<int, int>;
    const std::vector<std::byte> map = msgpack_bytes(int_map{{1, 2}, {3, 4}});
    limits = {};
    limits.max_map_entries = 1;
    CHECK_THROWS_AS(msgpack_serializer<int_map>{limits}.deserialize(map), bufferqueue::error);
}

TEST_CASE("serializer: a msgpack header declaring billions of elements fails without allocating them",
          "[serializer][msgpack]")
{
    // array 32 with 0xFFFFFFFF elements, map 32 with 0xFFFFFFFF entries, str 32 of 4 GiB - 1.
    const std::vector<std::vector<std::byte>> payloads = {bytes_of({0xDD, 0xFF, 0xFF, 0xFF, 0xFF}),
                                                          bytes_of({0xDF, 0xFF, 0xFF, 0xFF, 0xFF}),
                                                          bytes_of({0xDB, 0xFF, 0xFF, 0xFF, 0xFF, 0x00})};
    for (const std::vector<std::byte>& payload : payloads) {
        INFO("type byte " << std::to_integer<int>(payload[0]));
        const auto failure = error_from([&] { msgpack_serializer<std::vector<int>>{}.deserialize(payload); });
        REQUIRE(failure);
        CHECK(failure->code() == errc::corrupt_data);
    }
}

TEST_CASE("serializer: the untrusted-data msgpack limits are finite", "[serializer][msgpack]")
{
    constexpr msgpack_unpack_limits limits = msgpack_unpack_limits::untrusted_data();
    CHECK(limits.max_array_elements == 64 * 1024);
    CHECK(limits.max_depth == 64);
    CHECK(limits.max_string_bytes == 16 * 1024 * 1024);
}

// ---- raw ------------------------------------------------------------------------------------

TEST_CASE("serializer: raw round-trips a trivially copyable item as its native bytes", "[serializer][raw]")
{
    const raw_serializer<quote> serializer;
    const quote item{7, 99.5, -3, 0};
    std::vector<std::byte> out = bytes_of({0x11});
    serializer.serialize(item, out);
    REQUIRE(out.size() == 1 + sizeof(quote));
    CHECK(serializer.deserialize(std::span<const std::byte>(out).subspan(1)) == item);

    std::vector<std::byte> number;
    raw_serializer<std::uint32_t>{}.serialize(0x01020304U, number);
    CHECK(number.size() == 4);
    CHECK(raw_serializer<std::uint32_t>{}.deserialize(number) == 0x01020304U);
}

TEST_CASE("serializer: raw rejects a payload of the wrong size with corrupt_data", "[serializer][raw]")
{
    const raw_serializer<quote> serializer;
    for (const std::size_t size : {std::size_t{0}, sizeof(quote) - 1, sizeof(quote) + 1}) {
        const std::vector<std::byte> payload(size);
        const auto failure = error_from([&] { serializer.deserialize(payload); });
        REQUIRE(failure);
        CHECK(failure->code() == errc::corrupt_data);
        CHECK(missing_from(failure->what(),
                           {std::to_string(sizeof(quote)) + "-byte", "got " + std::to_string(size) + " bytes"}) == "");
    }
}

// ---- concurrency ----------------------------------------------------------------------------

TEST_CASE("serializer: one instance of each serializer serves several threads at once", "[serializer]")
{
    const json_serializer<order> json;
    const msgpack_serializer<order> msgpack(msgpack_unpack_limits::untrusted_data());
    const raw_serializer<quote> raw;
    std::vector<std::thread> threads;
    std::vector<int> failures(4, 0);
    for (int thread = 0; thread < 4; ++thread) {
        threads.emplace_back([&, thread] {
            std::vector<std::byte> buffer;
            for (int round = 0; round < 200; ++round) {
                const order item{thread * 1000 + round, "name " + std::to_string(round), {double(round)}};
                const quote value{round, double(thread), round, thread};
                buffer.clear();
                json.serialize(item, buffer);
                failures[static_cast<std::size_t>(thread)] += json.deserialize(buffer) == item ? 0 : 1;
                buffer.clear();
                msgpack.serialize(item, buffer);
                failures[static_cast<std::size_t>(thread)] += msgpack.deserialize(buffer) == item ? 0 : 1;
                buffer.clear();
                raw.serialize(value, buffer);
                failures[static_cast<std::size_t>(thread)] += raw.deserialize(buffer) == value ? 0 : 1;
            }
        });
    }
    for (std::thread& thread : threads) {
        thread.join();
    }
    CHECK(failures == std::vector<int>(4, 0));
}

}  // namespace serializer_test
