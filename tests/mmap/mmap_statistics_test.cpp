// The item statistics of a persistent partition - end_items, earliest_items, committed_items - across
// appends, commits, retention deleting segments, restarts and an interrupted retention.
#include "bufferqueue/mmap/detail/mmap_partition.hpp"

#include "bufferqueue/mmap/detail/file.hpp"

#include "catch.hpp"
#include "test_support.hpp"

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace mmap_statistics_test {

namespace {

using bufferqueue::test::memory_backed_temporary_path;
using bufferqueue::test::string_bytes_serializer;
using bufferqueue::test::temporary_directory;

namespace bq = bufferqueue;
namespace detail = bufferqueue::detail;
namespace fs = std::filesystem;

using partition_type = detail::mmap_partition<std::string>;

// 256-byte segments hold 13 records of 8-byte payloads (16 bytes each) before the end marker.
constexpr std::uint64_t segment_size = 256;
constexpr std::uint64_t records_per_segment = 13;

std::string item(std::size_t index)
{
    std::string text = std::to_string(index);
    return "item-" + std::string(3 - text.size(), '0') + text;  // 8 bytes
}

partition_type::settings settings(const fs::path& folder, std::optional<std::size_t> keep = std::nullopt)
{
    return {.topic = "events",
            .partition = 0,
            .folder = folder.string(),
            .segment_size = segment_size,
            .max_retained_consumed_segments = keep,
            .serializer = string_bytes_serializer{}};
}

// Appends items [first, first + count).
void append(partition_type& partition, std::size_t first, std::size_t count)
{
    std::vector<std::string> items;
    for (std::size_t index = first; index < first + count; ++index) {
        items.push_back(item(index));
    }
    std::size_t appended = 0;
    partition.append(bq::item_source<std::string>{.base = items.data(), .count = items.size()}, appended);
    REQUIRE(appended == count);
}

// Pulls up to `count` items and commits them; returns how many it committed.
std::size_t consume(partition_type& partition, partition_type::cursor& cursor, std::size_t count)
{
    const bq::pull_result<std::string> pulled = partition.pull(cursor, count);
    partition.commit(cursor, pulled.next_offset);
    return pulled.items.size();
}

struct statistics {
    std::uint64_t end = 0;
    std::uint64_t earliest = 0;
    std::uint64_t committed = 0;

    friend bool operator==(const statistics&, const statistics&) = default;
};

statistics read_statistics(partition_type& partition, const std::string& group)
{
    auto& cursor = partition.open_cursor(group);
    return {partition.end_items(), partition.earliest_items(), partition.committed_items(cursor)};
}

}  // namespace

TEST_CASE("mmap statistics: a new partition counts nothing", "[mmap][statistics]")
{
    const temporary_directory directory("bufferqueue-statistics", memory_backed_temporary_path());
    partition_type partition(settings(directory.path() / "p"));
    auto& cursor = partition.open_cursor("g");
    CHECK(partition.end_items() == 0);
    CHECK(partition.earliest_items() == 0);
    CHECK(partition.committed_items(cursor) == 0);
}

TEST_CASE("mmap statistics: end and committed items follow appends and commits across segments", "[mmap][statistics]")
{
    const temporary_directory directory("bufferqueue-statistics", memory_backed_temporary_path());
    partition_type partition(settings(directory.path() / "p"));
    auto& cursor = partition.open_cursor("g");
    append(partition, 0, 10);
    CHECK(partition.end_items() == 10);
    CHECK(partition.committed_items(cursor) == 0);
    append(partition, 10, 20);  // into segments 1 and 2
    CHECK(partition.end_items() == 30);

    CHECK(consume(partition, cursor, 7) == 7);
    CHECK(partition.committed_items(cursor) == 7);
    CHECK(consume(partition, cursor, 6) == 6);  // to the end of segment 0: normalized past its marker
    CHECK(partition.committed_items(cursor) == records_per_segment);
    CHECK(consume(partition, cursor, 100) == 17);
    CHECK(partition.committed_items(cursor) == 30);
    CHECK(partition.earliest_items() == 0);

    // A group opened later starts at the earliest record.
    auto& late = partition.open_cursor("late");
    CHECK(partition.committed_items(late) == 0);
}

TEST_CASE("mmap statistics: a commit of an offset other than the last pull's end counts the records before it",
          "[mmap][statistics]")
{
    const temporary_directory directory("bufferqueue-statistics", memory_backed_temporary_path());
    partition_type partition(settings(directory.path() / "p"));
    auto& cursor = partition.open_cursor("g");
    append(partition, 0, 20);
    const std::uint64_t after_three = partition.pull(cursor, 3).next_offset;
    partition.pull(cursor, 16);  // redelivers from the committed offset: the last pull now ends at 16
    partition.commit(cursor, after_three);
    CHECK(partition.committed_items(cursor) == 3);
    const bq::pull_result<std::string> rest = partition.pull(cursor, 100);
    CHECK(rest.items.size() == 17);
    partition.commit(cursor, rest.next_offset);
    CHECK(partition.committed_items(cursor) == 20);
}

TEST_CASE("mmap statistics: retention deleting segments moves earliest items, and a restart keeps every value",
          "[mmap][statistics][retention]")
{
    const temporary_directory directory("bufferqueue-statistics", memory_backed_temporary_path());
    const fs::path folder = directory.path() / "p";
    statistics before;
    {
        partition_type partition(settings(folder, 0));
        auto& cursor = partition.open_cursor("g");
        append(partition, 0, 30);  // segments 0 and 1 full, 4 records in segment 2
        CHECK(consume(partition, cursor, 20) == 20);
        CHECK_FALSE(fs::exists(folder / detail::segment_file_name(0)));
        CHECK(partition.earliest_items() == records_per_segment);
        CHECK(partition.committed_items(cursor) == 20);
        CHECK(consume(partition, cursor, 100) == 10);
        CHECK_FALSE(fs::exists(folder / detail::segment_file_name(1)));
        CHECK(partition.earliest_items() == 2 * records_per_segment);
        CHECK(partition.end_items() == 30);
        auto& late = partition.open_cursor("late");  // starts at the earliest held record
        CHECK(partition.committed_items(late) == 2 * records_per_segment);
        before = read_statistics(partition, "g");
    }
    partition_type reopened(settings(folder, 0));
    CHECK(read_statistics(reopened, "g") == before);
    CHECK(reopened.committed_items(reopened.open_cursor("late")) == 2 * records_per_segment);
    append(reopened, 30, 5);
    CHECK(reopened.end_items() == 35);
}

TEST_CASE("mmap statistics: values after a restart equal the values before, with groups mid-segment",
          "[mmap][statistics]")
{
    const temporary_directory directory("bufferqueue-statistics", memory_backed_temporary_path());
    const fs::path folder = directory.path() / "p";
    statistics first;
    statistics second;
    {
        partition_type partition(settings(folder));
        append(partition, 0, 25);
        auto& one = partition.open_cursor("one");
        auto& two = partition.open_cursor("two");
        consume(partition, one, 5);
        consume(partition, two, 18);
        first = read_statistics(partition, "one");
        second = read_statistics(partition, "two");
    }
    partition_type reopened(settings(folder));
    CHECK(read_statistics(reopened, "one") == first);
    CHECK(read_statistics(reopened, "two") == second);
    CHECK(first == statistics{25, 0, 5});
    CHECK(second == statistics{25, 0, 18});
}

TEST_CASE("mmap statistics: a retention stopped after earliest.items but before earliest.offset counts back at open",
          "[mmap][statistics][retention]")
{
    const temporary_directory directory("bufferqueue-statistics", memory_backed_temporary_path());
    const fs::path folder = directory.path() / "p";
    const std::string earliest_path = (folder / "earliest.offset").string();
    {
        partition_type partition(settings(folder, 0));
        auto& cursor = partition.open_cursor("g");
        append(partition, 0, 30);
        // Retention writes earliest.items, then fails to replace earliest.offset: segment 0 stays.
        const detail::scoped_file_hooks hooks(
            {.before_operation =
                 [&](detail::file_operation operation, const std::string& path) {
                     return operation == detail::file_operation::rename && path == earliest_path ? EIO : 0;
                 },
             .after_flush = {}});
        CHECK(consume(partition, cursor, 20) == 20);
        CHECK(fs::exists(folder / "earliest.items"));
        CHECK(fs::exists(folder / detail::segment_file_name(0)));
        CHECK(partition.earliest_items() == 0);
    }
    {
        partition_type reopened(settings(folder));  // no retention: segment 0 is still held
        CHECK(read_statistics(reopened, "g") == statistics{30, 0, 20});
    }
    partition_type retained(settings(folder, 0));
    retained.retain_at_open();  // what the topic runs once every partition opened: releases segment 0
    CHECK(read_statistics(retained, "g") == statistics{30, records_per_segment, 20});
}

TEST_CASE("mmap statistics: end items read while another thread appends never go back",
          "[mmap][statistics][concurrency]")
{
    const temporary_directory directory("bufferqueue-statistics", memory_backed_temporary_path());
    partition_type partition(settings(directory.path() / "p"));
    constexpr std::size_t batches = 200;
    constexpr std::size_t batch_size = 5;
    std::atomic<bool> done{false};
    std::thread writer([&] {
        const std::vector<std::string> items(batch_size, item(7));
        for (std::size_t batch = 0; batch < batches; ++batch) {
            std::size_t appended = 0;
            partition.append(bq::item_source<std::string>{.base = items.data(), .count = items.size()}, appended);
        }
        done.store(true);
    });
    std::uint64_t last = 0;
    bool monotonic = true;
    while (!done.load()) {
        const std::uint64_t now = partition.end_items();
        monotonic = monotonic && now >= last && now <= batches * batch_size;
        last = now;
        std::this_thread::yield();
    }
    writer.join();
    CHECK(monotonic);
    CHECK(partition.end_items() == batches * batch_size);
}

}  // namespace mmap_statistics_test
