// What recovery knows was flushed: a damaged record inside flushed data is reported, never cut as
// a torn tail (flush watermarks); a recovered tail is flushed before a checkpoint vouches for it;
// a group standing at a segment-end marker does not report data it cannot pull; a failed open of
// a multi-partition topic changes no file of any partition.
//
// A crash with the page cache intact (SIGKILL) is simulated by copying the topic folder while the
// topic is open: the copy holds what the page cache held, as a killed process leaves it.
#include "bufferqueue/mmap/mmap_topic.hpp"

#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/mmap_partition.hpp"

#include "catch.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace mmap_flushed_data_test {

namespace {

using bufferqueue::test::file_bytes;
using bufferqueue::test::memory_backed_temporary_path;
using bufferqueue::test::string_bytes_serializer;
using bufferqueue::test::temporary_directory;
using bufferqueue::test::write_file;

namespace bq = bufferqueue;
namespace detail = bufferqueue::detail;
namespace fs = std::filesystem;
using bq::errc;

using byte_vector = std::vector<unsigned char>;

// Every file (with its bytes) and folder under `root`, by relative path.
std::map<std::string, byte_vector> snapshot(const fs::path& root)
{
    std::map<std::string, byte_vector> entries;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
        const std::string name = fs::relative(entry.path(), root).string();
        entries[name] = entry.is_regular_file() ? file_bytes(entry.path()) : byte_vector{'/'};
    }
    return entries;
}

std::string item_name(std::size_t index)
{
    std::string text = std::to_string(index);
    return "item-" + std::string(8 - text.size(), '0') + text;
}

fs::path partition_folder(const fs::path& data, std::size_t partition = 0)
{
    std::string number = std::to_string(partition);
    return data / "events" / ("partition-" + std::string(5 - number.size(), '0') + number);
}

fs::path segment_file(const fs::path& data, std::uint64_t index, std::size_t partition = 0)
{
    return partition_folder(data, partition) / detail::segment_file_name(index);
}

// The byte position of the first occurrence of `text` in `bytes` (REQUIREs one).
std::uint64_t find_text(const byte_vector& bytes, const std::string& text)
{
    const auto found = std::search(bytes.begin(), bytes.end(), text.begin(), text.end());
    REQUIRE(found != bytes.end());
    return static_cast<std::uint64_t>(found - bytes.begin());
}

bq::mmap_topic_options<std::string> string_topic(const fs::path& data, bq::flush_strategy flush,
                                                 std::size_t batch = 100, std::uint64_t segment_size = 1 << 20,
                                                 std::size_t partitions = 1)
{
    return {.name = "events",
            .partitions = partitions,
            .data_directory = data,
            .segment_size = segment_size,
            .flush = flush,
            .flush_batch_size = batch,
            .serializer = string_bytes_serializer{}};
}

// Opens a copy of the crash image and reads everything a new group can read.
std::vector<std::string> read_all(const bq::mmap_topic_options<std::string>& options)
{
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(options);
    auto consumer = queue.create_pull_consumer<std::string>({.topic = "events", .group = "reader", .batch_size = 500});
    std::vector<std::string> items;
    while (auto batch = consumer.try_consume()) {
        items.insert(items.end(), batch->begin(), batch->end());
        REQUIRE_FALSE(bq::test::commit_now(consumer, io));
    }
    return items;
}

// Produces `count` records one produce call each (every call acknowledged before the next), then
// copies the open topic's folder to `image` (a crash with the page cache intact).
void produce_and_crash(const bq::mmap_topic_options<std::string>& options, std::size_t count, const fs::path& image)
{
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(options);
    auto producer = queue.producer<std::string>("events");
    for (std::size_t i = 0; i < count; ++i) {
        REQUIRE(producer.try_produce(item_name(i)));
    }
    fs::copy(options.data_directory, image, fs::copy_options::recursive);
}

}  // namespace

// ---- item 1: a damaged acknowledged record is corrupt_data, not a torn tail ---------------------

TEST_CASE("mmap recovery: after a crash, a damaged record that was acknowledged as flushed is corrupt_data naming "
          "the file and offset, and the open changes no file",
          "[mmap][recovery]")
{
    const temporary_directory directory("bufferqueue-flushed", memory_backed_temporary_path());
    const fs::path source = directory.path() / "source";
    const fs::path image = directory.path() / "image";
    bq::flush_strategy flush = bq::flush_strategy::immediate;
    SECTION("flush immediate")
    {
        flush = bq::flush_strategy::immediate;
    }
    SECTION("flush batch of 100")
    {
        flush = bq::flush_strategy::batch;
    }
    produce_and_crash(string_topic(source, flush), 3000, image);

    const fs::path log = segment_file(image, 0);
    byte_vector bytes = file_bytes(log);
    const std::uint64_t damaged = find_text(bytes, item_name(1000)) + 3;  // a payload byte of record 1,000
    bytes[damaged] ^= 0x20;
    write_file(log, bytes);
    const auto before = snapshot(image);
    const auto failure = bq::test::error_from([&] { read_all(string_topic(image, flush)); });
    REQUIRE(failure);
    INFO(failure->what());
    CHECK(failure->code() == errc::corrupt_data);
    CHECK(bq::test::missing_from(failure->what(), {log.string(), "byte " + std::to_string(damaged - 8 - 3)}) == "");
    CHECK(snapshot(image) == before);
}

TEST_CASE("mmap recovery: after a crash, a damaged record that was not flushed yet is cut as a torn tail",
          "[mmap][recovery]")
{
    const temporary_directory directory("bufferqueue-flushed", memory_backed_temporary_path());
    const fs::path source = directory.path() / "source";
    const fs::path image = directory.path() / "image";
    // Batches of 100: records 3,000 to 3,049 were acknowledged, but never flushed.
    produce_and_crash(string_topic(source, bq::flush_strategy::batch), 3050, image);

    const fs::path log = segment_file(image, 0);
    byte_vector bytes = file_bytes(log);
    bytes[find_text(bytes, item_name(3020)) + 3] ^= 0x20;
    write_file(log, bytes);
    const std::vector<std::string> items = read_all(string_topic(image, bq::flush_strategy::batch));
    REQUIRE(items.size() == 3020);
    CHECK(items.back() == item_name(3019));
}

// ---- item 2: a recovered tail is flushed before anything vouches for it ------------------------

TEST_CASE("mmap recovery: records recovered past what was flushed are msynced before a checkpoint covers them",
          "[mmap][recovery]")
{
    const temporary_directory directory("bufferqueue-flushed", memory_backed_temporary_path());
    const fs::path source = directory.path() / "source";
    const fs::path image = directory.path() / "image";
    // Ten records, never flushed (the batch holds 100), in the page cache at the crash.
    produce_and_crash(string_topic(source, bq::flush_strategy::batch), 10, image);
    const fs::path log = segment_file(image, 0);
    const std::uint64_t tail_end = find_text(file_bytes(log), item_name(9)) + item_name(9).size();

    struct event {
        detail::file_operation operation;
        std::string path;
        std::uint64_t offset = 0;
        std::uint64_t length = 0;
    };
    std::mutex mutex;
    std::vector<event> events;
    const detail::scoped_file_hooks hooks(detail::file_hooks{
        .before_operation =
            [&](detail::file_operation operation, const std::string& path) {
                if (operation == detail::file_operation::rename) {
                    std::lock_guard lock(mutex);
                    events.push_back({operation, path});
                }
                return 0;
            },
        .after_flush =
            [&](detail::file_operation operation, const std::string& path, std::uint64_t offset, std::uint64_t length) {
                std::lock_guard lock(mutex);
                events.push_back({operation, path, offset, length});
            }});
    CHECK(read_all(string_topic(image, bq::flush_strategy::batch)).size() == 10);

    // The first checkpoint that covers the recovered records (producer.offset, or the group's
    // consumer.offset after its first commit) comes after an msync of the segment over them.
    bool synced = false;
    bool checked = false;
    for (const event& each : events) {
        if (each.operation == detail::file_operation::msync && each.path == log.string() && each.offset <= 40 &&
            each.offset + each.length >= tail_end) {
            synced = true;
        }
        if (each.operation == detail::file_operation::rename) {
            // (The group's folder appears first, renamed as a whole with its checkpoint at offset
            // 40, which covers nothing; its commits rename consumer.offset itself.)
            const bool group_creation = each.path.find(".tmp/") != std::string::npos;
            if (each.path.ends_with("/producer.offset") ||
                (each.path.ends_with("/consumer.offset") && !group_creation)) {
                INFO("checkpoint written: " << each.path);
                CHECK(synced);
                checked = true;
                break;
            }
        }
    }
    CHECK(checked);
}

// ---- item 15: a group at a segment-end marker with an empty next segment ------------------------

namespace {

// A topic of 256-byte segments whose group "g" committed the end of segment 0's records before the
// writer ended it, and whose segment 1 holds no record yet: the state a crash right after a
// rollover leaves (the record written into segment 1 never reached the page cache).
void build_marker_state(const fs::path& data)
{
    const bq::mmap_topic_options<std::string> options = string_topic(data, bq::flush_strategy::immediate, 100, 256);
    const fs::path image = data.parent_path() / "image";
    {
        boost::asio::io_context io;
        bq::buffer_queue queue(io.get_executor());
        queue.add_topic(options);
        auto producer = queue.producer<std::string>("events");
        auto consumer = queue.create_pull_consumer<std::string>({.topic = "events", .group = "g"});
        // Records, each consumed and committed, until one rolls over into segment 1: that one stays
        // unread, so the group stands at the end of segment 0's records, where the marker went.
        for (std::size_t i = 0; !fs::exists(segment_file(data, 1)); ++i) {
            REQUIRE(i < 100);
            REQUIRE(producer.try_produce(item_name(i)));
            if (!fs::exists(segment_file(data, 1))) {
                REQUIRE(consumer.try_consume());
                REQUIRE_FALSE(bq::test::commit_now(consumer, io));
            }
        }
        fs::copy(data, image, fs::copy_options::recursive);
    }
    // The crash image lost the record in segment 1, and the flush mark is the one the rollover
    // left: everything before the marker, where the group stands, was flushed.
    fs::remove_all(data);
    fs::rename(image, data);
    byte_vector bytes = file_bytes(segment_file(data, 1));
    std::fill(bytes.begin() + 40, bytes.end(), 0);
    write_file(segment_file(data, 1), bytes);
    const std::optional<std::uint64_t> group_checkpoint =
        detail::read_checkpoint((partition_folder(data) / "offsets" / "g" / "consumer.offset").string());
    REQUIRE(group_checkpoint);
    const std::uint64_t marker = *group_checkpoint;
    REQUIRE(marker < 256);  // in segment 0
    const auto mark = detail::make_flush_mark(marker);
    byte_vector mark_bytes;
    for (const std::byte each : mark) {
        mark_bytes.push_back(std::to_integer<unsigned char>(each));
    }
    write_file(partition_folder(data) / "flush.mark", mark_bytes);
}

}  // namespace

TEST_CASE("mmap recovery: a group at a segment-end marker whose next segment holds no record reports no data",
          "[mmap][recovery][consumer]")
{
    const temporary_directory directory("bufferqueue-flushed", memory_backed_temporary_path());
    const fs::path data = directory.path() / "data";
    build_marker_state(data);

    detail::mmap_partition<std::string> partition({.topic = "events",
                                                   .partition = 0,
                                                   .folder = partition_folder(data).string(),
                                                   .segment_size = 256,
                                                   .serializer = string_bytes_serializer{}});
    auto& cursor = partition.open_cursor("g");
    // has_data promises that pull returns something: a waiting consumer that trusts it would pull
    // again and again.
    const auto pulled = partition.pull(cursor, 10);
    CHECK(pulled.items.empty());
    CHECK_FALSE(partition.has_data(cursor));
}

TEST_CASE("mmap recovery: a waiting consume of a group at a segment-end marker parks until a record arrives",
          "[mmap][recovery][consumer]")
{
    const temporary_directory directory("bufferqueue-flushed", memory_backed_temporary_path());
    const fs::path data = directory.path() / "data";
    build_marker_state(data);

    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(string_topic(data, bq::flush_strategy::immediate, 100, 256));
    auto consumer = queue.create_pull_consumer<std::string>({.topic = "events", .group = "g"});
    std::optional<std::vector<std::string>> delivered;
    consumer.consume([&](boost::system::error_code error, bq::batch<std::string> batch) {
        REQUIRE_FALSE(error);
        delivered.emplace(batch.begin(), batch.end());
    });
    io.poll();
    io.restart();
    CHECK_FALSE(delivered);  // parked (a spinning consume would never return from poll)
    auto producer = queue.producer<std::string>("events");
    REQUIRE(producer.try_produce(std::string("after")));
    while (!delivered) {
        io.run_one();
    }
    CHECK(*delivered == std::vector<std::string>{"after"});
}

// ---- item 17: a failed open of a multi-partition topic changes no file --------------------------

TEST_CASE("mmap recovery: a failed open of a multi-partition topic leaves every partition's files byte-identical",
          "[mmap][recovery]")
{
    const temporary_directory directory("bufferqueue-flushed", memory_backed_temporary_path());
    const fs::path data = directory.path() / "data";
    const auto options = string_topic(data, bq::flush_strategy::immediate, 100, 4096, 2);
    {
        boost::asio::io_context io;
        bq::buffer_queue queue(io.get_executor());
        queue.add_topic(options);
        auto producer = queue.producer<std::string>("events");
        for (std::size_t i = 0; i < 8; ++i) {
            REQUIRE(producer.try_produce(item_name(i)));
        }
        auto consumer = queue.create_pull_consumer<std::string>({.topic = "events", .group = "g"});
    }
    // Partition 0 (items 0, 2, 4, 6): torn bytes past the end of its log (recovery zeroes them) and
    // the leftover temporary file of an interrupted checkpoint write (recovery removes it).
    const fs::path log0 = segment_file(data, 0, 0);
    byte_vector bytes = file_bytes(log0);
    const std::uint64_t torn = (find_text(bytes, item_name(6)) + 64) / 8 * 8;
    std::fill(bytes.begin() + static_cast<std::ptrdiff_t>(torn), bytes.begin() + static_cast<std::ptrdiff_t>(torn + 13),
              0xA5);
    write_file(log0, bytes);
    write_file(partition_folder(data, 0) / "producer.offset.tmp", byte_vector(8, 1));
    // Partition 1: a damaged segment header, so its open fails.
    const fs::path log1 = segment_file(data, 0, 1);
    bytes = file_bytes(log1);
    bytes[20] ^= 0x01;
    write_file(log1, bytes);

    const auto before = snapshot(data);
    const auto failure = bq::test::error_from([&] { read_all(options); });
    REQUIRE(failure);
    CHECK(failure->code() == errc::corrupt_data);
    CHECK(std::string(failure->what()).find(log1.string()) != std::string::npos);
    const auto after = snapshot(data);
    for (const auto& [name, contents] : before) {
        INFO(name);
        CHECK(after.contains(name));
        CHECK((after.contains(name) && after.at(name) == contents));
    }
    CHECK(after.size() == before.size());
}

}  // namespace mmap_flushed_data_test
