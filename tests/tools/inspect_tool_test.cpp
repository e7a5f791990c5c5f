// The installed bufferqueue-inspect (tools/inspect/, docs/inspect.md), run as an operator runs it on
// folders these tests write with a real queue and then damage: its output (--json parsed back) and
// its exit status. ctest installs the build first (fixture tools.install_inspect in
// tests/CMakeLists.txt); without that install these tests fail, they never skip.
#include "catch.hpp"
#include "inspect_test_support.hpp"
#include "test_support.hpp"

#include <nlohmann/json.hpp>

#include <sys/wait.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace inspect_tool_test {

namespace {

namespace bq = bufferqueue;
namespace fs = std::filesystem;
using bq::test::inspect_fixture;
using bq::test::inspect_partition;
using bq::test::temporary_directory;
using nlohmann::json;

struct tool_result {
    int status = -1;
    std::string out;
    std::string err;
};

std::string read_text(const fs::path& path)
{
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string quoted(const std::string& word)
{
    std::string result = "'";
    for (const char each : word) {
        result += each == '\'' ? std::string("'\\''") : std::string(1, each);
    }
    return result + "'";
}

// Runs the installed tool with `arguments`; its output goes to files in `scratch`.
tool_result run_tool(const std::vector<std::string>& arguments)
{
    const char* const configured = std::getenv("BUFFERQUEUE_INSPECT_BINARY");
    if (configured == nullptr) {
        FAIL("BUFFERQUEUE_INSPECT_BINARY (the installed bufferqueue-inspect) is not set: run the tests with "
             "ctest, which sets it");
    }
    const fs::path binary = configured;
    if (!fs::exists(binary)) {
        FAIL("the installed " + binary.string() +
             " is missing: run the tests with ctest, whose fixture tools.install_inspect installs it");
    }
    static const temporary_directory scratch("bufferqueue-inspect-output");
    std::string command = quoted(binary.string());
    for (const std::string& each : arguments) {
        command += " " + quoted(each);
    }
    command += " >" + scratch.file("out") + " 2>" + scratch.file("err");
    const int raw = std::system(command.c_str());
    REQUIRE(WIFEXITED(raw));
    return {WEXITSTATUS(raw), read_text(scratch.file("out")), read_text(scratch.file("err"))};
}

// Every file under `root` with its bytes and modification time.
std::map<std::string, std::pair<std::string, fs::file_time_type>> snapshot(const fs::path& root)
{
    std::map<std::string, std::pair<std::string, fs::file_time_type>> files;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
        files[entry.path().string()] = {entry.is_regular_file() ? read_text(entry.path()) : std::string("<folder>"),
                                        fs::last_write_time(entry.path())};
    }
    return files;
}

void set_writable(const fs::path& root, bool writable)
{
    const auto change = writable ? fs::perm_options::add : fs::perm_options::remove;
    const fs::perms write = fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write;
    fs::permissions(root, write, change);
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
        fs::permissions(entry.path(), write, change);
    }
}

}  // namespace

TEST_CASE("inspect tool: describe lists every partition and group, in text and as JSON", "[inspect][mmap][tool]")
{
    temporary_directory directory;
    inspect_fixture(directory.path()).close();

    const tool_result text = run_tool({"describe", directory.string()});
    CHECK(text.status == 0);
    CHECK_THAT(text.out, Catch::Contains("TOPIC") && Catch::Contains("LOG-END-OFFSET") && Catch::Contains("STATUS"));
    CHECK_THAT(text.out, Catch::Contains("GROUP") && Catch::Contains("CURRENT-OFFSET") && Catch::Contains("LAG"));
    CHECK_THAT(text.out, Catch::Matches("(.|\n)*billing +orders +0 +4 +7 +3\n(.|\n)*"));
    CHECK_THAT(text.out, Catch::Matches("(.|\n)*orders +1 +256 +[^\n]*json_serializer[^\n]*\n(.|\n)*"));

    const tool_result described = run_tool({"describe", directory.string(), "--json"});
    REQUIRE(described.status == 0);
    const json parsed = json::parse(described.out);
    REQUIRE(parsed["topics"].size() == 2);
    const json& clicks = parsed["topics"][0];
    CHECK(clicks["topic"] == "clicks");
    REQUIRE(clicks["partitions"].size() == 2);
    CHECK(clicks["partitions"][0]["records"].get<int>() + clicks["partitions"][1]["records"].get<int>() == 3);
    CHECK(clicks["groups"].empty());
    const json& orders = parsed["topics"][1];
    CHECK(orders["options"]["partitions"] == 1);
    CHECK(orders["options"]["segment_size"] == 256);
    CHECK_THAT(orders["options"]["serializer"].get<std::string>(), Catch::Contains("json_serializer"));
    CHECK(orders["partitions"][0]["segments"] == 2);
    CHECK(orders["partitions"][0]["records"] == 7);
    CHECK(orders["partitions"][0]["earliest_offset"] == 0);
    CHECK(orders["partitions"][0]["log_end_offset"] == 7);
    CHECK(orders["partitions"][0]["status"] == "ok");
    REQUIRE(orders["groups"].size() == 2);
    CHECK(orders["groups"][0]["group"] == "audit");
    CHECK(orders["groups"][0]["lag"] == 0);
    CHECK(orders["groups"][1]["group"] == "billing");
    CHECK(orders["groups"][1]["lag"] == 3);
    CHECK(orders["groups"][1]["partitions"][0]["current_offset"] == 4);
}

TEST_CASE("inspect tool: verify exits 0 when intact and 1 naming the file and byte of each problem",
          "[inspect][mmap][tool]")
{
    temporary_directory directory;
    inspect_fixture(directory.path()).close();
    const tool_result intact = run_tool({"verify", directory.string()});
    CHECK(intact.status == 0);
    CHECK_THAT(intact.out, Catch::StartsWith("intact: 2 topics, 3 partitions"));

    const fs::path partition = inspect_partition(directory.path(), "orders");
    const fs::path segment = bq::test::segment_path(partition, 0);
    bq::test::flip_byte(segment, 40 + 40 + 12);
    const fs::path checkpoint = partition / "offsets" / "billing" / "consumer.offset";
    bq::test::flip_byte(checkpoint, 3);
    const tool_result damaged = run_tool({"verify", directory.string()});
    CHECK(damaged.status == 1);
    CHECK_THAT(damaged.out,
               Catch::Contains("problem: " + segment.string() + ": byte 80: a record with a bad checksum"));
    CHECK_THAT(damaged.out, Catch::Contains("problem: " + checkpoint.string() + ": byte 0:"));
    const json parsed = json::parse(run_tool({"verify", directory.string(), "--json"}).out);
    CHECK(parsed["intact"] == false);
    CHECK(parsed["problems"].size() == 2);
    // describe still describes, and says which partition is damaged.
    const tool_result described = run_tool({"describe", directory.string()});
    CHECK(described.status == 0);
    CHECK_THAT(described.out, Catch::Contains("damaged"));
}

TEST_CASE("inspect tool: read-only commands change nothing and work on a read-only copy", "[inspect][mmap][tool]")
{
    temporary_directory directory;
    inspect_fixture(directory.path()).close();
    const fs::path copy = directory.path() / "copy";
    fs::create_directory(copy);
    fs::copy(directory.path() / "orders", copy / "orders", fs::copy_options::recursive);
    fs::copy(directory.path() / "clicks", copy / "clicks", fs::copy_options::recursive);
    set_writable(copy, false);  // (as root this does not stop writes: the snapshot still catches them)
    const auto before = snapshot(copy);

    CHECK(run_tool({"describe", copy.string(), "--json"}).status == 0);
    CHECK(run_tool({"verify", copy.string()}).status == 0);
    const tool_result dumped = run_tool({"dump", copy.string(), "orders", "0"});
    CHECK(dumped.status == 0);
    CHECK_THAT(dumped.out, Catch::Contains("offset: 6 "));
    const tool_result dry = run_tool({"reset-offsets", copy.string(), "orders", "billing", "--to-earliest"});
    CHECK(dry.status == 0);
    CHECK_THAT(dry.out, Catch::Contains("dry run: nothing was written"));
    CHECK(run_tool({"delete-group", copy.string(), "orders", "audit"}).status == 0);

    CHECK(snapshot(copy) == before);
    set_writable(copy, true);
}

TEST_CASE("inspect tool: a torn tail is reported as a tail being written, not as damage", "[inspect][mmap][tool]")
{
    temporary_directory directory;
    inspect_fixture(directory.path()).close();
    bq::test::write_torn_tail(directory.path());

    const json described = json::parse(run_tool({"describe", directory.string(), "--json"}).out);
    CHECK(described["topics"][1]["partitions"][0]["status"] == "tail-being-written");
    CHECK(described["topics"][1]["partitions"][0]["records"] == 7);
    const tool_result verified = run_tool({"verify", directory.string()});
    CHECK(verified.status == 0);
    CHECK_THAT(verified.out, Catch::Contains("note: ") && Catch::Contains("tail being written"));
    const tool_result dumped = run_tool({"dump", directory.string(), "orders", "0", "--from", "6"});
    CHECK(dumped.status == 0);
    CHECK_THAT(dumped.out, Catch::Contains("offset: 6 ") && Catch::Contains("isvalid: true"));
    CHECK_THAT(dumped.out, Catch::Contains("offset: 7 ") && Catch::Contains("isvalid: false (tail being written"));
}

TEST_CASE("inspect tool: dump shows records decoded as JSON or in hex", "[inspect][mmap][tool]")
{
    temporary_directory directory;
    inspect_fixture(directory.path()).close();
    const tool_result decoded = run_tool({"dump", directory.string(), "orders", "0", "--from", "4", "--count", "2"});
    CHECK(decoded.status == 0);
    CHECK(decoded.out == "offset: 4 position: 200 segment: 00000000000000000000.log:200 size: 25 isvalid: true "
                         "payload: {\"id\":4,\"name\":\"order-4\"}\n"
                         "offset: 5 position: 296 segment: 00000000000000000001.log:40 size: 25 isvalid: true "
                         "payload: {\"id\":5,\"name\":\"order-5\"}\n");
    const tool_result hex = run_tool({"dump", directory.string(), "orders", "0", "--count", "1", "--format", "hex"});
    CHECK(hex.status == 0);
    CHECK_THAT(hex.out, Catch::EndsWith("payload: 7b226964223a302c226e616d65223a226f726465722d30227d\n"));
    const tool_result outside = run_tool({"dump", directory.string(), "orders", "0", "--from", "8"});
    CHECK(outside.status == 2);
    CHECK_THAT(outside.err, Catch::Contains("topic 'orders' partition 0: offset 8 is outside the valid range 0 to 7"));
}

TEST_CASE("inspect tool: reset-offsets and delete-group are dry runs unless --execute, refused while a queue runs",
          "[inspect][mmap][tool]")
{
    temporary_directory directory;
    {
        inspect_fixture running(directory.path());
        // Read-only commands take no lock.
        CHECK(run_tool({"describe", directory.string()}).status == 0);
        CHECK(run_tool({"verify", directory.string()}).status == 0);
        const tool_result refused =
            run_tool({"reset-offsets", directory.string(), "orders", "billing", "--to-offset", "6", "--execute"});
        CHECK(refused.status == 3);
        CHECK_THAT(refused.err, Catch::Contains("refusing to change topic 'orders'") &&
                                    Catch::Contains("close the queue that has it open"));
    }
    const tool_result dry = run_tool({"reset-offsets", directory.string(), "orders", "billing", "--to-offset", "6"});
    CHECK(dry.status == 0);
    CHECK_THAT(dry.out, Catch::Matches("(.|\n)*billing +orders +0 +4 +6 +1\n(.|\n)*"));
    CHECK(bq::test::reopened_ids(directory.path(), "billing").front() == 4);  // (commits up to 7)

    const tool_result out_of_range =
        run_tool({"reset-offsets", directory.string(), "orders", "billing", "--to-offset", "99", "--execute"});
    CHECK(out_of_range.status == 2);
    CHECK_THAT(
        out_of_range.err,
        Catch::Contains("topic 'orders' group 'billing' partition 0: offset 99 is outside the valid range 0 to 7"));
    const tool_result executed =
        run_tool({"reset-offsets", directory.string(), "orders", "billing", "--to-offset", "6", "--execute"});
    CHECK(executed.status == 0);
    CHECK_THAT(executed.out, Catch::Contains("offsets reset in 1 partition"));
    CHECK(bq::test::reopened_ids(directory.path(), "billing") == std::vector<std::int64_t>{6});

    CHECK(run_tool({"delete-group", directory.string(), "orders", "audit"}).status == 0);
    CHECK(fs::exists(inspect_partition(directory.path(), "orders") / "offsets" / "audit"));
    CHECK(run_tool({"delete-group", directory.string(), "orders", "audit", "--execute"}).status == 0);
    CHECK_FALSE(fs::exists(inspect_partition(directory.path(), "orders") / "offsets" / "audit"));
    CHECK(run_tool({"verify", directory.string()}).status == 0);
}

TEST_CASE("inspect tool: bad input is named with exit status 2", "[inspect][mmap][tool]")
{
    temporary_directory directory;
    const auto check = [](const std::vector<std::string>& arguments, const std::string& message) {
        const tool_result result = run_tool(arguments);
        CHECK(result.status == 2);
        CHECK_THAT(result.err, Catch::Contains(message));
    };
    check({}, "no command given");
    check({"inventory", directory.string()}, "unknown command 'inventory'");
    check({"describe", directory.string(), "--yaml"}, "unknown option --yaml");
    check({"describe"}, "expected DIR");
    check({"describe", directory.file("missing")}, "missing does not exist");
    check({"verify", directory.string()}, "is not a bufferqueue data folder");
    bq::test::write_file(directory.path() / "plain", {1, 2, 3});
    check({"describe", directory.file("plain")}, "plain is not a folder");
    inspect_fixture(directory.path()).close();
    check({"dump", directory.string(), "payments", "0"}, "no topic 'payments'");
    check({"dump", directory.string(), "orders", "3"}, "no partition 3 in topic 'orders'");
    check({"dump", directory.string(), "orders", "zero"}, "PARTITION must be a non-negative integer, not 'zero'");
    check({"dump", directory.string(), "orders", "0", "--format", "xml"}, "--format must be json or hex");
    check({"reset-offsets", directory.string(), "orders", "shipping", "--to-latest"},
          "no group 'shipping' in topic 'orders'");
    check({"reset-offsets", directory.string(), "orders", "billing"}, "needs one of --to-earliest");
    check({"reset-offsets", directory.string(), "orders", "billing", "--to-latest", "--to-earliest"}, "exactly one of");
    check({"delete-group", directory.string(), "orders", "billing", "--force"}, "unknown option --force");
    CHECK(run_tool({"--help"}).status == 0);
}

TEST_CASE("inspect tool: verify follows a topic folder that is a link and names a link that leads nowhere",
          "[inspect][mmap][tool]")
{
    temporary_directory directory;
    const fs::path data = directory.path() / "data";
    inspect_fixture(data).close();
    bq::test::move_topic_behind_link(data, "orders", directory.path() / "orders-elsewhere");
    const tool_result dumped = run_tool({"dump", data.string(), "orders", "0", "--from", "6"});
    CHECK(dumped.status == 0);
    CHECK_THAT(dumped.out, Catch::Contains("offset: 6 ") && Catch::Contains("isvalid: true"));

    const fs::path segment = bq::test::segment_path(inspect_partition(data, "orders"), 0);
    bq::test::flip_byte(segment, 40 + 40 + 12);
    const tool_result damaged = run_tool({"verify", data.string()});
    CHECK(damaged.status == 1);
    CHECK_THAT(damaged.out,
               Catch::Contains("problem: " + segment.string() + ": byte 80: a record with a bad checksum"));
    CHECK_THAT(damaged.out, Catch::Contains("DAMAGED: 2 topics, 3 partitions"));

    const fs::path link = data / "payments";
    fs::create_directory_symlink(directory.path() / "payments-on-a-missing-disk", link);
    bq::test::flip_byte(segment, 40 + 40 + 12);  // repaired: only the link is left
    const tool_result skipped = run_tool({"verify", data.string()});
    CHECK(skipped.status == 1);
    CHECK_THAT(skipped.out, Catch::Contains("problem: " + link.string() + ": "));
    CHECK_THAT(skipped.out, Catch::Contains("DAMAGED: 2 topics"));
    const tool_result described = run_tool({"describe", data.string()});
    CHECK(described.status == 0);
    CHECK_THAT(described.out, Catch::Contains("unexpected: " + link.string() + ": "));
}

TEST_CASE("inspect tool: an empty first segment is blamed alone and dump still prints the next segment's records",
          "[inspect][mmap][tool]")
{
    temporary_directory directory;
    inspect_fixture(directory.path()).close();
    const fs::path partition = inspect_partition(directory.path(), "orders");
    const fs::path first = bq::test::segment_path(partition, 0);
    bq::test::empty_file(first);

    const tool_result verified = run_tool({"verify", directory.string()});
    CHECK(verified.status == 1);
    CHECK_THAT(verified.out, Catch::Contains("problem: " + first.string() + ": has 0 bytes"));
    CHECK_THAT(verified.out, !Catch::Contains(bq::test::segment_path(partition, 1).string()));
    CHECK_THAT(verified.out, Catch::Contains("; 1 problems"));

    const tool_result dumped = run_tool({"dump", directory.string(), "orders", "0"});
    CHECK(dumped.status == 0);
    CHECK_THAT(dumped.out, Catch::Contains("unreadable: " + first.string() + ": has 0 bytes"));
    CHECK_THAT(dumped.out, Catch::Contains("segment: 00000000000000000001.log:40 size: 25 isvalid: true "
                                           "payload: {\"id\":5,\"name\":\"order-5\"}"));
    CHECK_THAT(dumped.out, Catch::Contains("payload: {\"id\":6,\"name\":\"order-6\"}"));
}

TEST_CASE("inspect tool: describe and verify name a non-canonical partition folder instead of showing the partition "
          "twice",
          "[inspect][mmap][tool]")
{
    temporary_directory directory;
    inspect_fixture(directory.path()).close();
    const fs::path stray = bq::test::add_stray_partition_folder(directory.path());

    const json described = json::parse(run_tool({"describe", directory.string(), "--json"}).out);
    CHECK(described["topics"][0]["topic"] == "clicks");
    CHECK(described["topics"][0]["partitions"].size() == 2);
    REQUIRE(described.contains("unexpected"));
    REQUIRE(described["unexpected"].size() == 1);
    CHECK(described["unexpected"][0]["path"] == stray.string());
    const tool_result text = run_tool({"describe", directory.string()});
    CHECK(text.status == 0);
    CHECK_THAT(text.out, Catch::Contains("unexpected: " + stray.string() + ": "));
    const tool_result verified = run_tool({"verify", directory.string()});
    CHECK(verified.status == 1);
    CHECK_THAT(verified.out, Catch::Contains("problem: " + stray.string() + ": "));
    CHECK_THAT(verified.out, Catch::Contains("DAMAGED: 2 topics, 3 partitions"));
}

}  // namespace inspect_tool_test
