#include "bufferqueue/mmap/detail/group_path.hpp"

#include "catch.hpp"
#include "test_support.hpp"

#include <initializer_list>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace group_path_test {

namespace {

using bufferqueue::test::error_from;
using bufferqueue::test::missing_from;

namespace detail = bufferqueue::detail;
using bufferqueue::errc;

}  // namespace

TEST_CASE("group path: a valid folder name is used as is", "[group_path]")
{
    CHECK(detail::escape_group_name("billing-worker-1") == "billing-worker-1");
    CHECK(detail::escape_group_name("with space") == "with space");
    CHECK(detail::escape_group_name(".hidden") == ".hidden");
    CHECK(detail::escape_group_name("...") == "...");
    CHECK(detail::escape_group_name("tmp") == "tmp");
    CHECK(detail::escape_group_name("a.tmpx") == "a.tmpx");
    CHECK(detail::escape_group_name("gr\xC3\xBCn\n") == "gr\xC3\xBCn\n");
}

TEST_CASE("group path: slash, NUL and percent are encoded with uppercase hex", "[group_path]")
{
    CHECK(detail::escape_group_name("orders/worker 1") == "orders%2Fworker 1");
    CHECK(detail::escape_group_name("100%") == "100%25");
    CHECK(detail::escape_group_name("%2F") == "%252F");
    CHECK(detail::escape_group_name(std::string("a\0b", 3)) == "a%00b");
    CHECK(detail::escape_group_name("/") == "%2F");
}

TEST_CASE("group path: the names . and .. are encoded whole", "[group_path]")
{
    CHECK(detail::escape_group_name(".") == "%2E");
    CHECK(detail::escape_group_name("..") == "%2E%2E");
}

TEST_CASE("group path: a trailing .tmp is encoded so group folders never look temporary", "[group_path]")
{
    CHECK(detail::escape_group_name("jobs.tmp") == "jobs%2Etmp");
    CHECK(detail::escape_group_name(".tmp") == "%2Etmp");
    CHECK(detail::escape_group_name("a.tmp.tmp") == "a.tmp%2Etmp");
    CHECK(detail::unescape_group_name("jobs%2Etmp") == "jobs.tmp");
}

TEST_CASE("group path: an empty group name is invalid_argument", "[group_path]")
{
    const auto failure = error_from([] { detail::escape_group_name(""); });
    REQUIRE(failure);
    CHECK(failure->code() == errc::invalid_argument);
}

TEST_CASE("group path: a name whose folder name would exceed 251 bytes is invalid_argument", "[group_path]")
{
    CHECK(detail::escape_group_name(std::string(251, 'g')).size() == 251);
    const auto too_long = error_from([] { detail::escape_group_name(std::string(252, 'g')); });
    REQUIRE(too_long);
    CHECK(too_long->code() == errc::invalid_argument);
    CHECK(missing_from(too_long->what(), {"too long"}) == "");
    // 84 slashes are a short name, but their folder name takes 3 * 84 = 252 bytes.
    CHECK_THROWS_AS(detail::escape_group_name(std::string(84, '/')), bufferqueue::error);
    CHECK(detail::escape_group_name(std::string(83, '/')).size() == 249);
}

TEST_CASE("group path: unescaping inverts escaping for arbitrary bytes", "[group_path]")
{
    std::mt19937 generator(11);
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_int_distribution<int> length(1, 40);
    for (int round = 0; round < 2000; ++round) {
        std::string name(static_cast<std::size_t>(length(generator)), '\0');
        for (char& character : name) {
            // Bias towards the interesting characters.
            const int pick = byte(generator);
            character = pick < 20 ? '/' : pick < 40 ? '%' : pick < 60 ? '.' : static_cast<char>(byte(generator));
        }
        const std::string folder = detail::escape_group_name(name);
        INFO("folder " << folder);
        CHECK(folder.find('/') == std::string::npos);
        CHECK(folder.find('\0') == std::string::npos);
        CHECK(folder != ".");
        CHECK(folder != "..");
        CHECK_FALSE(folder.ends_with(".tmp"));
        if (detail::unescape_group_name(folder) != name) {
            FAIL("round trip changed the name");
        }
    }
    CHECK(detail::unescape_group_name("%2E") == ".");
    for (const char* name : {".", "..", "orders/worker 1", "100%", "x.tmp"}) {
        CHECK(detail::unescape_group_name(detail::escape_group_name(name)) == name);
    }
}

TEST_CASE("group path: malformed or non-canonical folder names are corrupt_data naming the folder", "[group_path]")
{
    const std::vector<std::string> folders = {"",    "%",   "%2",    "abc%", "%G0", "%2G",   "%2f",
                                              "%41", "%2e", "x%2Ey", ".",    "..",  "a.tmp", std::string(252, 'g')};
    for (const std::string& folder : folders) {
        INFO("folder \"" << folder << "\"");
        const auto failure = error_from([&] { detail::unescape_group_name(folder); });
        REQUIRE(failure);
        CHECK(failure->code() == errc::corrupt_data);
        CHECK(missing_from(failure->what(), {"\"" + folder + "\""}) == "");
    }
}

TEST_CASE("group path: a folder name with a raw slash or NUL is corrupt_data", "[group_path]")
{
    CHECK_THROWS_AS(detail::unescape_group_name("a/b"), bufferqueue::error);
    CHECK_THROWS_AS(detail::unescape_group_name(std::string("a\0b", 3)), bufferqueue::error);
}

}  // namespace group_path_test
