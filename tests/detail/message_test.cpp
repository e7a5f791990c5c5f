// Tests of detail::format_message, the headers' way to format a message with {fmt}.
#include "bufferqueue/detail/message.hpp"

#include "catch.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace message_test {

namespace {

namespace bq = bufferqueue;

TEST_CASE("format message: text, integers and floating-point numbers fill the fields in order", "[message]")
{
    const std::string topic = "orders";
    const std::string_view group = "billing";
    const std::uint32_t partition = 3;
    const std::int64_t offset = -1;
    CHECK(bq::detail::format_message("topic '{}' group '{}' partition {}: offset {} ({})", topic, group, partition,
                                     offset, "const char*") ==
          "topic 'orders' group 'billing' partition 3: offset -1 (const char*)");
    CHECK(bq::detail::format_message("{} {} {}", std::numeric_limits<std::uint64_t>::max(),
                                     std::numeric_limits<std::int64_t>::min(),
                                     0.5) == "18446744073709551615 -9223372036854775808 0.5");
    CHECK(bq::detail::format_message("{{literal}} {}", 1) == "{literal} 1");
    CHECK(bq::detail::format_message("no fields") == "no fields");
}

TEST_CASE("format message: a spec fmt rejects gives the format and the arguments instead of throwing", "[message]")
{
    // "{:q}" passes the compile-time count of fields but is no valid spec for an integer.
    CHECK(bq::detail::format_message("offset {:q} of '{}'", 7, "file") == "offset {:q} of '{}' [7, file]");
}

}  // namespace

}  // namespace message_test
