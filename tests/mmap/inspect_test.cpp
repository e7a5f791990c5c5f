// The folder-reading library behind bufferqueue-inspect (mmap/inspect/), used directly on
// folders a real queue wrote. The installed tool itself is tested in tests/tools/inspect_tool_test.cpp.
#include "bufferqueue/mmap/inspect/folder_reader.hpp"
#include "bufferqueue/mmap/inspect/folder_verifier.hpp"
#include "bufferqueue/mmap/inspect/group_editor.hpp"

#include "bufferqueue/mmap/detail/file_hooks.hpp"

#include "catch.hpp"
#include "inspect_test_support.hpp"
#include "test_support.hpp"

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace inspect_test {

namespace {

namespace bq = bufferqueue;
namespace inspect = bufferqueue::inspect;
using bq::test::inspect_fixture;
using bq::test::inspect_partition;
using bq::test::reopened_ids;
using bq::test::temporary_directory;

std::uint64_t committed(const inspect::partition_summary& summary, const std::string& group)
{
    for (const auto& each : summary.groups) {
        if (each.group == group) {
            return each.committed;
        }
    }
    FAIL("no group " << group);
    return 0;
}

}  // namespace

TEST_CASE("inspect: a partition reader reports segments, records and every group's position in items",
          "[inspect][mmap]")
{
    temporary_directory directory;
    inspect_fixture(directory.path()).close();

    CHECK(inspect::list_topics(directory.string()) == std::vector<std::string>{"clicks", "orders"});
    CHECK(inspect::list_partitions(directory.string(), "clicks") == std::vector<std::size_t>{0, 1});
    const inspect::partition_reader reader(directory.string(), "orders", 0);
    const inspect::partition_summary& summary = reader.summary();
    CHECK_FALSE(summary.problem);
    CHECK(summary.segments == 2);
    CHECK(summary.bytes == 2 * bq::test::inspect_segment_size);
    CHECK(summary.earliest == 0);
    CHECK(summary.end == 7);
    CHECK(summary.tail_bytes == 0);
    REQUIRE(summary.groups.size() == 2);
    CHECK(committed(summary, "billing") == 4);
    CHECK(committed(summary, "audit") == 7);

    std::vector<std::uint64_t> items;
    reader.read_records(2, 3, [&](const inspect::record_entry& record) {
        CHECK(record.valid);
        items.push_back(record.item);
    });
    CHECK(items == std::vector<std::uint64_t>{2, 3, 4});
    CHECK(reader.log_offset_of(5) == bq::test::inspect_segment_size + 40);  // first record of segment 1
    CHECK_THROWS_WITH(reader.log_offset_of(8), Catch::Contains("offset 8 is outside the valid range 0 to 7"));
}

TEST_CASE("inspect: verify reports a flipped byte inside flushed records with its file and byte", "[inspect][mmap]")
{
    temporary_directory directory;
    inspect_fixture(directory.path()).close();
    CHECK(inspect::verify_data_folder(directory.string()).intact());

    const auto segment = bq::test::segment_path(inspect_partition(directory.path(), "orders"), 0);
    bq::test::flip_byte(segment, 40 + 40 + 12);  // inside the payload of record 1
    const inspect::verify_report report = inspect::verify_data_folder(directory.string());
    REQUIRE(report.problems.size() == 1);
    CHECK(report.problems[0].file == segment.string());
    CHECK(report.problems[0].byte == 80);
    CHECK_THAT(report.problems[0].text, Catch::Contains("bad checksum"));
}

TEST_CASE("inspect: a torn tail is a note for verify and a tail record for the reader, not damage", "[inspect][mmap]")
{
    temporary_directory directory;
    inspect_fixture(directory.path()).close();
    bq::test::write_torn_tail(directory.path());

    const inspect::verify_report report = inspect::verify_data_folder(directory.string());
    CHECK(report.intact());
    REQUIRE(report.notes.size() == 1);
    CHECK_THAT(report.notes[0].text, Catch::Contains("tail being written"));
    const inspect::partition_reader reader(directory.string(), "orders", 0);
    CHECK(reader.summary().tail_bytes > 0);
    std::vector<inspect::record_entry> records;
    reader.read_records(5, 100, [&](const inspect::record_entry& record) { records.push_back(record); });
    REQUIRE(records.size() == 3);
    CHECK(records[2].tail);
    CHECK_FALSE(records[2].valid);
    CHECK(records[2].size == 25);
}

TEST_CASE("inspect: a reset to a record number is where a reopened queue resumes the group", "[inspect][mmap]")
{
    temporary_directory directory;
    inspect_fixture(directory.path()).close();

    const inspect::group_change_plan plan =
        inspect::plan_reset(directory.string(), "orders", "billing", inspect::reset_target::offset, 6);
    REQUIRE(plan.changes.size() == 1);
    CHECK(plan.changes[0].current == 4);
    CHECK(plan.changes[0].target == 6);
    CHECK(committed(inspect::partition_reader(directory.string(), "orders", 0).summary(), "billing") == 4);

    inspect::execute_reset(directory.string(), "orders", "billing", inspect::reset_target::offset, 6);
    CHECK(reopened_ids(directory.path(), "billing") == std::vector<std::int64_t>{6});
    inspect::execute_reset(directory.string(), "orders", "audit", inspect::reset_target::earliest);
    CHECK(reopened_ids(directory.path(), "audit").size() == 7);
    inspect::execute_reset(directory.string(), "orders", "audit", inspect::reset_target::latest);
    CHECK(reopened_ids(directory.path(), "audit").empty());
    CHECK_THROWS_WITH(inspect::plan_reset(directory.string(), "orders", "billing", inspect::reset_target::offset, 9),
                      Catch::Contains("topic 'orders' group 'billing' partition 0: offset 9 is outside the valid "
                                      "range 0 to 7"));
}

TEST_CASE("inspect: group changes are refused while a queue holds the topic open", "[inspect][mmap]")
{
    temporary_directory directory;
    inspect_fixture running(directory.path());
    CHECK_THROWS_WITH(inspect::execute_delete(directory.string(), "orders", "billing"),
                      Catch::Contains("refusing to change topic 'orders'") && Catch::Contains("another queue"));
    // Reading takes no lock.
    CHECK(inspect::partition_reader(directory.string(), "orders", 0).summary().end == 7);
    running.close();
    inspect::execute_delete(directory.string(), "orders", "billing");
    CHECK_THROWS_WITH(inspect::plan_delete(directory.string(), "orders", "billing"),
                      Catch::Contains("no group 'billing' in topic 'orders' (its groups: 'audit')"));
}

TEST_CASE("inspect: a folder that is not a data folder is named in the error", "[inspect][mmap]")
{
    temporary_directory directory;
    CHECK_THROWS_WITH(inspect::list_topics(directory.file("missing")), Catch::Contains("missing does not exist"));
    CHECK_THROWS_WITH(inspect::list_topics(directory.string()), Catch::Contains("is not a bufferqueue data folder"));
    inspect_fixture(directory.path()).close();
    CHECK_THROWS_WITH(inspect::list_partitions(directory.string(), "nope"),
                      Catch::Contains("no topic 'nope'") && Catch::Contains("'clicks', 'orders'"));
    CHECK_THROWS_WITH(inspect::partition_reader(directory.string(), "clicks", 2),
                      Catch::Contains("no partition 2 in topic 'clicks' (it has 2 partitions"));
}

TEST_CASE("inspect: a segment that cannot be mapped is a problem naming the file, not a crash",
          "[inspect][mmap][fault]")
{
    temporary_directory directory;
    inspect_fixture(directory.path()).close();
    const std::string segment = bq::test::segment_path(inspect_partition(directory.path(), "orders"), 1).string();
    const bq::detail::scoped_file_hooks hooks(
        {.before_operation =
             [&](bq::detail::file_operation operation, const std::string& path) {
                 return operation == bq::detail::file_operation::map && path == segment ? EIO : 0;
             },
         .after_flush = {}});
    const inspect::partition_reader reader(directory.string(), "orders", 0);
    REQUIRE(reader.summary().problem);
    CHECK_THAT(*reader.summary().problem, Catch::Contains(segment));
    const inspect::verify_report report = inspect::verify_data_folder(directory.string());
    REQUIRE_FALSE(report.intact());
    CHECK(report.problems[0].file == segment);
}

TEST_CASE("inspect: a topic folder that is a link to a folder is listed and verified like any other", "[inspect][mmap]")
{
    temporary_directory directory;
    const auto data = directory.path() / "data";
    inspect_fixture(data).close();
    bq::test::move_topic_behind_link(data, "orders", directory.path() / "orders-elsewhere");
    const auto segment = bq::test::segment_path(inspect_partition(data, "orders"), 0);
    bq::test::flip_byte(segment, 40 + 40 + 12);  // inside the payload of record 1

    CHECK(inspect::list_topics(data.string()) == std::vector<std::string>{"clicks", "orders"});
    const inspect::verify_report report = inspect::verify_data_folder(data.string());
    CHECK(report.topics == 2);
    REQUIRE(report.problems.size() == 1);
    CHECK(report.problems[0].file == segment.string());
    CHECK(report.problems[0].byte == 80);
}

TEST_CASE("inspect: a link in the data folder that leads to no folder is a problem naming it", "[inspect][mmap]")
{
    temporary_directory directory;
    inspect_fixture(directory.path()).close();
    const auto link = directory.path() / "payments";
    std::filesystem::create_directory_symlink(directory.path() / "payments-on-a-missing-disk", link);

    const inspect::verify_report report = inspect::verify_data_folder(directory.string());
    CHECK_FALSE(report.intact());
    REQUIRE(report.problems.size() == 1);
    CHECK(report.problems[0].file == link.string());
    CHECK_THAT(report.problems[0].text, Catch::Contains("link") && Catch::Contains("not checked"));
}

TEST_CASE("inspect: an empty first segment is blamed alone, and the next segment can still be read", "[inspect][mmap]")
{
    temporary_directory directory;
    inspect_fixture(directory.path()).close();
    const auto partition = inspect_partition(directory.path(), "orders");
    const auto first = bq::test::segment_path(partition, 0);
    bq::test::empty_file(first);

    const inspect::verify_report report = inspect::verify_data_folder(directory.string());
    REQUIRE(report.problems.size() == 1);
    CHECK(report.problems[0].file == first.string());
    CHECK_THAT(report.problems[0].text, Catch::Contains("has 0 bytes, but the segment size is 256"));

    const inspect::partition_reader reader(directory.string(), "orders", 0);
    CHECK(reader.summary().problem);
    CHECK(reader.summary().segment_size == bq::test::inspect_segment_size);
    REQUIRE(reader.summary().unreadable.size() == 1);
    CHECK(reader.summary().unreadable[0].path == first.string());
    CHECK_THAT(reader.summary().unreadable[0].reason, Catch::Contains("has 0 bytes"));
    std::vector<std::string> files;
    reader.read_records(0, 100, [&](const inspect::record_entry& record) {
        CHECK(record.valid);
        files.push_back(record.segment_file);
    });
    CHECK(files == std::vector<std::string>{"00000000000000000001.log", "00000000000000000001.log"});
}

TEST_CASE("inspect: a damaged byte in the first segment's header blames that segment alone", "[inspect][mmap]")
{
    temporary_directory directory;
    inspect_fixture(directory.path()).close();
    const auto partition = inspect_partition(directory.path(), "orders");
    const auto first = bq::test::segment_path(partition, 0);
    bq::test::flip_byte(first, 25);  // in the segment size field: 256 reads as 65024, a valid segment size

    const inspect::verify_report report = inspect::verify_data_folder(directory.string());
    REQUIRE(report.problems.size() == 1);
    CHECK(report.problems[0].file == first.string());
    CHECK(report.problems[0].byte == 0);
    CHECK_THAT(report.problems[0].text, Catch::Contains("the segment header is damaged"));
    std::size_t records = 0;
    inspect::partition_reader(directory.string(), "orders", 0)
        .read_records(0, 100, [&](const inspect::record_entry& record) { records += record.valid ? 1 : 0; });
    CHECK(records == 2);
}

TEST_CASE("inspect: a partition folder with a non-canonical name is a problem naming it, not a partition",
          "[inspect][mmap]")
{
    temporary_directory directory;
    inspect_fixture(directory.path()).close();
    const auto stray = bq::test::add_stray_partition_folder(directory.path());

    CHECK(inspect::list_partitions(directory.string(), "clicks") == std::vector<std::size_t>{0, 1});
    const std::vector<inspect::unexpected_entry> unexpected = inspect::list_unexpected_entries(directory.string());
    REQUIRE(unexpected.size() == 1);
    CHECK(unexpected[0].path == stray.string());
    const inspect::verify_report report = inspect::verify_data_folder(directory.string());
    CHECK(report.partitions == 3);
    REQUIRE(report.problems.size() == 1);
    CHECK(report.problems[0].file == stray.string());
    CHECK_THAT(report.problems[0].text, Catch::Contains("partition-00001") && Catch::Contains("not checked"));
}

TEST_CASE("inspect: topic.options is read and verified: damaged, missing, or disagreeing with the partitions",
          "[inspect][mmap]")
{
    temporary_directory directory;
    inspect_fixture(directory.path()).close();
    const std::filesystem::path options = directory.path() / "orders" / "topic.options";
    CHECK(inspect::list_unexpected_entries(directory.string()).empty());
    const auto stored = inspect::read_topic_options(directory.string(), "orders");
    REQUIRE(stored);
    CHECK(stored->partitions == 1);
    CHECK(stored->segment_size == bq::test::inspect_segment_size);
    CHECK_THAT(stored->serializer_name, Catch::Contains("json_serializer"));

    SECTION("damaged: a problem naming the file")
    {
        bq::test::flip_byte(options, 20);
        const inspect::verify_report report = inspect::verify_data_folder(directory.string());
        REQUIRE(report.problems.size() == 1);
        CHECK(report.problems[0].file == options.string());
        CHECK_THAT(report.problems[0].text, Catch::Contains("checksum"));
        CHECK_THROWS_WITH(inspect::read_topic_options(directory.string(), "orders"), Catch::Contains(options.string()));
    }
    SECTION("missing: a note, as the next open writes it")
    {
        std::filesystem::remove(options);
        const inspect::verify_report report = inspect::verify_data_folder(directory.string());
        CHECK(report.intact());
        REQUIRE(report.notes.size() == 1);
        CHECK(report.notes[0].file == options.string());
        CHECK_FALSE(inspect::read_topic_options(directory.string(), "orders"));
    }
    SECTION("a partition folder beyond the stored partitions: a problem naming it")
    {
        const std::filesystem::path extra = directory.path() / "orders" / "partition-00001";
        std::filesystem::copy(inspect_partition(directory.path(), "orders"), extra,
                              std::filesystem::copy_options::recursive);
        const inspect::verify_report report = inspect::verify_data_folder(directory.string());
        REQUIRE(report.problems.size() == 1);
        CHECK(report.problems[0].file == extra.string());
        CHECK_THAT(report.problems[0].text, Catch::Contains("beyond the 1 partitions"));
    }
    SECTION("a leftover of an interrupted write: not unexpected, a note")
    {
        bq::test::write_file(options.string() + ".tmp", {1, 2, 3});
        CHECK(inspect::list_unexpected_entries(directory.string()).empty());
        const inspect::verify_report report = inspect::verify_data_folder(directory.string());
        CHECK(report.intact());
        REQUIRE(report.notes.size() == 1);
        CHECK(report.notes[0].file == options.string() + ".tmp");
    }
}

}  // namespace inspect_test
