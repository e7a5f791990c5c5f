// Consumer-group lifecycle: a closed group can be opened again and resumes from its committed
// position, `remove_group` stops a group from pinning capacity and retention (and deletes its
// checkpoints on a persistent topic), and creating a group is all or nothing.
#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/memory/memory_topic.hpp"
#include "bufferqueue/mmap/mmap_topic.hpp"

#include "bufferqueue/mmap/detail/file.hpp"

#include "catch.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/io_context.hpp>

#include <cerrno>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace group_lifecycle_test {

namespace {

namespace bq = bufferqueue;
namespace fs = std::filesystem;

using bufferqueue::test::commit_now;
using bufferqueue::test::error_from;
using bufferqueue::test::items_of;
using bufferqueue::test::missing_from;
using bufferqueue::test::segment_indices;
using bufferqueue::test::temporary_directory;

bq::mmap_topic_options<int> persistent_numbers(const temporary_directory& directory, std::size_t partitions = 1)
{
    return {.name = "numbers", .partitions = partitions, .data_directory = directory.path(), .segment_size = 4096};
}

bq::pull_consumer_options manual(std::string group, std::size_t batch_size = 2)
{
    return {.topic = "numbers", .group = std::move(group), .auto_commit = false, .batch_size = batch_size};
}

// Reopening after close: the committed batch is not delivered again, the uncommitted one is.
void check_reopen_resumes(bq::buffer_queue& queue, boost::asio::io_context& io)
{
    auto producer = queue.producer<int>("numbers");
    REQUIRE(producer.try_produce(std::vector<int>{1, 2, 3, 4, 5, 6}));
    {
        auto consumer = queue.create_pull_consumer<int>(manual("g"));
        CHECK(items_of(consumer.try_consume()) == std::vector<int>{1, 2});
        REQUIRE_FALSE(commit_now(consumer, io));
        CHECK(items_of(consumer.try_consume()) == std::vector<int>{3, 4});  // not committed
        consumer.close();
        // Closed but still alive: the group may be opened again.
        auto again = queue.create_pull_consumer<int>(manual("g"));
        CHECK(items_of(again.try_consume()) == std::vector<int>{3, 4});
        REQUIRE_FALSE(commit_now(again, io));
        CHECK(items_of(again.try_consume()) == std::vector<int>{5, 6});
        // `consumer` is destroyed after `again` was created: it must not disturb the reopened group.
    }
    // Every consumer destroyed (which closes them): the group opens once more, at 5.
    auto last = queue.create_pull_consumer<int>(manual("g"));
    CHECK(items_of(last.try_consume()) == std::vector<int>{5, 6});
}

void check_open_group_is_refused(bq::buffer_queue& queue)
{
    auto consumers = queue.create_pull_consumers<int>(manual("pair"), 2);
    consumers[0].close();
    const auto failure = error_from([&] { (void)queue.create_pull_consumer<int>(manual("pair")); });
    REQUIRE(failure);
    CHECK(failure->code() == bq::errc::group_exists);  // consumers[1] is still open
    consumers[1].close();
    CHECK_NOTHROW(queue.create_pull_consumers<int>(manual("pair"), 2));
}

void check_remove_refused_while_open(bq::buffer_queue& queue)
{
    auto consumer = queue.create_pull_consumer<int>(manual("busy"));
    const auto failure = error_from([&] { (void)queue.remove_group<int>("numbers", "busy"); });
    REQUIRE(failure);
    CHECK(failure->code() == bq::errc::group_in_use);
    CHECK(missing_from(failure->what(), {"'numbers'", "'busy'", "open"}) == "");
    consumer.close();
    CHECK(queue.remove_group<int>("numbers", "busy"));
    CHECK_FALSE(queue.remove_group<int>("numbers", "busy"));  // nothing left to remove
}

}  // namespace

TEST_CASE("group lifecycle: a closed memory group can be created again and resumes from its commit",
          "[memory][consumer][groups]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(bq::memory_topic_options<int>{.name = "numbers"});
    check_reopen_resumes(queue, io);
}

TEST_CASE("group lifecycle: a closed persistent group can be created again and resumes from its commit",
          "[mmap][consumer][groups]")
{
    const temporary_directory directory;
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(persistent_numbers(directory));
    check_reopen_resumes(queue, io);
}

TEST_CASE("group lifecycle: while any consumer of a group is open, creating it again fails with group_exists",
          "[memory][mmap][consumer][groups]")
{
    const temporary_directory directory;
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    SECTION("memory")
    {
        queue.add_topic(bq::memory_topic_options<int>{.name = "numbers", .partitions = 2});
        check_open_group_is_refused(queue);
    }
    SECTION("mmap")
    {
        queue.add_topic(persistent_numbers(directory, 2));
        check_open_group_is_refused(queue);
    }
}

TEST_CASE("group lifecycle: remove_group is refused naming topic and group while a consumer is open",
          "[memory][mmap][consumer][groups]")
{
    const temporary_directory directory;
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    SECTION("memory")
    {
        queue.add_topic(bq::memory_topic_options<int>{.name = "numbers"});
        check_remove_refused_while_open(queue);
    }
    SECTION("mmap")
    {
        queue.add_topic(persistent_numbers(directory));
        check_remove_refused_while_open(queue);
    }
    const auto unknown_topic = error_from([&] { (void)queue.remove_group<int>("missing", "g"); });
    REQUIRE(unknown_topic);
    CHECK(unknown_topic->code() == bq::errc::no_such_topic);
}

TEST_CASE("group lifecycle: removing a closed group gives its capacity back to a bounded memory topic",
          "[memory][capacity][groups]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(
        bq::memory_topic_options<int>{.name = "numbers", .bounded_capacity = 4, .full_mode = bq::full_mode::fail});
    auto producer = queue.producer<int>("numbers");
    queue.create_pull_consumer<int>(manual("idle")).close();
    auto reader = queue.create_pull_consumer<int>(manual("reader", 10));
    REQUIRE(producer.try_produce(std::vector<int>{1, 2, 3, 4}));
    CHECK(items_of(reader.try_consume()) == std::vector<int>{1, 2, 3, 4});
    REQUIRE_FALSE(commit_now(reader, io));
    CHECK_FALSE(producer.try_produce(5));  // the closed group "idle" still holds all 4 items

    CHECK(queue.remove_group<int>("numbers", "idle"));
    REQUIRE(producer.try_produce(std::vector<int>{5, 6, 7, 8}));  // the room came back
    CHECK(items_of(reader.try_consume()) == std::vector<int>{5, 6, 7, 8});
    // A group created again under the removed name is a new group: it starts where capacity was
    // last given back, not at the removed group's old position.
    auto fresh = queue.create_pull_consumer<int>(manual("idle", 10));
    CHECK(items_of(fresh.try_consume()) == std::vector<int>{5, 6, 7, 8});
}

TEST_CASE("group lifecycle: removing a persistent group deletes its checkpoints and unpins retention", "[mmap][groups]")
{
    const temporary_directory directory;
    boost::asio::io_context io;
    const fs::path partition = directory.path() / "numbers" / "partition-00000";
    {
        bq::buffer_queue queue(io.get_executor());
        auto options = persistent_numbers(directory);
        options.segment_size = 128;  // a few records per segment
        options.max_retained_consumed_segments = 0;
        queue.add_topic(options);
        auto producer = queue.producer<int>("numbers");
        queue.create_pull_consumer<int>(manual("idle")).close();
        auto reader = queue.create_pull_consumer<int>(manual("reader", 1000));
        std::vector<int> items(40);
        for (std::size_t i = 0; i < items.size(); ++i) {
            items[i] = static_cast<int>(i);
        }
        REQUIRE(producer.try_produce(std::span<const int>(items)));
        while (auto delivered = reader.try_consume()) {
            REQUIRE_FALSE(commit_now(reader, io));
        }
        const std::size_t pinned = segment_indices(partition).size();
        REQUIRE(pinned > 2);  // "idle" holds every segment
        REQUIRE(fs::is_directory(partition / "offsets" / "idle"));

        CHECK(queue.remove_group<int>("numbers", "idle"));
        CHECK_FALSE(fs::exists(partition / "offsets" / "idle"));
        CHECK_FALSE(fs::exists(partition / "offsets" / "idle.tmp"));
        CHECK(segment_indices(partition).size() < pinned);
    }
    // The removal is durable: after a restart the group is unknown, so it starts again at the
    // earliest retained record instead of record 0.
    bq::buffer_queue queue(io.get_executor());
    auto options = persistent_numbers(directory);
    options.segment_size = 128;
    options.max_retained_consumed_segments = 0;
    queue.add_topic(options);
    CHECK_FALSE(fs::exists(partition / "offsets" / "idle"));
    auto fresh = queue.create_pull_consumer<int>(manual("idle", 1000));
    const auto delivered = fresh.try_consume();
    REQUIRE(delivered);
    CHECK(delivered->front() > 0);
}

TEST_CASE("group lifecycle: a removal interrupted after its rename leaves no group after recovery", "[mmap][groups]")
{
    const temporary_directory directory;
    boost::asio::io_context io;
    const fs::path offsets = directory.path() / "numbers" / "partition-00000" / "offsets";
    {
        bq::buffer_queue queue(io.get_executor());
        queue.add_topic(persistent_numbers(directory));
        REQUIRE(queue.producer<int>("numbers").try_produce(std::vector<int>{1, 2}));
        auto consumer = queue.create_pull_consumer<int>(manual("g"));
        (void)consumer.try_consume();
        REQUIRE_FALSE(commit_now(consumer, io));
    }
    // The state a crash between remove_group's rename and its deletion leaves.
    fs::rename(offsets / "g", offsets / "g.tmp");
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(persistent_numbers(directory));
    CHECK_FALSE(fs::exists(offsets / "g.tmp"));
    auto consumer = queue.create_pull_consumer<int>(manual("g"));
    CHECK(items_of(consumer.try_consume()) == std::vector<int>{1, 2});  // a new group again
}

TEST_CASE("group lifecycle: a group whose checkpoint fails in one partition is created nowhere", "[mmap][groups]")
{
    const temporary_directory directory;
    boost::asio::io_context io;
    const fs::path topic = directory.path() / "numbers";
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(persistent_numbers(directory, 3));
    {
        bq::detail::file_hooks hooks;
        hooks.before_operation = [](bq::detail::file_operation operation, const std::string& path) {
            const bool last_partition_group = path.find("partition-00002/offsets/g") != std::string::npos;
            return operation == bq::detail::file_operation::rename && last_partition_group ? EIO : 0;
        };
        const bq::detail::scoped_file_hooks installed(std::move(hooks));
        const auto failure = error_from([&] { (void)queue.create_pull_consumers<int>(manual("g"), 3); });
        REQUIRE(failure);
        CHECK(failure->code() == bq::errc::io_error);
        CHECK(missing_from(failure->what(), {"'numbers'", "'g'", "partition 2", "partition-00002/offsets/g"}) == "");
    }
    for (const char* partition : {"partition-00000", "partition-00001", "partition-00002"}) {
        INFO(partition);
        CHECK_FALSE(fs::exists(topic / partition / "offsets" / "g"));
    }
    // Nothing half-created stays behind: the group can be created now that the disk works.
    auto consumers = queue.create_pull_consumers<int>(manual("g"), 3);
    CHECK(consumers.size() == 3);
    CHECK(fs::is_directory(topic / "partition-00002" / "offsets" / "g"));
}

TEST_CASE("group lifecycle: a close racing a consume on another thread lets the group be opened again",
          "[memory][consumer][groups][concurrency]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(bq::memory_topic_options<int>{.name = "numbers", .partitions = 2});
    auto producer = queue.producer<int>("numbers");
    int delivered_batches = 0;
    int aborted = 0;
    for (int round = 0; round < 200; ++round) {
        auto consumer = queue.create_pull_consumer<int>(manual("racing", 1));
        if (round % 2 == 0) {
            REQUIRE(producer.try_produce(round));  // sometimes there is a batch to hand out
        }
        boost::system::error_code result;
        bool completed = false;
        consumer.consume([&](boost::system::error_code error, bq::batch<int>) {
            result = error;
            completed = true;
        });
        std::thread runner([&] { io.run(); });
        consumer.close();
        runner.join();
        io.restart();
        io.run();  // a completion posted by close() after the runner finished
        io.restart();
        REQUIRE(completed);
        (result ? aborted : delivered_batches) += 1;
        // A consume that handed out a batch as close() began keeps it valid: the group counts as
        // closed from the next close() (or the destruction) on.
        consumer.close();
        CHECK_NOTHROW(queue.create_pull_consumer<int>(manual("racing", 1)).close());
    }
    CHECK(delivered_batches + aborted == 200);
}

}  // namespace group_lifecycle_test
