#include "bufferqueue/mmap/mmap_topic.hpp"

#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/memory/memory_topic.hpp"
#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/partition_key.hpp"
#include "bufferqueue/serialization/serializer.hpp"

#include "catch.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/io_context.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace mmap_topic_test {

namespace {

using bufferqueue::test::commit_now;
using bufferqueue::test::file_bytes;
using bufferqueue::test::produce_now;
using bufferqueue::test::queue_runner;
using bufferqueue::test::segment_indices;
using bufferqueue::test::segment_path;
using bufferqueue::test::string_bytes_serializer;
using bufferqueue::test::temporary_directory;
using bufferqueue::test::write_file;

namespace bq = bufferqueue;
namespace fs = std::filesystem;
using bq::errc;

// ---- helpers ------------------------------------------------------------------------------------

struct order {
    std::int64_t id = 0;
    std::string name;
    MSGPACK_DEFINE(id, name)
    bool operator==(const order&) const = default;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(order, id, name)

// No JSON support: usable only with an explicit serializer.
struct point {
    std::int32_t x = 0;
    double y = 0;
    bool operator==(const point&) const = default;
};

// No JSON support either, but MessagePack support.
struct packed_only {
    std::int32_t value = 0;
    std::string text;
    MSGPACK_DEFINE(value, text)
    bool operator==(const packed_only&) const = default;
};

// The record size of a payload of `length` bytes: 8-byte header plus payload, rounded up to 8.
constexpr std::uint64_t record_bytes(std::uint64_t length)
{
    return (8 + length + 7) / 8 * 8;
}
constexpr std::uint64_t first_offset = 40;

bq::mmap_topic_options<std::string> string_topic(const fs::path& directory, std::size_t partitions = 1,
                                                 std::uint64_t segment_size = 4096)
{
    return {.name = "events",
            .partitions = partitions,
            .data_directory = directory,
            .segment_size = segment_size,
            .serializer = string_bytes_serializer{}};
}

bq::pull_consumer_options group_options(const std::string& group, std::size_t batch_size = 100,
                                        bool auto_commit = false)
{
    return {.topic = "events", .group = group, .auto_commit = auto_commit, .batch_size = batch_size};
}

// Consumes and commits until nothing is readable; returns the items in delivery order.
template <class T>
std::vector<T> drain(bq::pull_consumer<T>& consumer, boost::asio::io_context& io)
{
    std::vector<T> items;
    while (auto delivered = consumer.try_consume()) {
        items.insert(items.end(), delivered->begin(), delivered->end());
        REQUIRE_FALSE(commit_now(consumer, io));
    }
    return items;
}

// Like `drain`, but keeps each partition's items apart.
template <class T>
std::map<std::size_t, std::vector<T>> drain_by_partition(bq::pull_consumer<T>& consumer, boost::asio::io_context& io)
{
    std::map<std::size_t, std::vector<T>> items;
    while (auto delivered = consumer.try_consume()) {
        auto& partition = items[delivered->partition()];
        partition.insert(partition.end(), delivered->begin(), delivered->end());
        REQUIRE_FALSE(commit_now(consumer, io));
    }
    return items;
}

std::uint64_t checkpoint(const fs::path& path)
{
    const std::vector<unsigned char> bytes = file_bytes(path);
    REQUIRE(bytes.size() == 16);  // checkpoint format version 2: value, version, CRC-32C
    std::uint64_t value = 0;
    for (int i = 7; i >= 0; --i) {
        value = (value << 8) | bytes[static_cast<std::size_t>(i)];
    }
    return value;
}

fs::path partition_path(const fs::path& directory, std::size_t partition, const std::string& topic = "events")
{
    std::string number = std::to_string(partition);
    number.insert(0, 5 - number.size(), '0');
    return directory / topic / ("partition-" + number);
}

std::vector<std::uint64_t> range(std::uint64_t first, std::uint64_t last)
{
    std::vector<std::uint64_t> values;
    for (std::uint64_t value = first; value <= last; ++value) {
        values.push_back(value);
    }
    return values;
}

std::vector<std::string> numbered(std::size_t first, std::size_t count, std::size_t width = 8)
{
    std::vector<std::string> items;
    for (std::size_t i = first; i < first + count; ++i) {
        std::string text = std::to_string(i);
        text.insert(0, width - text.size(), '0');
        items.push_back(text);
    }
    return items;
}

// One produce call (one flush) for the whole list; round-robin still advances once per item.
void produce_all(bq::producer<std::string>& producer, const std::vector<std::string>& items)
{
    REQUIRE(producer.try_produce(std::span<const std::string>(items)));
}

bool contains(const std::vector<unsigned char>& haystack, const std::string& needle)
{
    return std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end()) != haystack.end();
}

// 8-byte payloads make 16-byte records: with 256-byte segments, 13 records fill a segment's record area.
constexpr std::uint64_t small_segment = 256;
constexpr std::size_t records_per_small_segment = 13;

// ---- layout -------------------------------------------------------------------------------------

TEST_CASE("mmap topic: files are laid out per topic, partition and escaped group", "[mmap]")
{
    temporary_directory directory;
    queue_runner runner;
    runner->add_topic(string_topic(directory.path(), 3));
    auto producer = runner->producer<std::string>("events");
    auto workers = runner->create_pull_consumer<std::string>(group_options("orders/worker 1"));
    auto dot = runner->create_pull_consumer<std::string>(group_options("."));
    auto dot_dot = runner->create_pull_consumer<std::string>(group_options(".."));
    produce_all(producer, {"hello", "hello", "hello"});  // round-robin: one per partition
    REQUIRE(drain(workers, runner.io).size() == 3);

    const fs::path topic = directory.path() / "events";
    CHECK(fs::is_regular_file(topic / ".lock"));
    for (std::size_t partition = 0; partition < 3; ++partition) {
        const fs::path folder = partition_path(directory.path(), partition);
        INFO(folder);
        REQUIRE(fs::is_directory(folder));
        CHECK(fs::file_size(folder / "00000000000000000000.log") == 4096);
        CHECK(segment_indices(folder) == std::vector<std::uint64_t>{0});
        // "hello" is a 5-byte payload: one 16-byte record after the 40-byte header ends at 56.
        // (Checkpoint bytes: checkpoint format version 2, see file_test.cpp.)
        CHECK(checkpoint(folder / "producer.offset") == 56);
        CHECK(checkpoint(folder / "offsets" / "orders%2Fworker 1" / "consumer.offset") == 56);
        CHECK(checkpoint(folder / "offsets" / "%2E" / "consumer.offset") == first_offset);
        CHECK(checkpoint(folder / "offsets" / "%2E%2E" / "consumer.offset") == first_offset);
        CHECK_FALSE(fs::exists(folder / "earliest.offset"));
        std::set<std::string> groups;
        for (const auto& entry : fs::directory_iterator(folder / "offsets")) {
            groups.insert(entry.path().filename().string());
        }
        CHECK(groups == std::set<std::string>{"orders%2Fworker 1", "%2E", "%2E%2E"});
    }
    CHECK_FALSE(fs::exists(topic / "partition-00003"));
}

TEST_CASE("mmap topic: a partition folder number has five digits", "[mmap]")
{
    CHECK(bq::detail::partition_folder("/data/t", 7) == "/data/t/partition-00007");
    CHECK(bq::detail::partition_folder("/data/t", 12345) == "/data/t/partition-12345");
}

// ---- persistence --------------------------------------------------------------------------------

TEST_CASE("mmap topic: records survive closing the queue and come back in per-partition order", "[mmap]")
{
    temporary_directory directory;
    queue_runner runner;
    auto options = bq::mmap_topic_options<order>{.name = "events",
                                                 .partitions = 3,
                                                 .data_directory = directory.path(),
                                                 .segment_size = 1024,
                                                 .partition_key = [](const order& item) { return item.id; }};
    std::vector<order> produced;
    for (std::int64_t id = 1; id <= 30; ++id) {
        produced.push_back({id, "order-" + std::to_string(id)});
    }
    {
        runner->add_topic(options);
        auto producer = runner->producer<order>("events");
        REQUIRE(producer.try_produce(std::span<const order>(produced).first(10)));
        for (std::size_t i = 10; i < produced.size(); ++i) {
            REQUIRE(producer.try_produce(produced[i]));
        }
    }
    runner.reopen().add_topic(options);
    auto consumer = runner->create_pull_consumer<order>(group_options("readers", 4));
    const auto by_partition = drain_by_partition(consumer, runner.io);

    std::map<std::size_t, std::vector<order>> expected;
    for (const order& item : produced) {
        expected[bq::partition_for_key(item.id, 3)].push_back(item);
    }
    CHECK(by_partition == expected);
}

TEST_CASE("mmap topic: an uncommitted batch is delivered again after reopen", "[mmap]")
{
    temporary_directory directory;
    queue_runner runner;
    const auto items = numbered(0, 6);
    {
        runner->add_topic(string_topic(directory.path()));
        auto producer = runner->producer<std::string>("events");
        produce_all(producer, items);
        auto consumer = runner->create_pull_consumer<std::string>(group_options("g", 4));
        const auto first = consumer.try_consume();
        REQUIRE(first);
        CHECK(std::vector<std::string>(first->begin(), first->end()) == numbered(0, 4));
    }
    runner.reopen().add_topic(string_topic(directory.path()));
    auto consumer = runner->create_pull_consumer<std::string>(group_options("g", 4));
    const auto again = consumer.try_consume();
    REQUIRE(again);
    CHECK(std::vector<std::string>(again->begin(), again->end()) == numbered(0, 4));
}

TEST_CASE("mmap topic: a batch reports each item's record position, ascending, and the next batch's come after them",
          "[mmap]")
{
    temporary_directory directory;
    queue_runner runner;
    runner->add_topic(string_topic(directory.path()));
    auto producer = runner->producer<std::string>("events");
    produce_all(producer, numbered(0, 6));
    auto consumer = runner->create_pull_consumer<std::string>(group_options("g", 4));
    const auto first = consumer.try_consume();
    REQUIRE(first);
    const std::vector<std::uint64_t> offsets(first->offsets().begin(), first->offsets().end());
    REQUIRE(offsets.size() == first->size());
    CHECK(offsets.front() > 0);  // after the segment file's header
    CHECK(std::is_sorted(offsets.begin(), offsets.end()));
    CHECK(std::adjacent_find(offsets.begin(), offsets.end()) == offsets.end());  // strictly ascending
    // The next batch starts where this one's last record ends (after a commit, it is read next).
    REQUIRE_FALSE(bq::test::commit_now(consumer, runner.io));
    const auto second = consumer.try_consume();
    REQUIRE(second);
    REQUIRE(second->offsets().size() == 2);
    CHECK(second->offsets().front() > offsets.back());
    // Memory topics report none.
    runner->add_topic(bq::memory_topic_options<std::string>{.name = "volatile"});
    REQUIRE(runner->producer<std::string>("volatile").try_produce(std::string("x")));
    auto reader = runner->create_pull_consumer<std::string>({.topic = "volatile", .group = "g"});
    const auto in_memory = reader.try_consume();
    REQUIRE(in_memory);
    CHECK(in_memory->offsets().empty());
}

TEST_CASE("mmap topic: committed offsets survive restarts", "[mmap]")
{
    temporary_directory directory;
    queue_runner runner;
    {
        runner->add_topic(string_topic(directory.path()));
        auto producer = runner->producer<std::string>("events");
        produce_all(producer, numbered(0, 6));
        auto consumer = runner->create_pull_consumer<std::string>(group_options("g", 4));
        REQUIRE(consumer.try_consume());
        REQUIRE_FALSE(commit_now(consumer, runner.io));
        REQUIRE(consumer.try_consume());  // read, never committed
    }
    {
        runner.reopen().add_topic(string_topic(directory.path()));
        auto consumer = runner->create_pull_consumer<std::string>(group_options("g", 4));
        CHECK(drain(consumer, runner.io) == numbered(4, 2));
    }
    runner.reopen().add_topic(string_topic(directory.path()));
    auto consumer = runner->create_pull_consumer<std::string>(group_options("g", 4));
    CHECK_FALSE(consumer.try_consume());
}

TEST_CASE("mmap topic: a new group gets a checkpoint at the earliest offset before its first pull", "[mmap]")
{
    temporary_directory directory;
    queue_runner runner;
    runner->add_topic(string_topic(directory.path(), 2));
    auto producer = runner->producer<std::string>("events");
    produce_all(producer, numbered(0, 4));
    auto consumer = runner->create_pull_consumer<std::string>(group_options("late"));
    for (std::size_t partition = 0; partition < 2; ++partition) {
        CHECK(checkpoint(partition_path(directory.path(), partition) / "offsets" / "late" / "consumer.offset") ==
              first_offset);
    }
    // The folder appears complete: no temporary group folder stays behind.
    CHECK(std::distance(fs::directory_iterator(partition_path(directory.path(), 0) / "offsets"),
                        fs::directory_iterator()) == 1);
}

TEST_CASE("mmap topic: auto-commit persists the offset before the batch is handed out", "[mmap]")
{
    temporary_directory directory;
    queue_runner runner;
    const fs::path offset_file = partition_path(directory.path(), 0) / "offsets" / "auto" / "consumer.offset";
    {
        runner->add_topic(string_topic(directory.path()));
        auto producer = runner->producer<std::string>("events");
        produce_all(producer, {"a", "bb", "ccc", "dddd"});
        auto consumer = runner->create_pull_consumer<std::string>(group_options("auto", 2, true));
        CHECK(checkpoint(offset_file) == first_offset);
        const auto delivered = consumer.try_consume();
        REQUIRE(delivered);
        CHECK(std::vector<std::string>(delivered->begin(), delivered->end()) == std::vector<std::string>{"a", "bb"});
        CHECK(checkpoint(offset_file) == first_offset + record_bytes(1) + record_bytes(2));
    }
    runner.reopen().add_topic(string_topic(directory.path()));
    auto consumer = runner->create_pull_consumer<std::string>(group_options("auto", 10, true));
    const auto rest = consumer.try_consume();
    REQUIRE(rest);
    CHECK(std::vector<std::string>(rest->begin(), rest->end()) == std::vector<std::string>{"ccc", "dddd"});
}

// ---- flushing -----------------------------------------------------------------------------------

TEST_CASE("mmap topic: both flush strategies round-trip through a restart", "[mmap]")
{
    const bq::flush_strategy strategy = GENERATE(bq::flush_strategy::immediate, bq::flush_strategy::batch);
    temporary_directory directory;
    queue_runner runner;
    auto options = string_topic(directory.path(), 2, 512);
    options.flush = strategy;
    options.flush_batch_size = 3;
    const auto items = numbered(0, 50);
    {
        runner->add_topic(options);
        auto producer = runner->producer<std::string>("events");
        produce_all(producer, items);
    }
    runner.reopen().add_topic(options);
    auto consumer = runner->create_pull_consumer<std::string>(group_options("g"));
    auto read = drain(consumer, runner.io);
    CHECK(read.size() == items.size());
    std::sort(read.begin(), read.end());
    CHECK(read == items);
}

// Counts the msync calls made on segment files.
struct msync_counter {
    std::shared_ptr<std::size_t> count = std::make_shared<std::size_t>(0);
    std::shared_ptr<std::mutex> mutex = std::make_shared<std::mutex>();

    bq::detail::file_hooks hooks() const
    {
        return {.before_operation = {},
                .after_flush = [count = count, mutex = mutex](bq::detail::file_operation operation,
                                                              const std::string& path, std::uint64_t, std::uint64_t) {
                    if (operation == bq::detail::file_operation::msync && path.ends_with(".log")) {
                        std::lock_guard lock(*mutex);
                        ++*count;
                    }
                }};
    }
    std::size_t value() const
    {
        std::lock_guard lock(*mutex);
        return *count;
    }
};

TEST_CASE("mmap topic: flush immediate syncs every produce call before it returns", "[mmap]")
{
    temporary_directory directory;
    queue_runner runner;
    runner->add_topic(string_topic(directory.path()));
    auto producer = runner->producer<std::string>("events");
    msync_counter counter;
    bq::detail::scoped_file_hooks hooks(counter.hooks());
    for (std::size_t i = 1; i <= 5; ++i) {
        REQUIRE(producer.try_produce(std::string("item")));
        CHECK(counter.value() == i);
    }
    const std::vector<std::string> batch = {"x", "y", "z"};
    REQUIRE(producer.try_produce(std::span<const std::string>(batch)));
    CHECK(counter.value() == 6);  // one flush for the whole call
}

TEST_CASE("mmap topic: flush batch syncs every flush_batch_size records per partition", "[mmap]")
{
    temporary_directory directory;
    queue_runner runner;
    auto options = string_topic(directory.path());
    options.flush = bq::flush_strategy::batch;
    options.flush_batch_size = 4;
    runner->add_topic(options);
    auto producer = runner->producer<std::string>("events");
    msync_counter counter;
    bq::detail::scoped_file_hooks hooks(counter.hooks());
    std::vector<std::size_t> flushes;
    for (std::size_t i = 0; i < 10; ++i) {
        REQUIRE(producer.try_produce(std::string("item")));
        flushes.push_back(counter.value());
    }
    CHECK(flushes == std::vector<std::size_t>{0, 0, 0, 1, 1, 1, 1, 2, 2, 2});
}

TEST_CASE("mmap topic: producer.offset never covers data that was not flushed", "[mmap]")
{
    const bq::flush_strategy strategy = GENERATE(bq::flush_strategy::immediate, bq::flush_strategy::batch);
    temporary_directory directory;
    queue_runner runner;
    auto options = string_topic(directory.path(), 1, 512);
    options.flush = strategy;
    options.flush_batch_size = 5;
    runner->add_topic(options);
    auto producer = runner->producer<std::string>("events");
    auto consumer = runner->create_pull_consumer<std::string>(group_options("g", 7));

    struct state {
        std::mutex mutex;
        std::map<std::string, std::uint64_t> synced_end;  // per segment file: end of the synced bytes
        std::vector<std::string> violations;
        std::size_t checks = 0;
    };
    auto shared = std::make_shared<state>();
    const std::string folder = partition_path(directory.path(), 0).string();
    bq::detail::file_hooks hooks;
    hooks.after_flush = [shared](bq::detail::file_operation operation, const std::string& path, std::uint64_t offset,
                                 std::uint64_t length) {
        if (operation == bq::detail::file_operation::msync) {
            std::lock_guard lock(shared->mutex);
            shared->synced_end[path] = std::max(shared->synced_end[path], offset + length);
        }
    };
    hooks.before_operation = [shared, folder](bq::detail::file_operation operation, const std::string& path) {
        if (operation == bq::detail::file_operation::rename && path == folder + "/producer.offset") {
            std::ifstream in(path + ".tmp", std::ios::binary);
            std::uint64_t value = 0;
            for (int i = 0; i < 8; ++i) {
                value |= static_cast<std::uint64_t>(static_cast<unsigned char>(in.get())) << (8 * i);
            }
            const std::uint64_t position = value % 512;
            std::string segment = std::to_string(value / 512);
            segment.insert(0, 20 - segment.size(), '0');
            std::lock_guard lock(shared->mutex);
            ++shared->checks;
            if (position != first_offset && shared->synced_end[folder + "/" + segment + ".log"] < position) {
                shared->violations.push_back("producer.offset " + std::to_string(value) + " written before " + segment +
                                             ".log was flushed to byte " + std::to_string(position));
            }
        }
        return 0;
    };
    {
        bq::detail::scoped_file_hooks installed(std::move(hooks));
        for (std::size_t round = 0; round < 4; ++round) {
            produce_all(producer, numbered(round * 20, 20));
            REQUIRE(consumer.try_consume());
            REQUIRE_FALSE(commit_now(consumer, runner.io));
        }
        runner.queue.reset();
    }
    std::lock_guard lock(shared->mutex);
    CHECK(shared->checks > 3);
    CHECK(shared->violations == std::vector<std::string>{});
}

TEST_CASE("mmap topic: producer.offset is written at rollover, commit and close, not at every flush", "[mmap]")
{
    const bq::flush_strategy strategy = GENERATE(bq::flush_strategy::immediate, bq::flush_strategy::batch);
    temporary_directory directory;
    queue_runner runner;
    auto options = string_topic(directory.path(), 1, small_segment);
    options.flush = strategy;
    options.flush_batch_size = 2;
    const auto opened = std::chrono::steady_clock::now();
    runner->add_topic(options);
    auto producer = runner->producer<std::string>("events");
    auto consumer = runner->create_pull_consumer<std::string>(group_options("g"));
    const fs::path producer_offset = partition_path(directory.path(), 0) / "producer.offset";

    auto renames = std::make_shared<std::atomic<std::size_t>>(0);
    msync_counter flushes;
    bq::detail::file_hooks hooks = flushes.hooks();
    hooks.before_operation = [renames, path = producer_offset.string()](bq::detail::file_operation operation,
                                                                        const std::string& target) {
        if (operation == bq::detail::file_operation::rename && target == path) {
            ++*renames;
        }
        return 0;
    };
    bq::detail::scoped_file_hooks installed(std::move(hooks));
    const auto writes = [&renames] { return renames->load(); };
    // The produce path may add a hint once a second has passed since the last checkpoint.
    const auto timed_hints = [opened] {
        return static_cast<std::size_t>(
            std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - opened).count());
    };

    // 12 records stay in segment 0: 12 flushes (immediate) or 6 (batch of 2), no rollover.
    for (const std::string& item : numbered(0, records_per_small_segment - 1)) {
        REQUIRE(producer.try_produce(item));
    }
    CHECK(flushes.value() == (strategy == bq::flush_strategy::immediate ? 12U : 6U));
    CHECK(writes() <= timed_hints());
    if (timed_hints() == 0) {
        CHECK_FALSE(fs::exists(producer_offset));
    }

    // The 14th record rolls over: the hint names the new segment's first record boundary.
    produce_all(producer, numbered(12, 2));
    CHECK(checkpoint(producer_offset) == small_segment + first_offset);
    const std::size_t after_rollover = writes();
    CHECK(after_rollover >= 1);
    CHECK(after_rollover <= 1 + timed_hints());

    // A commit writes it for real, up to the end of the flushed log.
    REQUIRE(consumer.try_consume());
    REQUIRE_FALSE(commit_now(consumer, runner.io));
    CHECK(writes() == after_rollover + 1);
    CHECK(checkpoint(producer_offset) == small_segment + first_offset + record_bytes(8));

    // So does close, covering a record no flush_batch_size boundary flushed.
    REQUIRE(producer.try_produce(std::string("00000014")));
    runner.queue.reset();
    CHECK(writes() == after_rollover + 2);
    CHECK(checkpoint(producer_offset) == small_segment + first_offset + 2 * record_bytes(8));
    runner.reopen().add_topic(options);
    auto reader = runner->create_pull_consumer<std::string>(group_options("fresh"));
    CHECK(drain(reader, runner.io) == numbered(0, 15));
}

TEST_CASE("mmap topic: segments roll over into several files and read back in order", "[mmap]")
{
    temporary_directory directory;
    queue_runner runner;
    const auto items = numbered(0, 40);
    {
        runner->add_topic(string_topic(directory.path(), 1, small_segment));
        auto producer = runner->producer<std::string>("events");
        produce_all(producer, items);
    }
    const fs::path folder = partition_path(directory.path(), 0);
    CHECK(segment_indices(folder) == range(0, 3));  // 13 records per segment
    for (const std::uint64_t index : segment_indices(folder)) {
        CHECK(fs::file_size(segment_path(folder, index)) == small_segment);
    }
    runner.reopen().add_topic(string_topic(directory.path(), 1, small_segment));
    auto consumer = runner->create_pull_consumer<std::string>(group_options("g", 7));
    CHECK(drain(consumer, runner.io) == items);
}

TEST_CASE("mmap topic: a commit is a flush boundary", "[mmap]")
{
    temporary_directory directory;
    queue_runner runner;
    auto options = string_topic(directory.path());
    options.flush = bq::flush_strategy::batch;
    options.flush_batch_size = 1000;
    runner->add_topic(options);
    auto producer = runner->producer<std::string>("events");
    auto consumer = runner->create_pull_consumer<std::string>(group_options("g", 3));
    produce_all(producer, numbered(0, 5));
    const fs::path folder = partition_path(directory.path(), 0);
    REQUIRE_FALSE(fs::exists(folder / "producer.offset"));

    msync_counter counter;
    bq::detail::scoped_file_hooks hooks(counter.hooks());
    REQUIRE(consumer.try_consume());
    REQUIRE_FALSE(commit_now(consumer, runner.io));
    CHECK(counter.value() >= 1);
    const std::uint64_t committed = checkpoint(folder / "offsets" / "g" / "consumer.offset");
    CHECK(committed == first_offset + 3 * record_bytes(8));
    CHECK(checkpoint(folder / "producer.offset") >= committed);
}

// ---- record sizes -------------------------------------------------------------------------------

TEST_CASE("mmap topic: a record larger than a segment is rejected and the queue keeps working", "[mmap]")
{
    temporary_directory directory;
    queue_runner runner;
    runner->add_topic(string_topic(directory.path(), 1, small_segment));
    auto producer = runner->producer<std::string>("events");
    const std::string too_large(small_segment - 56 + 1, 'x');
    const std::string largest(small_segment - 56, 'y');

    try {
        producer.try_produce(too_large);
        FAIL("a record larger than a segment was accepted");
    } catch (const bq::error& failure) {
        CHECK(failure.code() == errc::invalid_argument);
    }
    CHECK(produce_now(producer, too_large, runner.io) == errc::invalid_argument);
    CHECK_FALSE(produce_now(producer, largest, runner.io));
    CHECK_FALSE(produce_now(producer, std::string("small"), runner.io));

    auto consumer = runner->create_pull_consumer<std::string>(group_options("g"));
    CHECK(drain(consumer, runner.io) == std::vector<std::string>{largest, "small"});
    runner.reopen().add_topic(string_topic(directory.path(), 1, small_segment));
    auto again = runner->create_pull_consumer<std::string>(group_options("h"));
    CHECK(drain(again, runner.io) == std::vector<std::string>{largest, "small"});
}

TEST_CASE("mmap topic: empty payloads round-trip and do not hide the records after them", "[mmap]")
{
    temporary_directory directory;
    queue_runner runner;
    {
        runner->add_topic(string_topic(directory.path()));
        auto producer = runner->producer<std::string>("events");
        produce_all(producer, {"a", "", "", "b", ""});
        auto consumer = runner->create_pull_consumer<std::string>(group_options("live"));
        CHECK(drain(consumer, runner.io) == std::vector<std::string>{"a", "", "", "b", ""});
    }
    {
        runner.reopen().add_topic(string_topic(directory.path()));
        auto producer = runner->producer<std::string>("events");
        produce_all(producer, {"c", "", "d"});
    }
    runner.reopen().add_topic(string_topic(directory.path()));
    auto consumer = runner->create_pull_consumer<std::string>(group_options("later"));
    CHECK(drain(consumer, runner.io) == std::vector<std::string>{"a", "", "", "b", "", "c", "", "d"});
}

// ---- retention ----------------------------------------------------------------------------------

TEST_CASE("mmap topic: retention deletes fully consumed segments, keeping the newest N", "[mmap]")
{
    const std::size_t keep = GENERATE(0, 1, 2);
    INFO("max_retained_consumed_segments = " << keep);
    temporary_directory directory;
    queue_runner runner;
    auto options = string_topic(directory.path(), 1, small_segment);
    options.max_retained_consumed_segments = keep;
    runner->add_topic(options);
    auto producer = runner->producer<std::string>("events");
    auto consumer = runner->create_pull_consumer<std::string>(group_options("g"));
    const auto items = numbered(0, 4 * records_per_small_segment + 3);  // segments 0-3 full, 3 records in 4
    produce_all(producer, items);
    const fs::path folder = partition_path(directory.path(), 0);
    REQUIRE(segment_indices(folder) == range(0, 4));

    CHECK(drain(consumer, runner.io) == items);
    CHECK(segment_indices(folder) == range(4 - keep, 4));
    const std::uint64_t earliest = (4 - keep) * small_segment + first_offset;
    CHECK(checkpoint(folder / "earliest.offset") == earliest);

    // A group created now starts at the earliest retained record.
    auto late = runner->create_pull_consumer<std::string>(group_options("late"));
    CHECK(checkpoint(folder / "offsets" / "late" / "consumer.offset") == earliest);
    const std::vector<std::string> retained(items.begin() + static_cast<std::ptrdiff_t>((4 - keep) * 13), items.end());
    CHECK(drain(late, runner.io) == retained);

    runner.reopen().add_topic(options);
    auto reopened = runner->create_pull_consumer<std::string>(group_options("reopened"));
    CHECK(drain(reopened, runner.io) == retained);
}

TEST_CASE("mmap topic: a slow group pins segments until it commits past them", "[mmap]")
{
    temporary_directory directory;
    queue_runner runner;
    auto options = string_topic(directory.path(), 1, small_segment);
    options.max_retained_consumed_segments = 1;
    runner->add_topic(options);
    auto producer = runner->producer<std::string>("events");
    auto fast = runner->create_pull_consumer<std::string>(group_options("fast"));
    auto slow = runner->create_pull_consumer<std::string>(group_options("slow", 5));
    const auto items = numbered(0, 4 * records_per_small_segment + 3);
    produce_all(producer, items);
    const fs::path folder = partition_path(directory.path(), 0);

    REQUIRE(drain(fast, runner.io).size() == items.size());
    CHECK(segment_indices(folder) == range(0, 4));
    CHECK_FALSE(fs::exists(folder / "earliest.offset"));

    // The slow group commits into segment 2: segments 0 and 1 are consumed by everyone; keep 1.
    for (int i = 0; i < 6; ++i) {
        REQUIRE(slow.try_consume());
        REQUIRE_FALSE(commit_now(slow, runner.io));
    }
    CHECK(segment_indices(folder) == range(1, 4));
    REQUIRE(drain(slow, runner.io).size() == items.size() - 30);
    CHECK(segment_indices(folder) == range(3, 4));
}

TEST_CASE("mmap topic: a group known only from disk pins segments", "[mmap]")
{
    temporary_directory directory;
    queue_runner runner;
    auto options = string_topic(directory.path(), 1, small_segment);
    options.max_retained_consumed_segments = 0;
    const auto items = numbered(0, 4 * records_per_small_segment + 3);
    {
        runner->add_topic(options);
        auto fast = runner->create_pull_consumer<std::string>(group_options("fast"));
        auto idle = runner->create_pull_consumer<std::string>(group_options("idle"));
        auto producer = runner->producer<std::string>("events");
        produce_all(producer, items);
    }
    const fs::path folder = partition_path(directory.path(), 0);
    {
        runner.reopen().add_topic(options);
        auto fast = runner->create_pull_consumer<std::string>(group_options("fast"));
        CHECK(drain(fast, runner.io) == items);
        CHECK(segment_indices(folder) == range(0, 4));  // "idle" has not consumed anything
    }
    runner.reopen().add_topic(options);
    auto idle = runner->create_pull_consumer<std::string>(group_options("idle"));
    CHECK(drain(idle, runner.io) == items);
    CHECK(segment_indices(folder) == range(4, 4));
}

TEST_CASE("mmap topic: retention runs at open, so segments only a removed group pinned are reclaimed without a commit",
          "[mmap][retention]")
{
    temporary_directory directory;
    queue_runner runner;
    auto options = string_topic(directory.path(), 2, small_segment);
    options.max_retained_consumed_segments = 1;
    const auto items = numbered(0, 2 * (4 * records_per_small_segment + 3));  // segments 0-4 in each partition
    {
        runner->add_topic(options);
        auto fast = runner->create_pull_consumer<std::string>(group_options("fast"));
        auto obsolete = runner->create_pull_consumer<std::string>(group_options("obsolete"));
        auto producer = runner->producer<std::string>("events");
        produce_all(producer, items);
        CHECK(drain(fast, runner.io).size() == items.size());
        CHECK(segment_indices(partition_path(directory.path(), 0)) == range(0, 4));  // "obsolete" pins them
    }
    // As the docs instruct: with the queue stopped, the operator deletes the obsolete group's folders.
    for (std::size_t partition = 0; partition < 2; ++partition) {
        REQUIRE(fs::remove_all(partition_path(directory.path(), partition) / "offsets" / "obsolete") > 0);
    }
    runner.reopen().add_topic(options);
    for (std::size_t partition = 0; partition < 2; ++partition) {
        INFO("partition " << partition);
        const fs::path folder = partition_path(directory.path(), partition);
        CHECK(segment_indices(folder) == range(3, 4));
        CHECK(checkpoint(folder / "earliest.offset") == 3 * small_segment + first_offset);
    }
    // Nothing the remaining group has not consumed is gone.
    auto fast = runner->create_pull_consumer<std::string>(group_options("fast"));
    CHECK_FALSE(fast.try_consume());
}

TEST_CASE("mmap topic: without any group nothing is deleted", "[mmap]")
{
    temporary_directory directory;
    queue_runner runner;
    auto options = string_topic(directory.path(), 1, small_segment);
    options.max_retained_consumed_segments = 0;
    {
        runner->add_topic(options);
        auto producer = runner->producer<std::string>("events");
        produce_all(producer, numbered(0, 4 * records_per_small_segment + 3));
    }
    runner.reopen().add_topic(options);
    auto producer = runner->producer<std::string>("events");
    produce_all(producer, numbered(100, 13));
    CHECK(segment_indices(partition_path(directory.path(), 0)) == range(0, 5));
}

TEST_CASE("mmap topic: segments below earliest.offset left by an interrupted deletion are removed at open", "[mmap]")
{
    temporary_directory directory;
    queue_runner runner;
    auto options = string_topic(directory.path(), 1, small_segment);
    options.max_retained_consumed_segments = 1;
    const fs::path folder = partition_path(directory.path(), 0);
    const auto items = numbered(0, 4 * records_per_small_segment + 3);
    std::map<std::uint64_t, std::vector<unsigned char>> deleted;
    {
        runner->add_topic(options);
        auto producer = runner->producer<std::string>("events");
        auto consumer = runner->create_pull_consumer<std::string>(group_options("g"));
        produce_all(producer, items);
        for (std::uint64_t index = 0; index < 3; ++index) {
            deleted[index] = file_bytes(segment_path(folder, index));
        }
        REQUIRE(drain(consumer, runner.io) == items);
        REQUIRE(segment_indices(folder) == range(3, 4));
    }
    // The process stopped after earliest.offset advanced, before the files were gone.
    for (const auto& [index, bytes] : deleted) {
        write_file(segment_path(folder, index), bytes);
    }
    runner.reopen().add_topic(options);
    CHECK(segment_indices(folder) == range(3, 4));
    auto late = runner->create_pull_consumer<std::string>(group_options("late"));
    CHECK(drain(late, runner.io).size() == 13 + 3);
}

TEST_CASE("mmap topic: a batch that ends at a segment's end commits the next segment's first offset", "[mmap]")
{
    temporary_directory directory;
    queue_runner runner;
    runner->add_topic(string_topic(directory.path(), 1, small_segment));
    auto producer = runner->producer<std::string>("events");
    auto consumer = runner->create_pull_consumer<std::string>(group_options("g", records_per_small_segment));
    produce_all(producer, numbered(0, records_per_small_segment + 1));  // the 14th record rolls over
    const auto delivered = consumer.try_consume();
    REQUIRE(delivered);
    CHECK(delivered->size() == records_per_small_segment);
    REQUIRE_FALSE(commit_now(consumer, runner.io));
    CHECK(checkpoint(partition_path(directory.path(), 0) / "offsets" / "g" / "consumer.offset") ==
          small_segment + first_offset);
}

TEST_CASE("mmap topic: a checkpoint at the end of a segment about to be deleted moves to the next segment", "[mmap]")
{
    temporary_directory directory;
    queue_runner runner;
    auto options = string_topic(directory.path(), 1, small_segment);
    options.max_retained_consumed_segments = 0;
    runner->add_topic(options);
    auto producer = runner->producer<std::string>("events");
    auto caught_up = runner->create_pull_consumer<std::string>(group_options("caught-up"));
    auto other = runner->create_pull_consumer<std::string>(group_options("other"));
    const fs::path folder = partition_path(directory.path(), 0);
    const fs::path caught_up_file = folder / "offsets" / "caught-up" / "consumer.offset";

    // "caught-up" reads segment 0 to its end before the segment is ended by a rollover.
    produce_all(producer, numbered(0, records_per_small_segment));
    REQUIRE(drain(caught_up, runner.io).size() == records_per_small_segment);
    REQUIRE(checkpoint(caught_up_file) == first_offset + records_per_small_segment * record_bytes(8));
    produce_all(producer, numbered(13, 2 * records_per_small_segment));  // segments 1 and 2
    REQUIRE(drain(other, runner.io).size() == 3 * records_per_small_segment);

    // Segment 0 is consumed by both groups: it goes, and "caught-up" now points at segment 1.
    CHECK(segment_indices(folder).front() >= 1);
    CHECK(checkpoint(caught_up_file) == small_segment + first_offset);
    CHECK(checkpoint(folder / "earliest.offset") <= checkpoint(caught_up_file));
    CHECK(drain(caught_up, runner.io) == numbered(13, 2 * records_per_small_segment));

    runner.reopen().add_topic(options);
    auto reopened = runner->create_pull_consumer<std::string>(group_options("caught-up"));
    CHECK_FALSE(reopened.try_consume());
}

// ---- topics and routing -------------------------------------------------------------------------

TEST_CASE("mmap topic: memory and mmap topics live side by side in one queue", "[mmap]")
{
    temporary_directory directory;
    queue_runner runner;
    {
        runner->add_topic(string_topic(directory.path()));
        runner->add_topic(bq::memory_topic_options<std::string>{.name = "scratch"});
        runner->add_topic(bq::memory_topic_options<order>{.name = "events"});
        auto persistent = runner->producer<std::string>("events");
        auto memory = runner->producer<std::string>("scratch");
        auto memory_orders = runner->producer<order>("events");
        produce_all(persistent, {"p1", "p2"});
        produce_all(memory, {"m1"});
        REQUIRE(memory_orders.try_produce(order{1, "o"}));
        auto from_persistent = runner->create_pull_consumer<std::string>(group_options("g"));
        auto from_memory = runner->create_pull_consumer<std::string>({.topic = "scratch", .group = "g"});
        auto from_orders = runner->create_pull_consumer<order>({.topic = "events", .group = "g"});
        CHECK(drain(from_persistent, runner.io) == std::vector<std::string>{"p1", "p2"});
        CHECK(drain(from_memory, runner.io) == std::vector<std::string>{"m1"});
        CHECK(drain(from_orders, runner.io) == std::vector<order>{{1, "o"}});
    }
    runner.reopen().add_topic(string_topic(directory.path()));
    runner->add_topic(bq::memory_topic_options<std::string>{.name = "scratch"});
    auto from_persistent = runner->create_pull_consumer<std::string>(group_options("h"));
    auto from_memory = runner->create_pull_consumer<std::string>({.topic = "scratch", .group = "h"});
    CHECK(drain(from_persistent, runner.io) == std::vector<std::string>{"p1", "p2"});
    CHECK_FALSE(from_memory.try_consume());
}

TEST_CASE("mmap topic: routing is stable across restarts", "[mmap]")
{
    temporary_directory directory;
    queue_runner runner;
    const auto options = bq::mmap_topic_options<order>{.name = "events",
                                                       .partitions = 4,
                                                       .data_directory = directory.path(),
                                                       .segment_size = 4096,
                                                       .partition_key = [](const order& item) { return item.name; }};
    const auto partitions_of_keys = [&](std::int64_t first_id) {
        auto producer = runner->producer<order>("events");
        for (std::int64_t i = 0; i < 12; ++i) {
            REQUIRE(producer.try_produce(order{first_id + i, "customer-" + std::to_string(i % 6)}));
        }
        auto consumer = runner->create_pull_consumer<order>(group_options("run-" + std::to_string(first_id)));
        std::map<std::string, std::set<std::size_t>> seen;
        while (auto delivered = consumer.try_consume()) {
            for (const order& item : *delivered) {
                if (item.id >= first_id) {
                    seen[item.name].insert(delivered->partition());
                }
            }
            REQUIRE_FALSE(commit_now(consumer, runner.io));
        }
        return seen;
    };
    runner->add_topic(options);
    const auto first_run = partitions_of_keys(0);
    runner.reopen().add_topic(options);
    const auto second_run = partitions_of_keys(100);
    REQUIRE(first_run.size() == 6);
    CHECK(first_run == second_run);
    for (const auto& [key, partitions] : first_run) {
        CHECK(partitions == std::set<std::size_t>{bq::partition_for_key(std::string_view(key), 4)});
    }
}

// ---- serializers --------------------------------------------------------------------------------

template <class T>
std::vector<T> round_trip(const fs::path& directory, bq::any_serializer<T> serializer, const std::vector<T>& items,
                          std::vector<unsigned char>* stored_segment = nullptr)
{
    const auto options = bq::mmap_topic_options<T>{
        .name = "events", .data_directory = directory, .segment_size = 4096, .serializer = std::move(serializer)};
    queue_runner runner;
    {
        runner->add_topic(options);
        auto producer = runner->producer<T>("events");
        REQUIRE(producer.try_produce(std::span<const T>(items)));
    }
    if (stored_segment != nullptr) {
        *stored_segment = file_bytes(segment_path(partition_path(directory, 0), 0));
    }
    runner.reopen().add_topic(options);
    auto consumer = runner->create_pull_consumer<T>(group_options("g"));
    return drain(consumer, runner.io);
}

TEST_CASE("mmap topic: the json, msgpack and raw serializers round-trip through a topic", "[mmap]")
{
    const std::vector<order> orders = {{1, "first"}, {-2, "second"}, {3, ""}};
    SECTION("json, the default")
    {
        temporary_directory directory;
        std::vector<unsigned char> stored;
        CHECK(round_trip<order>(directory.path(), bq::json_serializer<order>{}, orders, &stored) == orders);
        CHECK(contains(stored, R"("name":"second")"));
        queue_runner runner;
        runner->add_topic(bq::mmap_topic_options<order>{
            .name = "defaulted", .data_directory = directory.path(), .segment_size = 4096});
        auto producer = runner->producer<order>("defaulted");
        REQUIRE(producer.try_produce(orders[0]));
        CHECK(contains(file_bytes(segment_path(partition_path(directory.path(), 0, "defaulted"), 0)),
                       R"("name":"first")"));
    }
    SECTION("msgpack")
    {
        temporary_directory directory;
        std::vector<unsigned char> stored;
        CHECK(round_trip<order>(directory.path(), bq::msgpack_serializer<order>{}, orders, &stored) == orders);
        CHECK_FALSE(contains(stored, R"("name")"));
        CHECK(contains(stored, "second"));
    }
    SECTION("raw, for a type without JSON support")
    {
        temporary_directory directory;
        const std::vector<point> points = {{1, 0.5}, {-7, 1e300}, {0, -0.0}};
        std::vector<unsigned char> stored;
        CHECK(round_trip<point>(directory.path(), bq::raw_serializer<point>{}, points, &stored) == points);
        // Each record holds exactly sizeof(point) payload bytes.
        CHECK(stored[first_offset] == sizeof(point));
    }
    SECTION("msgpack, for a type without JSON support")
    {
        temporary_directory directory;
        const std::vector<packed_only> items = {{1, "one"}, {2, ""}};
        CHECK(round_trip<packed_only>(directory.path(), bq::msgpack_serializer<packed_only>{}, items) == items);
    }
}

// ---- exclusive access ---------------------------------------------------------------------------

TEST_CASE("mmap topic: a second queue opening the same topic folder fails fast", "[mmap]")
{
    temporary_directory directory;
    queue_runner first;
    first->add_topic(string_topic(directory.path()));
    auto producer = first->producer<std::string>("events");
    produce_all(producer, {"kept"});

    queue_runner second;
    try {
        second->add_topic(string_topic(directory.path()));
        FAIL("a second queue opened a topic folder that is open");
    } catch (const bq::error& failure) {
        CHECK(failure.code() == errc::io_error);
        CHECK(std::string(failure.what()).find("already open") != std::string::npos);
        CHECK(std::string(failure.what()).find((directory.path() / "events").string()) != std::string::npos);
    }
    // The first queue is unaffected.
    produce_all(producer, {"still"});
    auto consumer = first->create_pull_consumer<std::string>(group_options("g"));
    CHECK(drain(consumer, first.io) == std::vector<std::string>{"kept", "still"});
}

TEST_CASE("mmap topic: another process opening the same topic folder fails fast", "[mmap]")
{
    temporary_directory directory;
    queue_runner runner;
    runner->add_topic(string_topic(directory.path()));

    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        int status = 3;
        try {
            boost::asio::io_context io;
            bq::buffer_queue queue(io.get_executor());
            queue.add_topic(string_topic(directory.path()));
            status = 1;  // opened: the lock does not work across processes
        } catch (const bq::error& failure) {
            const bool clear = std::string(failure.what()).find("already open") != std::string::npos;
            status = failure.code() == errc::io_error && clear ? 0 : 2;
        } catch (...) {
            status = 4;
        }
        ::_exit(status);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}

// ---- options ------------------------------------------------------------------------------------

TEST_CASE("mmap topic: invalid options are rejected naming the option", "[mmap]")
{
    temporary_directory directory;
    const fs::path data = directory.path() / "data";
    fs::create_directory(data);
    struct invalid_case {
        std::string option;
        std::function<void(bq::mmap_topic_options<std::string>&)> change;
    };
    const std::vector<invalid_case> cases = {
        {"name", [](auto& options) { options.name.clear(); }},
        {"name", [](auto& options) { options.name = "../x"; }},
        {"name", [](auto& options) { options.name = "a/b"; }},
        {"name", [](auto& options) { options.name = ".."; }},
        {"name", [](auto& options) { options.name = "."; }},
        {"partitions", [](auto& options) { options.partitions = 0; }},
        {"segment_size", [](auto& options) { options.segment_size = 4100; }},
        {"segment_size", [](auto& options) { options.segment_size = 60; }},
        {"segment_size", [](auto& options) { options.segment_size = 56; }},
        {"segment_size", [](auto& options) { options.segment_size = 0; }},
        {"flush_batch_size", [](auto& options) { options.flush_batch_size = 0; }},
        {"data_directory", [](auto& options) { options.data_directory.clear(); }},
    };
    for (const invalid_case& each : cases) {
        auto options = string_topic(data);
        each.change(options);
        INFO("option " << each.option << ", name '" << options.name << "', segment_size " << options.segment_size);
        queue_runner runner;
        try {
            runner->add_topic(options);
            FAIL("accepted");
        } catch (const bq::error& failure) {
            CHECK(failure.code() == errc::invalid_argument);
            CHECK(std::string(failure.what()).find("'" + each.option + "'") != std::string::npos);
        }
        CHECK(fs::is_empty(data));
        CHECK(std::distance(fs::directory_iterator(directory.path()), fs::directory_iterator()) == 1);
    }
    // The smallest valid segment holds an 8-byte payload.
    queue_runner runner;
    auto options = string_topic(data, 1, 64);
    runner->add_topic(options);
    auto producer = runner->producer<std::string>("events");
    CHECK_FALSE(produce_now(producer, std::string(8, 'x'), runner.io));
    CHECK(produce_now(producer, std::string(9, 'x'), runner.io) == errc::invalid_argument);
}

TEST_CASE("mmap topic: segment_size one below the minimum is rejected naming the option and the minimum, the "
          "minimum is accepted",
          "[mmap]")
{
    // One constant, detail::min_segment_size, is the minimum for the topic option and for the format.
    constexpr std::uint64_t minimum = bq::detail::min_segment_size;
    temporary_directory directory;
    const fs::path data = directory.path() / "data";
    fs::create_directory(data);
    for (const std::uint64_t size : {minimum - 1, minimum - bq::detail::record_alignment}) {
        INFO("segment_size " << size);
        queue_runner runner;
        auto options = string_topic(data);
        options.segment_size = size;
        try {
            runner->add_topic(options);
            FAIL("accepted");
        } catch (const bq::error& failure) {
            CHECK(failure.code() == errc::invalid_argument);
            CHECK(bq::test::missing_from(failure.what(),
                                         {"'segment_size'", std::to_string(minimum), std::to_string(size)}) == "");
        }
        CHECK(fs::is_empty(data));
        CHECK_FALSE(bq::detail::is_valid_segment_size(size));
    }
    CHECK(bq::detail::is_valid_segment_size(minimum));
    queue_runner runner;
    auto options = string_topic(data);
    options.segment_size = minimum;
    runner->add_topic(options);
    auto producer = runner->producer<std::string>("events");
    CHECK_FALSE(produce_now(producer, std::string("x"), runner.io));
}

// ---- closing ------------------------------------------------------------------------------------

// Lines of /proc/self/maps, or entries of /proc/self/fd, that refer to something under `folder`.
std::vector<std::string> open_references(const fs::path& folder)
{
    std::vector<std::string> found;
    const std::string prefix = fs::canonical(folder).string() + "/";
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);) {
        if (line.find(prefix) != std::string::npos) {
            found.push_back(line);
        }
    }
    for (const auto& entry : fs::directory_iterator("/proc/self/fd")) {
        std::error_code error;
        const fs::path target = fs::read_symlink(entry.path(), error);
        if (!error && target.string().starts_with(prefix)) {
            found.push_back(target.string());
        }
    }
    return found;
}

TEST_CASE("mmap topic: closing the queue unmaps and closes everything and releases the folder", "[mmap]")
{
    temporary_directory directory;
    queue_runner runner;
    runner->add_topic(string_topic(directory.path(), 2, small_segment));
    auto producer = runner->producer<std::string>("events");
    auto consumer = runner->create_pull_consumer<std::string>(group_options("g"));
    produce_all(producer, numbered(0, 30));
    REQUIRE_FALSE(open_references(directory.path()).empty());

    runner->close();
    CHECK(open_references(directory.path()) == std::vector<std::string>{});
    try {
        producer.try_produce(std::string("late"));
        FAIL("produced into a closed queue");
    } catch (const bq::error& failure) {
        CHECK(failure.code() == errc::closed);
    }
    CHECK(produce_now(producer, std::string("late"), runner.io) == errc::closed);
    try {
        consumer.try_consume();
        FAIL("consumed from a closed queue");
    } catch (const bq::error& failure) {
        CHECK(failure.code() == errc::closed);
    }

    // The old handles still exist; a new queue opens the folder and sees everything.
    queue_runner next;
    next->add_topic(string_topic(directory.path(), 2, small_segment));
    auto reader = next->create_pull_consumer<std::string>(group_options("g"));
    auto read = drain(reader, next.io);
    std::sort(read.begin(), read.end());
    CHECK(read == numbered(0, 30));
}

}  // namespace

TEST_CASE("mmap topic: a consume woken by another thread completes on the handler's executor, not an I/O thread",
          "[mmap]")
{
    // The wake-up pulls on the queue's I/O threads; the handler must still run where `io` runs it.
    temporary_directory directory;
    queue_runner runner;
    runner->add_topic(string_topic(directory.path()));
    auto producer = runner->producer<std::string>("events");
    auto consumer = runner->create_pull_consumer<std::string>(group_options("g", 10, true));
    for (int round = 0; round < 3; ++round) {
        const std::string item = "item-" + std::to_string(round);
        std::vector<std::string> delivered;
        boost::system::error_code result = bq::errc::invalid_argument;
        bool on_io = false;
        consumer.consume([&](boost::system::error_code ec, bq::batch<std::string> received) {
            result = ec;
            delivered.assign(received.begin(), received.end());
            on_io = runner.io.get_executor().running_in_this_thread();
        });
        std::thread late_producer([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));  // mostly after the consume parked
            producer.try_produce(item);
        });
        runner.io.run_for(std::chrono::minutes(1));
        runner.io.restart();
        late_producer.join();
        CHECK_FALSE(result);
        CHECK(delivered == std::vector<std::string>{item});
        CHECK(on_io);
    }
}

}  // namespace mmap_topic_test
