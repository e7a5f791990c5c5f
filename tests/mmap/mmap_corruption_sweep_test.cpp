// Corruption sweeps over a small persistent topic: a bit flipped at every byte position of every
// segment and checkpoint file, and every wrong size of each segment file. Each damaged folder must
// open to a correct prefix of what was produced or fail with a clear corrupt_data error naming the
// damaged file - never a crash, a hang or a wrong item - and a folder that opened once opens to the
// same records again (nothing cut off comes back).
#include "bufferqueue/mmap/mmap_topic.hpp"

#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/segment_format.hpp"

#include "catch.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/io_context.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace mmap_corruption_sweep_test {

namespace {

using bufferqueue::test::commit_now;
using bufferqueue::test::memory_backed_temporary_path;
using bufferqueue::test::string_bytes_serializer;
using bufferqueue::test::temporary_directory;

namespace bq = bufferqueue;
namespace detail = bufferqueue::detail;
namespace fs = std::filesystem;

using file_bytes = std::vector<char>;

constexpr std::uint64_t segment_size = 256;  // 13 records of 8-byte payloads, then the end marker
constexpr std::size_t produced_count = 20;   // segment 0 full, 7 records in segment 1
constexpr std::size_t committed_count = 10;  // group "g" committed the first 10
constexpr std::uint64_t first_offset = detail::segment_header_size;
constexpr std::uint64_t record_bytes = 16;

std::string item(std::size_t index)
{
    std::string text = std::to_string(index);
    return "item-" + std::string(3 - text.size(), '0') + text;  // 8 bytes
}

file_bytes read_file(const fs::path& path)
{
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const fs::path& path, const file_bytes& bytes)
{
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(out);
}

bq::mmap_topic_options<std::string> topic_options(const fs::path& directory)
{
    return {.name = "events",
            .partitions = 1,
            .data_directory = directory,
            .segment_size = segment_size,
            .serializer = string_bytes_serializer{}};
}

// The partition's files after producing 20 records and committing 10. producer.offset is set back
// to the start of segment 1 - where the rollover's hint leaves it before a crash - and flush.mark is
// removed (a power loss before its writeback), so segment 1's records are an unvouched tail;
// earliest.offset names segment 0 explicitly.
struct pristine_topic {
    temporary_directory directory{"bufferqueue-sweep", memory_backed_temporary_path()};
    fs::path partition = directory.path() / "events" / "partition-00000";
    std::map<std::string, file_bytes> files;  // name relative to the partition folder -> contents

    pristine_topic()
    {
        {
            boost::asio::io_context io;
            bq::buffer_queue queue(io.get_executor());
            queue.add_topic(topic_options(directory.path()));
            auto producer = queue.producer<std::string>("events");
            auto consumer = queue.create_pull_consumer<std::string>(
                {.topic = "events", .group = "g", .batch_size = committed_count});
            for (std::size_t i = 0; i < produced_count; ++i) {
                REQUIRE(producer.try_produce(item(i)));
            }
            REQUIRE(consumer.try_consume()->size() == committed_count);
            REQUIRE_FALSE(commit_now(consumer, io));
        }
        detail::write_checkpoint((partition / "producer.offset").string(), segment_size + first_offset);
        detail::write_checkpoint((partition / "earliest.offset").string(), first_offset);
        REQUIRE(fs::remove(partition / "flush.mark"));
        for (const auto& entry : fs::recursive_directory_iterator(partition)) {
            if (entry.is_regular_file()) {
                files.emplace(fs::relative(entry.path(), partition).string(), read_file(entry.path()));
            }
        }
        REQUIRE(files.count("00000000000000000000.log") == 1);
        REQUIRE(files.count("00000000000000000001.log") == 1);
        REQUIRE(files.count("offsets/g/consumer.offset") == 1);
    }

    void restore(const std::string& changed, const file_bytes& contents) const
    {
        fs::remove_all(partition);
        for (const auto& [name, bytes] : files) {
            fs::create_directories((partition / name).parent_path());
            write_file(partition / name, name == changed ? contents : bytes);
        }
    }
};

struct outcome {
    std::vector<std::string> fresh;    // read by a new group from the earliest offset
    std::vector<std::string> resumed;  // read by group "g"
    std::optional<bq::error> failure;
};

outcome open_topic(const fs::path& directory, const std::string& fresh_group)
{
    outcome result;
    try {
        boost::asio::io_context io;
        bq::buffer_queue queue(io.get_executor());
        queue.add_topic(topic_options(directory));
        auto fresh = queue.create_pull_consumer<std::string>({.topic = "events", .group = fresh_group});
        auto resumed = queue.create_pull_consumer<std::string>({.topic = "events", .group = "g", .batch_size = 1000});
        // Bounded: a reader that keeps delivering more than was ever produced fails instead of hanging.
        while (auto batch = fresh.try_consume()) {
            result.fresh.insert(result.fresh.end(), batch->begin(), batch->end());
            REQUIRE(result.fresh.size() <= produced_count);
            REQUIRE_FALSE(commit_now(fresh, io));
        }
        // One batch holds everything "g" can read; not committed, so the next open of the same
        // folder resumes "g" at the same place.
        if (auto batch = resumed.try_consume()) {
            result.resumed.assign(batch->begin(), batch->end());
        }
    } catch (const bq::error& failure) {
        result.failure = failure;
    }
    return result;
}

std::vector<std::string> items(std::size_t first, std::size_t end)
{
    std::vector<std::string> result;
    for (std::size_t i = first; i < end; ++i) {
        result.push_back(item(i));
    }
    return result;
}

// The index of the record whose bytes hold byte `position` of segment `segment`, or nullopt for a
// byte outside every record (header, marker, unused space).
std::optional<std::size_t> record_at(std::size_t segment, std::uint64_t position)
{
    if (position < first_offset) {
        return std::nullopt;
    }
    const std::size_t index = (position - first_offset) / record_bytes;
    const std::size_t per_segment = 13;
    const std::size_t records = segment == 0 ? per_segment : produced_count - per_segment;
    if (index >= records) {
        return std::nullopt;
    }
    return segment * per_segment + index;
}

}  // namespace

TEST_CASE("mmap corruption sweep: a bit flipped at any byte of a segment or checkpoint opens to a correct prefix or "
          "fails naming the file",
          "[mmap][corruption]")
{
    const pristine_topic topic;
    const outcome clean = open_topic(topic.directory.path(), "clean");
    REQUIRE_FALSE(clean.failure);
    REQUIRE(clean.fresh == items(0, produced_count));
    REQUIRE(clean.resumed == items(committed_count, produced_count));

    std::size_t flips = 0;
    std::size_t rejected = 0;
    std::size_t cut = 0;
    std::size_t undetectable = 0;
    for (const auto& [name, pristine] : topic.files) {
        if (name == ".lock") {
            continue;
        }
        const std::optional<std::uint64_t> segment = detail::parse_segment_file_name(name);
        for (std::size_t position = 0; position < pristine.size(); ++position) {
            for (const unsigned char mask : {0x01, 0x80}) {
                file_bytes damaged = pristine;
                damaged[position] = static_cast<char>(damaged[position] ^ mask);
                topic.restore(name, damaged);
                const outcome opened = open_topic(topic.directory.path(), "fresh");
                ++flips;
                INFO(name << ": byte " << position << " ^ " << int{mask});
                if (opened.failure) {
                    ++rejected;
                    CHECK(opened.failure->code() == bq::errc::corrupt_data);
                    CHECK(std::string(opened.failure->what()).find(name) != std::string::npos);
                    continue;
                }
                if (segment) {
                    // Only the unvouched tail (segment 1) may be cut, exactly at the damaged record.
                    const std::optional<std::size_t> record = record_at(*segment, position);
                    const std::size_t end = record ? *record : produced_count;
                    CHECK(*segment == 1);
                    CHECK(opened.fresh == items(0, end));
                    CHECK(opened.resumed == items(committed_count, end));
                    cut += end < produced_count ? 1 : 0;
                    // Opened once, the folder opens to the same records again: nothing cut comes back.
                    const outcome again = open_topic(topic.directory.path(), "again");
                    REQUIRE_FALSE(again.failure);
                    CHECK(again.fresh == opened.fresh);
                    continue;
                }
                // Checkpoints carry a CRC-32C (format version 2), so no flip of one may pass the
                // checks: a group resuming elsewhere would silently skip or repeat records.
                CHECK(opened.fresh == items(0, produced_count));
                CHECK(opened.resumed == items(committed_count, produced_count));
                undetectable += opened.resumed != items(committed_count, produced_count) ? 1 : 0;
            }
        }
    }
    CHECK(flips > 1000);
    WARN("corruption sweep: " << flips << " single-bit flips over " << topic.files.size() << " files: " << rejected
                              << " rejected as corrupt_data naming the file, " << cut << " cut at the damaged record, "
                              << undetectable << " checkpoint flips that moved a group");
}

TEST_CASE("mmap corruption sweep: every wrong size of a segment file is corrupt_data naming it", "[mmap][corruption]")
{
    const pristine_topic topic;
    std::size_t sizes = 0;
    for (const std::string name : {"00000000000000000000.log", "00000000000000000001.log"}) {
        const file_bytes& pristine = topic.files.at(name);
        for (std::size_t size = 0; size <= segment_size + 2 * record_bytes; ++size) {
            if (size == segment_size) {
                continue;
            }
            file_bytes resized = pristine;
            resized.resize(size, '\0');
            topic.restore(name, resized);
            const outcome opened = open_topic(topic.directory.path(), "fresh");
            ++sizes;
            INFO(name << " resized to " << size << " bytes");
            REQUIRE(opened.failure);
            CHECK(opened.failure->code() == bq::errc::corrupt_data);
            CHECK(std::string(opened.failure->what()).find(name) != std::string::npos);
            // A failed open changes nothing: the file keeps its wrong size for inspection.
            CHECK(fs::file_size(topic.partition / name) == size);
        }
    }
    CHECK(sizes == 2 * (segment_size + 2 * record_bytes));
}

}  // namespace mmap_corruption_sweep_test
