#include "bufferqueue/mmap/mmap_topic.hpp"

#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/mmap/detail/file_hooks.hpp"

#include "catch.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/io_context.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace mmap_recovery_test {

namespace {

using bufferqueue::test::differences;
using bufferqueue::test::file_bytes;
using bufferqueue::test::segment_indices;
using bufferqueue::test::segment_path;
using bufferqueue::test::snapshot;
using bufferqueue::test::string_bytes_serializer;
using bufferqueue::test::temporary_directory;
using bufferqueue::test::write_file;

namespace bq = bufferqueue;
namespace fs = std::filesystem;
using bq::errc;

// ---- helpers ------------------------------------------------------------------------------------

constexpr std::uint64_t first_offset = 40;
constexpr std::uint64_t record_bytes(std::uint64_t length)
{
    return (8 + length + 7) / 8 * 8;
}

bq::mmap_topic_options<std::string> string_topic(const fs::path& directory, std::uint64_t segment_size,
                                                 std::size_t partitions = 1)
{
    return {.name = "events",
            .partitions = partitions,
            .data_directory = directory,
            .segment_size = segment_size,
            .serializer = string_bytes_serializer{}};
}

// A queue holding one string topic, closed when destroyed.
struct open_topic {
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};

    explicit open_topic(const bq::mmap_topic_options<std::string>& options) { queue.add_topic(options); }

    void produce(const std::vector<std::string>& items)
    {
        auto producer = queue.producer<std::string>("events");
        REQUIRE(producer.try_produce(std::span<const std::string>(items)));
    }

    bq::pull_consumer<std::string> consumer(const std::string& group, std::size_t batch_size = 100)
    {
        return queue.create_pull_consumer<std::string>({.topic = "events", .group = group, .batch_size = batch_size});
    }

    void commit(bq::pull_consumer<std::string>& consumer)
    {
        boost::system::error_code result = errc::invalid_argument;
        consumer.commit([&](boost::system::error_code error) { result = error; });
        io.run();
        io.restart();
        REQUIRE_FALSE(result);
    }

    // Consumes and commits everything the group can read now (the group is created on first use).
    std::vector<std::string> drain(const std::string& group)
    {
        auto found = consumers.find(group);
        if (found == consumers.end()) {
            found = consumers.emplace(group, consumer(group)).first;
        }
        std::vector<std::string> items;
        while (auto delivered = found->second.try_consume()) {
            items.insert(items.end(), delivered->begin(), delivered->end());
            commit(found->second);
        }
        return items;
    }

    std::map<std::string, bq::pull_consumer<std::string>> consumers;
};

std::vector<unsigned char> little_endian(std::uint64_t value)
{
    std::vector<unsigned char> bytes;
    for (int i = 0; i < 8; ++i) {
        bytes.push_back(static_cast<unsigned char>(value >> (8 * i)));
    }
    return bytes;
}

void write_checkpoint(const fs::path& path, std::uint64_t value)
{
    write_file(path, little_endian(value));
}

std::uint64_t checkpoint(const fs::path& path)
{
    const std::vector<unsigned char> bytes = file_bytes(path);
    // Format version 2 (value, version, CRC-32C) as the library writes it, or version 1 (the value
    // alone) as these tests write it with write_checkpoint.
    REQUIRE((bytes.size() == 16 || bytes.size() == 8));
    std::uint64_t value = 0;
    for (int i = 7; i >= 0; --i) {
        value = (value << 8) | bytes[static_cast<std::size_t>(i)];
    }
    return value;
}

// Overwrites bytes [from, size) of a file with zeros; the file keeps its size.
void zero_from(const fs::path& path, std::uint64_t from)
{
    std::vector<unsigned char> bytes = file_bytes(path);
    REQUIRE(from <= bytes.size());
    std::fill(bytes.begin() + static_cast<std::ptrdiff_t>(from), bytes.end(), 0);
    write_file(path, bytes);
}

// Removes flush.mark, which says how far the log was flushed: the state a power loss leaves when the
// mark (never synced) had not been written back. Tests that rewind producer.offset to simulate a
// tail that was never flushed remove it too, or it would vouch for that tail.
void forget_flush_mark(const fs::path& folder)
{
    REQUIRE(fs::remove(folder / "flush.mark"));
}

void flip_byte(const fs::path& path, std::uint64_t position)
{
    std::vector<unsigned char> bytes = file_bytes(path);
    REQUIRE(position < bytes.size());
    bytes[position] ^= 0x5A;
    write_file(path, bytes);
}

fs::path partition_path(const fs::path& directory, std::size_t partition = 0)
{
    std::string number = std::to_string(partition);
    number.insert(0, 5 - number.size(), '0');
    return directory / "events" / ("partition-" + number);
}

std::vector<std::string> numbered(std::size_t first, std::size_t count)
{
    std::vector<std::string> items;
    for (std::size_t i = first; i < first + count; ++i) {
        std::string text = std::to_string(i);
        text.insert(0, 8 - text.size(), '0');
        items.push_back(text);
    }
    return items;
}

// Opening fails with corrupt_data naming every string in `mentions`, and changes no file.
void require_corrupt(const bq::mmap_topic_options<std::string>& options, const std::vector<std::string>& mentions)
{
    const auto before = snapshot(options.data_directory);
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    try {
        queue.add_topic(options);
        FAIL("the topic opened");
    } catch (const bq::error& failure) {
        INFO(failure.what());
        CHECK(failure.code() == errc::corrupt_data);
        for (const std::string& mention : mentions) {
            CHECK(std::string(failure.what()).find(mention) != std::string::npos);
        }
    }
    CHECK(differences(before, snapshot(options.data_directory)) == std::vector<std::string>{});
}

// The standard damaged-log fixture: 256-byte segments holding 13 16-byte records each; 30 records in
// segments 0 (13), 1 (13) and 2 (4). Group "g" committed 20 records (offset 408); group "h" exists
// and committed nothing (offset 40). producer.offset is 616, the end of the log.
constexpr std::uint64_t segment = 256;
constexpr std::uint64_t log_end = 2 * segment + first_offset + 4 * 16;  // 616
constexpr std::uint64_t g_offset = segment + first_offset + 7 * 16;     // 408

// The standard log is built once and copied for every test that damages it.
const fs::path& pristine_standard_log()
{
    static const temporary_directory directory;
    static const bool built = [] {
        const fs::path folder = partition_path(directory.path());
        open_topic topic(string_topic(directory.path(), segment));
        auto h = topic.consumer("h");
        topic.produce(numbered(0, 30));
        auto g = topic.consumer("g", 20);
        REQUIRE(g.try_consume());
        topic.commit(g);
        topic.queue.close();
        REQUIRE(segment_indices(folder) == std::vector<std::uint64_t>{0, 1, 2});
        REQUIRE(checkpoint(folder / "producer.offset") == log_end);
        REQUIRE(checkpoint(folder / "offsets" / "g" / "consumer.offset") == g_offset);
        REQUIRE(checkpoint(folder / "offsets" / "h" / "consumer.offset") == first_offset);
        return true;
    }();
    REQUIRE(built);
    return directory.path();
}

struct standard_log {
    temporary_directory directory;
    fs::path folder = partition_path(directory.path());
    bq::mmap_topic_options<std::string> options = string_topic(directory.path(), segment);

    standard_log() { fs::copy(pristine_standard_log(), directory.path(), fs::copy_options::recursive); }

    fs::path group_file(const std::string& group) const { return folder / "offsets" / group / "consumer.offset"; }
};

// One batch of everything the group can read, not committed (no checkpoint I/O).
std::vector<std::string> read_uncommitted(open_topic& topic, const std::string& group)
{
    auto reader = topic.consumer(group, 1000);
    const auto delivered = reader.try_consume();
    return delivered ? std::vector<std::string>(delivered->begin(), delivered->end()) : std::vector<std::string>{};
}

// ---- torn tails ---------------------------------------------------------------------------------

// The pages of `path` in the page cache (mincore over a mapping that touches none of them).
std::size_t resident_pages(const std::string& path)
{
    const int file = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(file >= 0);
    const auto size = static_cast<std::size_t>(::lseek(file, 0, SEEK_END));
    void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, file, 0);
    ::close(file);
    REQUIRE(mapping != MAP_FAILED);
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> pages((size + page - 1) / page);
    REQUIRE(::mincore(mapping, size, pages.data()) == 0);
    ::munmap(mapping, size);
    return static_cast<std::size_t>(
        std::count_if(pages.begin(), pages.end(), [](unsigned char bits) { return (bits & 1) != 0; }));
}

TEST_CASE("mmap recovery reads a segment only as far as its data goes, not the blocks reserved past it",
          "[mmap][recovery]")
{
    // Opening a topic looked for stale bytes after the tail by reading the tail segment to its end:
    // every page of a 256 MiB default segment, per partition, at every start. Past the last block
    // the file system holds data for, the file reads as zeros without being read.
    temporary_directory directory;
    constexpr std::uint64_t segment_size = 64ULL * 1024 * 1024;
    {
        open_topic first(string_topic(directory.path(), segment_size));
        first.produce({"a", "b", "c"});
    }
    const std::string segment = segment_path(directory.path() / "events" / "partition-00000", 0).string();
    {
        const int file = ::open(segment.c_str(), O_RDONLY | O_CLOEXEC);
        REQUIRE(file >= 0);
        const off_t hole = ::lseek(file, 0, SEEK_HOLE);
        ::posix_fadvise(file, 0, 0, POSIX_FADV_DONTNEED);  // clean pages: dropped from the cache
        ::close(file);
        const std::size_t total = segment_size / static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
        if (hole < 0 || static_cast<std::uint64_t>(hole) >= segment_size || resident_pages(segment) > total / 64) {
            WARN("the temporary folder's file system reports no hole past the reserved blocks, or keeps the file "
                 "in memory (tmpfs): nothing to measure there");
            return;
        }
    }
    {
        open_topic reopened(string_topic(directory.path(), segment_size));
        CHECK(reopened.drain("g") == std::vector<std::string>{"a", "b", "c"});
    }
    const std::size_t total = segment_size / static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    // What was read, plus the kernel's readahead around it (8 MiB on this machine's disk), not all.
    INFO(resident_pages(segment) << " of " << total << " pages in the page cache");
    CHECK(resident_pages(segment) < total / 2);
}

TEST_CASE("mmap recovery zeroes stale bytes past never-written blocks, reads the whole segment where the file "
          "system cannot tell holes, and names the segment when it cannot look",
          "[mmap][recovery]")
{
    temporary_directory directory;
    constexpr std::uint64_t segment_size = 16ULL * 1024 * 1024;
    constexpr std::uint64_t stale_at = 12ULL * 1024 * 1024;
    {
        open_topic topic(string_topic(directory.path(), segment_size));
        topic.produce({"AAAAAAAA"});
    }
    const fs::path log = segment_path(partition_path(directory.path()), 0);
    {
        // One stale byte far past the tail, with blocks never written (holes) between them.
        const int file = ::open(log.c_str(), O_WRONLY | O_CLOEXEC);
        REQUIRE(file >= 0);
        const unsigned char stale = 0x5A;
        CHECK(::pwrite(file, &stale, 1, static_cast<off_t>(stale_at)) == 1);
        ::close(file);
    }
    int injected = 0;  // the errno the hook gives lseek(SEEK_DATA / SEEK_HOLE)
    bq::detail::scoped_file_hooks hooks({.before_operation =
                                             [&](bq::detail::file_operation operation, const std::string&) {
                                                 return operation == bq::detail::file_operation::seek_data ? injected
                                                                                                           : 0;
                                             },
                                         .after_flush = {}});
    SECTION("the file system tells where the data is")
    {
    }
    SECTION("the file system cannot tell holes: the segment is read to its end")
    {
        injected = EINVAL;
    }
    SECTION("looking fails: the open fails with io_error naming the segment")
    {
        injected = EIO;
        const auto failure =
            bq::test::error_from([&] { open_topic topic(string_topic(directory.path(), segment_size)); });
        REQUIRE(failure);
        CHECK(failure->code() == errc::io_error);
        CHECK(bq::test::missing_from(failure->what(), {log.string(), "where the data"}) == "");
        return;
    }
    {
        open_topic topic(string_topic(directory.path(), segment_size));
        CHECK(topic.drain("g") == std::vector<std::string>{"AAAAAAAA"});
    }
    CHECK(file_bytes(log).at(stale_at) == 0);
}

TEST_CASE("mmap recovery: a cut after any byte of the last record keeps exactly the complete records",
          "[mmap][recovery]")
{
    temporary_directory directory;
    const std::vector<std::string> items = {"abc", "hello world", "xyz12", "the last record here!"};
    const fs::path pristine = directory.path() / "pristine";
    {
        open_topic topic(string_topic(pristine, 1024));
        auto g = topic.consumer("g");  // exists before the cut, at offset 40
        topic.produce(items);
    }
    const std::uint64_t last_start = first_offset + record_bytes(3) + record_bytes(11) + record_bytes(5);
    const std::uint64_t last_payload_end = last_start + 8 + items.back().size();
    const std::uint64_t last_end = last_start + record_bytes(items.back().size());
    REQUIRE(checkpoint(partition_path(pristine) / "producer.offset") == last_end);
    // The last record was written after the latest producer.offset (as when a process dies mid-write).
    write_checkpoint(partition_path(pristine) / "producer.offset", last_start);
    forget_flush_mark(partition_path(pristine));

    for (std::uint64_t cut = last_start; cut <= last_end; ++cut) {
        INFO("bytes kept: " << cut);
        const fs::path data = directory.path() / ("cut-" + std::to_string(cut));
        fs::copy(pristine, data, fs::copy_options::recursive);
        const fs::path log = segment_path(partition_path(data), 0);
        zero_from(log, cut);
        REQUIRE(fs::file_size(log) == 1024);

        const bool complete = cut >= last_payload_end;
        std::vector<std::string> expected(items.begin(), complete ? items.end() : items.end() - 1);
        {
            open_topic topic(string_topic(data, 1024));
            CHECK(read_uncommitted(topic, "g") == expected);
            topic.produce({"new-1", "new-2"});
        }
        expected.push_back("new-1");
        expected.push_back("new-2");
        open_topic reopened(string_topic(data, 1024));
        CHECK(read_uncommitted(reopened, "g") == expected);
        fs::remove_all(data);
    }
}

TEST_CASE("mmap recovery: without producer.offset the whole log is scanned and a torn tail is cut", "[mmap][recovery]")
{
    temporary_directory directory;
    const fs::path folder = partition_path(directory.path());
    {
        open_topic topic(string_topic(directory.path(), 256));
        topic.produce(numbered(0, 20));  // 13 in segment 0, 7 in segment 1
    }
    fs::remove(folder / "producer.offset");
    forget_flush_mark(folder);
    zero_from(segment_path(folder, 1), first_offset + 6 * 16 + 5);  // the 20th record is torn
    open_topic topic(string_topic(directory.path(), 256));
    CHECK(topic.drain("g") == numbered(0, 19));
}

TEST_CASE("mmap recovery: a truncated segment file is corrupt_data for its size", "[mmap][recovery]")
{
    temporary_directory directory;
    const fs::path folder = partition_path(directory.path());
    {
        open_topic topic(string_topic(directory.path(), 1024));
        topic.produce({"one", "two"});
    }
    const fs::path log = segment_path(folder, 0);
    fs::resize_file(log, first_offset + 2 * 16);
    require_corrupt(string_topic(directory.path(), 1024), {log.string(), "size"});
}

TEST_CASE("mmap recovery: a damaged record after producer.offset is cut off and never comes back", "[mmap][recovery]")
{
    temporary_directory directory;
    const fs::path folder = partition_path(directory.path());
    {
        open_topic topic(string_topic(directory.path(), 1024));
        topic.produce({"AAAAAAAA", "BBBBBBBB", "CCCCCCCC"});
    }
    const fs::path log = segment_path(folder, 0);
    write_checkpoint(folder / "producer.offset", first_offset + 16);  // vouches for "A" only
    forget_flush_mark(folder);
    flip_byte(log, first_offset + 16 + 8 + 3);  // inside "B"'s payload
    {
        open_topic topic(string_topic(directory.path(), 1024));
        CHECK(topic.drain("g") == std::vector<std::string>{"AAAAAAAA"});
        // The tail after "A" is zeroed before anything is appended.
        const std::vector<unsigned char> bytes = file_bytes(log);
        CHECK(std::all_of(bytes.begin() + static_cast<std::ptrdiff_t>(first_offset + 16), bytes.end(),
                          [](unsigned char byte) { return byte == 0; }));
        // "X" takes the place of "B"; the old "C" right after it must not come back to life.
        topic.produce({"XXXXXXXX"});
    }
    open_topic topic(string_topic(directory.path(), 1024));
    CHECK(topic.drain("fresh") == std::vector<std::string>{"AAAAAAAA", "XXXXXXXX"});
}

TEST_CASE("mmap recovery: a damaged record inside the range producer.offset vouches for is corrupt_data",
          "[mmap][recovery]")
{
    standard_log log;
    SECTION("in the last segment")
    {
        flip_byte(segment_path(log.folder, 2), first_offset + 2 * 16 + 9);
        require_corrupt(log.options, {segment_path(log.folder, 2).string()});
    }
    SECTION("in an earlier segment")
    {
        flip_byte(segment_path(log.folder, 0), first_offset + 5 * 16 + 1);
        require_corrupt(log.options, {segment_path(log.folder, 0).string()});
    }
    SECTION("in a segment-end marker")
    {
        flip_byte(segment_path(log.folder, 1), first_offset + 13 * 16 + 5);
        require_corrupt(log.options, {segment_path(log.folder, 1).string()});
    }
}

TEST_CASE("mmap recovery: a segment that ends early while a later one exists is corrupt_data", "[mmap][recovery]")
{
    standard_log log;
    fs::remove(log.folder / "producer.offset");
    flip_byte(segment_path(log.folder, 0), first_offset + 5 * 16 + 1);
    require_corrupt(log.options, {segment_path(log.folder, 0).string()});
}

// ---- checkpoints --------------------------------------------------------------------------------

TEST_CASE("mmap recovery: a checkpoint of the wrong length is corrupt_data", "[mmap][recovery]")
{
    standard_log log;
    SECTION("producer.offset")
    {
        write_file(log.folder / "producer.offset", {1, 2, 3, 4, 5, 6, 7});
        require_corrupt(log.options, {(log.folder / "producer.offset").string()});
    }
    SECTION("producer.offset, too long")
    {
        write_file(log.folder / "producer.offset", {0x68, 2, 0, 0, 0, 0, 0, 0, 0});
        require_corrupt(log.options, {(log.folder / "producer.offset").string()});
    }
    SECTION("earliest.offset")
    {
        write_file(log.folder / "earliest.offset", {40, 0, 0});
        require_corrupt(log.options, {(log.folder / "earliest.offset").string()});
    }
    SECTION("consumer.offset")
    {
        write_file(log.group_file("g"), {});
        require_corrupt(log.options, {log.group_file("g").string()});
    }
}

TEST_CASE("mmap recovery: a flipped bit in consumer.offset that lands on another record boundary is corrupt_data",
          "[mmap][recovery][checkpoint]")
{
    standard_log log;
    // 408 ^ 16 = 392, the boundary one record earlier: without a checksum the group would silently
    // resume there and deliver record 19 again.
    std::vector<unsigned char> bytes = file_bytes(log.group_file("g"));
    bytes[0] ^= 0x10;
    write_file(log.group_file("g"), bytes);
    require_corrupt(log.options, {log.group_file("g").string()});
}

TEST_CASE("mmap recovery: a flipped bit in producer.offset or earliest.offset that still looks valid is corrupt_data",
          "[mmap][recovery][checkpoint]")
{
    standard_log log;
    SECTION("producer.offset 616 read as 584, an earlier record boundary")
    {
        const fs::path path = log.folder / "producer.offset";
        std::vector<unsigned char> bytes = file_bytes(path);
        bytes[0] ^= 0x20;
        write_file(path, bytes);
        require_corrupt(log.options, {path.string()});
    }
    SECTION("earliest.offset 40 read as 296, the start of segment 1")
    {
        const fs::path path = log.folder / "earliest.offset";
        bq::detail::write_checkpoint(path.string(), first_offset);
        std::vector<unsigned char> bytes = file_bytes(path);
        bytes[1] ^= 0x01;
        write_file(path, bytes);
        require_corrupt(log.options, {path.string()});
    }
}

TEST_CASE("mmap recovery: a negative checkpoint is corrupt_data", "[mmap][recovery]")
{
    standard_log log;
    SECTION("producer.offset")
    {
        write_checkpoint(log.folder / "producer.offset", 0xFFFF'FFFF'FFFF'FFFFULL);
        require_corrupt(log.options, {(log.folder / "producer.offset").string()});
    }
    SECTION("consumer.offset")
    {
        write_checkpoint(log.group_file("g"), 0x8000'0000'0000'0028ULL);
        require_corrupt(log.options, {log.group_file("g").string()});
    }
    SECTION("earliest.offset")
    {
        write_checkpoint(log.folder / "earliest.offset", 0x8000'0000'0000'0028ULL);
        require_corrupt(log.options, {(log.folder / "earliest.offset").string()});
    }
}

TEST_CASE("mmap recovery: a checkpoint off a record boundary is corrupt_data", "[mmap][recovery]")
{
    standard_log log;
    SECTION("producer.offset inside a record")
    {
        write_checkpoint(log.folder / "producer.offset", log_end - 8);
        require_corrupt(log.options, {(log.folder / "producer.offset").string(), std::to_string(log_end - 8)});
    }
    SECTION("producer.offset inside a segment header")
    {
        write_checkpoint(log.folder / "producer.offset", segment + 8);
        require_corrupt(log.options, {(log.folder / "producer.offset").string()});
    }
    SECTION("consumer.offset inside a record")
    {
        write_checkpoint(log.group_file("g"), g_offset + 8);
        require_corrupt(log.options, {log.group_file("g").string(), std::to_string(g_offset + 8)});
    }
    SECTION("consumer.offset inside a segment header")
    {
        write_checkpoint(log.group_file("g"), segment + 16);
        require_corrupt(log.options, {log.group_file("g").string()});
    }
    SECTION("earliest.offset not at a segment start")
    {
        write_checkpoint(log.folder / "earliest.offset", segment + 56);
        require_corrupt(log.options, {(log.folder / "earliest.offset").string()});
    }
}

TEST_CASE("mmap recovery: a checkpoint ahead of the log is corrupt_data", "[mmap][recovery]")
{
    standard_log log;
    SECTION("producer.offset past the data of the last segment")
    {
        write_checkpoint(log.folder / "producer.offset", log_end + 16);
        require_corrupt(log.options, {(log.folder / "producer.offset").string()});
    }
    SECTION("producer.offset in a segment that does not exist")
    {
        write_checkpoint(log.folder / "producer.offset", 3 * segment + first_offset);
        require_corrupt(log.options, {(log.folder / "producer.offset").string()});
    }
    SECTION("consumer.offset past the end of the log")
    {
        write_checkpoint(log.group_file("g"), log_end + 16);
        require_corrupt(log.options, {log.group_file("g").string()});
    }
    SECTION("consumer.offset in a segment that does not exist")
    {
        write_checkpoint(log.group_file("g"), 5 * segment + first_offset);
        require_corrupt(log.options, {log.group_file("g").string()});
    }
}

TEST_CASE("mmap recovery: earliest.offset greater than producer.offset is corrupt_data and deletes nothing",
          "[mmap][recovery]")
{
    standard_log log;
    write_checkpoint(log.folder / "producer.offset", g_offset);
    write_checkpoint(log.group_file("g"), g_offset);
    write_checkpoint(log.folder / "earliest.offset", 2 * segment + first_offset);
    require_corrupt(log.options, {(log.folder / "earliest.offset").string()});
}

TEST_CASE("mmap recovery: a group checkpoint before earliest.offset is corrupt_data and deletes nothing",
          "[mmap][recovery]")
{
    standard_log log;
    write_checkpoint(log.folder / "earliest.offset", segment + first_offset);  // "h" is still at 40
    require_corrupt(log.options, {log.group_file("h").string()});
}

// ---- segments -----------------------------------------------------------------------------------

TEST_CASE("mmap recovery: a missing segment inside the retained range is corrupt_data", "[mmap][recovery]")
{
    standard_log log;
    SECTION("in the middle")
    {
        fs::remove(segment_path(log.folder, 1));
        require_corrupt(log.options, {segment_path(log.folder, 1).string()});
    }
    SECTION("the first one")
    {
        fs::remove(segment_path(log.folder, 0));
        require_corrupt(log.options, {segment_path(log.folder, 0).string()});
    }
    SECTION("the first one after earliest.offset")
    {
        write_checkpoint(log.folder / "earliest.offset", segment + first_offset);
        write_checkpoint(log.group_file("h"), segment + first_offset);
        fs::remove(segment_path(log.folder, 1));
        require_corrupt(log.options, {segment_path(log.folder, 1).string()});
    }
    SECTION("every one, while checkpoints exist")
    {
        for (std::uint64_t index = 0; index < 3; ++index) {
            fs::remove(segment_path(log.folder, index));
        }
        require_corrupt(log.options, {log.folder.string()});
    }
}

TEST_CASE("mmap recovery: a wrong-sized segment is corrupt_data", "[mmap][recovery]")
{
    standard_log log;
    const std::uintmax_t size = GENERATE(segment - 8, segment + 8, 2 * segment);
    fs::resize_file(segment_path(log.folder, 1), size);
    require_corrupt(log.options, {segment_path(log.folder, 1).string()});
}

TEST_CASE("mmap recovery: a bad segment header is corrupt_data", "[mmap][recovery]")
{
    standard_log log;
    const std::uint64_t byte = GENERATE(0, 8, 16, 24, 36);  // magic, version, index, size, CRC
    flip_byte(segment_path(log.folder, 1), byte);
    require_corrupt(log.options, {segment_path(log.folder, 1).string()});
}

// ---- groups and partitions ----------------------------------------------------------------------

TEST_CASE("mmap recovery: a group folder without consumer.offset is corrupt_data", "[mmap][recovery]")
{
    standard_log log;
    fs::create_directory(log.folder / "offsets" / "ghost");
    require_corrupt(log.options, {(log.folder / "offsets" / "ghost").string()});
}

TEST_CASE("mmap recovery: a group folder that is not a group's encoding is corrupt_data", "[mmap][recovery]")
{
    standard_log log;
    fs::create_directory(log.folder / "offsets" / "bad%zz");
    write_checkpoint(log.folder / "offsets" / "bad%zz" / "consumer.offset", first_offset);
    require_corrupt(log.options, {(log.folder / "offsets" / "bad%zz").string()});
}

TEST_CASE("mmap recovery: a partition folder beyond the stored partition count is corrupt_data", "[mmap][recovery]")
{
    // (Fewer partitions than stored are refused as invalid_argument: mmap_topic_options_test.cpp.)
    temporary_directory directory;
    {
        open_topic topic(string_topic(directory.path(), 1024, 3));
        topic.produce(numbered(0, 6));
    }
    fs::create_directory(directory.path() / "events" / "partition-00007");
    require_corrupt(string_topic(directory.path(), 1024, 3), {partition_path(directory.path(), 7).string()});
    fs::remove(directory.path() / "events" / "partition-00007");
    open_topic topic(string_topic(directory.path(), 1024, 4));  // more partitions are fine
    CHECK(topic.drain("g").size() == 6);
}

// ---- leftovers ----------------------------------------------------------------------------------

TEST_CASE("mmap recovery: leftover temporary files and group folders are removed at open", "[mmap][recovery]")
{
    standard_log log;
    write_file(log.folder / "producer.offset.tmp", {1, 2, 3});
    write_file(log.folder / "earliest.offset.tmp", {});
    write_file(log.group_file("g").string() + ".tmp", {9, 9, 9, 9, 9, 9, 9, 9});
    write_file(segment_path(log.folder, 3).string() + ".tmp", std::vector<unsigned char>(100, 7));
    fs::create_directory(log.folder / "offsets" / "new group.tmp");
    write_checkpoint(log.folder / "offsets" / "new group.tmp" / "consumer.offset", first_offset);
    fs::create_directory(log.folder / "offsets" / "empty.tmp");

    open_topic topic(log.options);
    std::vector<std::string> temporary;
    for (const auto& entry : fs::recursive_directory_iterator(log.directory.path())) {
        if (entry.path().filename().string().ends_with(".tmp")) {
            temporary.push_back(entry.path().string());
        }
    }
    CHECK(temporary == std::vector<std::string>{});
    CHECK(segment_indices(log.folder) == std::vector<std::uint64_t>{0, 1, 2});
    CHECK(topic.drain("g") == numbered(20, 10));
    CHECK(topic.drain("new group") == numbered(0, 30));  // a new group, starting at the earliest offset
}

TEST_CASE("mmap recovery: a partition folder with no segment and no checkpoint opens as a new partition",
          "[mmap][recovery]")
{
    temporary_directory directory;
    fs::create_directories(partition_path(directory.path(), 0));
    fs::create_directories(partition_path(directory.path(), 1) / "offsets");
    fs::create_directories(partition_path(directory.path(), 2) / "offsets" / "g.tmp");
    {
        open_topic topic(string_topic(directory.path(), 1024, 3));
        topic.produce(numbered(0, 6));
        auto read = topic.drain("g");
        std::sort(read.begin(), read.end());
        CHECK(read == numbered(0, 6));
    }
    for (std::size_t partition = 0; partition < 3; ++partition) {
        CHECK(segment_indices(partition_path(directory.path(), partition)) == std::vector<std::uint64_t>{0});
    }
}

// ---- segment ends -------------------------------------------------------------------------------

TEST_CASE("mmap recovery: a group that committed the end of a segment before its rollover resumes in the next",
          "[mmap][recovery]")
{
    temporary_directory directory;
    const auto options = string_topic(directory.path(), 256);
    const fs::path folder = partition_path(directory.path());
    {
        open_topic topic(options);
        topic.produce(numbered(0, 13));  // fills segment 0's record area, no marker yet
        CHECK(topic.drain("g") == numbered(0, 13));
        topic.produce(numbered(13, 2));  // ends segment 0 with a marker where "g" stands
        REQUIRE(segment_indices(folder) == std::vector<std::uint64_t>{0, 1});
    }
    REQUIRE(checkpoint(folder / "offsets" / "g" / "consumer.offset") == first_offset + 13 * 16);
    open_topic topic(options);
    CHECK(topic.drain("g") == numbered(13, 2));
}

TEST_CASE("mmap recovery: a last segment ended by a marker reopens without creating the next one", "[mmap][recovery]")
{
    temporary_directory directory;
    const auto options = string_topic(directory.path(), 256);
    const fs::path folder = partition_path(directory.path());
    {
        open_topic topic(options);
        topic.produce(numbered(0, 14));
    }
    // The process stopped after ending segment 0, before segment 1 was created.
    fs::remove(segment_path(folder, 1));
    write_checkpoint(folder / "producer.offset", first_offset + 13 * 16);
    forget_flush_mark(folder);
    const auto before = snapshot(directory.path());
    {
        open_topic topic(options);
        CHECK(topic.drain("g") == numbered(0, 13));
        const auto after = snapshot(directory.path());
        CHECK(after.at("events/partition-00000/00000000000000000000.log") ==
              before.at("events/partition-00000/00000000000000000000.log"));
        CHECK(segment_indices(folder) == std::vector<std::uint64_t>{0});
        topic.produce({"after"});
        CHECK(segment_indices(folder) == std::vector<std::uint64_t>{0, 1});
        CHECK(topic.drain("g") == std::vector<std::string>{"after"});
    }
    open_topic topic(options);
    auto expected = numbered(0, 13);
    expected.push_back("after");
    CHECK(topic.drain("fresh") == expected);
}

TEST_CASE("mmap recovery: a segment-end marker stays final even when a smaller record would fit after reopen",
          "[mmap][recovery]")
{
    temporary_directory directory;
    const auto options = string_topic(directory.path(), 256);
    const fs::path folder = partition_path(directory.path());
    const std::string large(100, 'L');
    {
        open_topic topic(options);
        topic.produce(numbered(0, 10));  // segment 0 holds records up to byte 200
        topic.produce({large});          // does not fit: a marker at 200, then segment 1
    }
    fs::remove(segment_path(folder, 1));
    write_checkpoint(folder / "producer.offset", first_offset + 10 * 16);
    forget_flush_mark(folder);
    {
        open_topic topic(options);
        topic.produce({"small"});  // would fit at byte 200 of segment 0
        CHECK(segment_indices(folder) == std::vector<std::uint64_t>{0, 1});
    }
    const std::vector<unsigned char> marker = {0xFF, 0xFF, 0xFF, 0xFF, 0x26, 0x3D, 0x8C, 0x14};
    const std::vector<unsigned char> bytes = file_bytes(segment_path(folder, 0));
    CHECK(std::vector<unsigned char>(bytes.begin() + 200, bytes.begin() + 208) == marker);
    open_topic topic(options);
    auto expected = numbered(0, 10);
    expected.push_back("small");
    CHECK(topic.drain("g") == expected);
}

}  // namespace

}  // namespace mmap_recovery_test
