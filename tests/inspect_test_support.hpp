// Test helpers for bufferqueue-inspect (tests/mmap/inspect_test.cpp and
// tests/tools/inspect_tool_test.cpp): a data folder written by a real queue, and damage to it.
#pragma once

#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/mmap/mmap_topic.hpp"

#include "catch.hpp"
#include "queue_test_support.hpp"

#include <boost/asio/io_context.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace bufferqueue::test {

struct inspect_order {
    std::int64_t id = 0;
    std::string name;
    bool operator==(const inspect_order&) const = default;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(inspect_order, id, name)

/// `{"id":N,"name":"order-N"}` for N < 10 is 25 bytes: a 40-byte record, so a 256-byte segment holds
/// 5 records (40 + 5 * 40 = 240, then the 8-byte end marker).
inline constexpr std::uint64_t inspect_segment_size = 256;

inline mmap_topic_options<inspect_order> inspect_topic(const std::filesystem::path& directory, const std::string& name,
                                                       std::size_t partitions)
{
    return {.name = name, .partitions = partitions, .data_directory = directory, .segment_size = inspect_segment_size};
}

/// A queue over a data folder with topic "orders" (1 partition, 7 records in 2 segments; group
/// "billing" committed 4, group "audit" committed all 7) and topic "clicks" (2 partitions,
/// 3 records; no group). Destroying it closes the queue (everything flushed).
struct inspect_fixture {
    boost::asio::io_context io;
    std::unique_ptr<buffer_queue> queue;

    explicit inspect_fixture(const std::filesystem::path& directory)
    {
        open(directory);
        auto orders = queue->producer<inspect_order>("orders");
        for (std::int64_t id = 0; id < 7; ++id) {
            REQUIRE_FALSE(produce_now(orders, inspect_order{id, "order-" + std::to_string(id)}, io));
        }
        auto clicks = queue->producer<inspect_order>("clicks");
        for (std::int64_t id = 0; id < 3; ++id) {
            REQUIRE_FALSE(produce_now(clicks, inspect_order{id, "click-" + std::to_string(id)}, io));
        }
        auto billing =
            queue->create_pull_consumer<inspect_order>({.topic = "orders", .group = "billing", .batch_size = 4});
        REQUIRE(billing.try_consume());
        REQUIRE_FALSE(commit_now(billing, io));
        auto audit =
            queue->create_pull_consumer<inspect_order>({.topic = "orders", .group = "audit", .batch_size = 100});
        while (audit.try_consume()) {
            REQUIRE_FALSE(commit_now(audit, io));
        }
    }

    void open(const std::filesystem::path& directory)
    {
        queue = std::make_unique<buffer_queue>(io.get_executor());
        queue->add_topic(inspect_topic(directory, "orders", 1));
        queue->add_topic(inspect_topic(directory, "clicks", 2));
    }

    /// Closes the queue (releases the folder lock).
    void close() { queue.reset(); }
};

/// Reopens the folder in a new queue and returns the ids group `group` of "orders" reads from its
/// committed position, committing each batch.
inline std::vector<std::int64_t> reopened_ids(const std::filesystem::path& directory, const std::string& group)
{
    boost::asio::io_context io;
    buffer_queue queue(io.get_executor());
    queue.add_topic(inspect_topic(directory, "orders", 1));
    queue.add_topic(inspect_topic(directory, "clicks", 2));
    auto consumer = queue.create_pull_consumer<inspect_order>({.topic = "orders", .group = group, .batch_size = 100});
    std::vector<std::int64_t> ids;
    while (auto delivered = consumer.try_consume()) {
        for (const inspect_order& each : *delivered) {
            ids.push_back(each.id);
        }
        REQUIRE_FALSE(commit_now(consumer, io));
    }
    return ids;
}

/// The folder of partition `partition` of `topic`.
inline std::filesystem::path inspect_partition(const std::filesystem::path& directory, const std::string& topic,
                                               std::size_t partition = 0)
{
    std::string number = std::to_string(partition);
    number.insert(0, 5 - number.size(), '0');
    return directory / topic / ("partition-" + number);
}

/// Flips every bit of the byte at `offset` of the file at `path`.
inline void flip_byte(const std::filesystem::path& path, std::size_t offset)
{
    std::vector<unsigned char> bytes = file_bytes(path);
    REQUIRE(offset < bytes.size());
    bytes[offset] ^= 0xFFU;
    write_file(path, bytes);
}

/// Writes a partial record (a length, no valid checksum) right after the last record of segment 1 of
/// "orders" (7 records: 5 in segment 0, 2 in segment 1, so the tail is at byte 40 + 2 * 40 = 120),
/// as a crash in the middle of a write leaves it: past everything flushed.
inline void write_torn_tail(const std::filesystem::path& directory)
{
    const std::filesystem::path segment = segment_path(inspect_partition(directory, "orders"), 1);
    std::vector<unsigned char> bytes = file_bytes(segment);
    REQUIRE(bytes.size() == inspect_segment_size);
    bytes[120] = 25;  // length 25, checksum never written
    bytes[128] = '{';
    write_file(segment, bytes);
}

/// Moves the folder of `topic` out of the data folder `directory` to `target` and leaves a symbolic link
/// to it in its place, as an operator does who moves one topic to another disk.
inline void move_topic_behind_link(const std::filesystem::path& directory, const std::string& topic,
                                   const std::filesystem::path& target)
{
    std::filesystem::rename(directory / topic, target);
    std::filesystem::create_directory_symlink(target, directory / topic);
}

/// Copies partition 1 of "clicks" to `partition-000001` (six digits: not the canonical name of any
/// partition, which is `partition-00001`) and returns that stray folder.
inline std::filesystem::path add_stray_partition_folder(const std::filesystem::path& directory)
{
    const std::filesystem::path stray = directory / "clicks" / "partition-000001";
    std::filesystem::copy(inspect_partition(directory, "clicks", 1), stray, std::filesystem::copy_options::recursive);
    return stray;
}

/// Cuts the file at `path` to 0 bytes.
inline void empty_file(const std::filesystem::path& path)
{
    std::filesystem::resize_file(path, 0);
}

}  // namespace bufferqueue::test
