// Tests of pull_consumer::skip(): stepping past a record that does not decode, which otherwise
// blocks its partition for the group (every consume fails on it again), under manual and auto
// commit, across a restart, and the cases where there is nothing to skip.
#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/memory/memory_topic.hpp"
#include "bufferqueue/mmap/mmap_topic.hpp"

#include "catch.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace skip_test {

namespace {

namespace bq = bufferqueue;
using bq::test::commit_now;
using bq::test::temporary_directory;

using poisoned_serializer = bq::test::poisoned_string_serializer;

bq::mmap_topic_options<std::string> events_topic(const temporary_directory& directory)
{
    return {.name = "events",
            .partitions = 1,
            .data_directory = directory.path(),
            .segment_size = 4096,
            .serializer = poisoned_serializer{}};
}

struct skip_outcome {
    boost::system::error_code error = bq::errc::invalid_argument;
    bq::skipped_record skipped{};
};

/// Runs `consumer.skip()` on `io` to completion.
skip_outcome skip_now(bq::pull_consumer<std::string>& consumer, boost::asio::io_context& io)
{
    skip_outcome outcome;
    bool completed = false;
    consumer.skip([&](boost::system::error_code error, bq::skipped_record skipped) {
        outcome = {error, skipped};
        completed = true;
    });
    io.run();
    io.restart();
    REQUIRE(completed);
    return outcome;
}

/// The code `try_consume` throws with (none when it returns).
std::error_code consume_error(bq::pull_consumer<std::string>& consumer)
{
    try {
        (void)consumer.try_consume();
    } catch (const bq::error& failure) {
        return failure.code();
    }
    return {};
}

std::vector<std::string> values(const std::optional<bq::batch<std::string>>& delivered)
{
    REQUIRE(delivered);
    return {delivered->begin(), delivered->end()};
}

}  // namespace

TEST_CASE("skip: a consumer steps past a record that does not decode and receives the records after it",
          "[consumer][mmap]")
{
    const temporary_directory directory;
    boost::asio::io_context io;
    const bool auto_commit = GENERATE(false, true);
    INFO("auto_commit: " << auto_commit);
    {
        bq::buffer_queue queue(io.get_executor());
        queue.add_topic(events_topic(directory));
        auto producer = queue.producer<std::string>("events");
        REQUIRE(producer.try_produce(std::vector<std::string>{"first", "poison", "last", "after"}));
        auto consumer =
            queue.create_pull_consumer<std::string>({.topic = "events", .group = "g", .auto_commit = auto_commit});
        CHECK(values(consumer.try_consume()) == std::vector<std::string>{"first"});
        if (!auto_commit) {
            REQUIRE_FALSE(commit_now(consumer, io));
        }
        // Without skip the record blocks the partition: every consume fails on it again.
        CHECK(consume_error(consumer) == bq::errc::corrupt_data);
        CHECK(consume_error(consumer) == bq::errc::corrupt_data);
        CHECK(consumer.lag() == 3);

        // unreadable_record() describes it without committing anything.
        const std::optional<bq::skipped_record> described = consumer.unreadable_record();
        REQUIRE(described);
        CHECK(std::string(reinterpret_cast<const char*>(described->payload.data()), described->payload.size()) ==
              "poison");
        CHECK(consumer.lag() == 3);

        const skip_outcome outcome = skip_now(consumer, io);
        REQUIRE_FALSE(outcome.error);
        CHECK(outcome.skipped.partition == 0);
        CHECK(outcome.skipped.offset > 0);  // after the record "first"
        CHECK(outcome.skipped.next_offset > outcome.skipped.offset);
        CHECK(outcome.skipped.offset == described->offset);
        CHECK(outcome.skipped.payload == described->payload);
        CHECK(consumer.lag() == 2);  // the skipped record counts as committed
        // Skipping again has nothing to step past: the failure was consumed.
        CHECK(skip_now(consumer, io).error == bq::errc::nothing_to_skip);
    }
    // The skip is the group's committed position: it survives a restart.
    bq::buffer_queue reopened(io.get_executor());
    reopened.add_topic(events_topic(directory));
    auto consumer = reopened.create_pull_consumer<std::string>({.topic = "events", .group = "g"});
    CHECK(values(consumer.try_consume()) == std::vector<std::string>{"last", "after"});
}

TEST_CASE("skip: a record that does not decode is found in its own partition, and the ring moves past it",
          "[consumer][mmap]")
{
    // One consumer over 3 partitions: 0 empty, 1 holding the poison, 2 a good record. The scan starts
    // at partition 0 and fails at 1: the failure must name partition 1 (not where the scan started),
    // and the next consume must go on at partition 2 instead of failing on 1 again.
    const temporary_directory directory;
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    auto options = events_topic(directory);
    options.partitions = 3;
    options.partition_key = [](const std::string& item) -> std::int64_t {
        return item == "poison" ? 2 : 3;  // key k: partition k - 1
    };
    queue.add_topic(std::move(options));
    auto producer = queue.producer<std::string>("events");
    REQUIRE(producer.try_produce(std::vector<std::string>{"poison", "good"}));
    auto consumer = queue.create_pull_consumer<std::string>({.topic = "events", .group = "g"});

    CHECK(consume_error(consumer) == bq::errc::corrupt_data);
    const std::optional<bq::skipped_record> described = consumer.unreadable_record();
    REQUIRE(described);
    CHECK(described->partition == 1);
    const std::optional<bq::batch<std::string>> next = consumer.try_consume();
    CHECK(values(next) == std::vector<std::string>{"good"});
    CHECK(next->partition() == 2);
}

TEST_CASE("skip: nothing to skip after a consume that succeeded, on memory topics and on a damaged record frame",
          "[consumer][mmap][memory]")
{
    boost::asio::io_context io;
    SECTION("after a successful consume, and before any")
    {
        const temporary_directory directory;
        bq::buffer_queue queue(io.get_executor());
        queue.add_topic(events_topic(directory));
        auto producer = queue.producer<std::string>("events");
        REQUIRE(producer.try_produce(std::string("fine")));
        auto consumer = queue.create_pull_consumer<std::string>({.topic = "events", .group = "g"});
        CHECK(skip_now(consumer, io).error == bq::errc::nothing_to_skip);
        CHECK(values(consumer.try_consume()) == std::vector<std::string>{"fine"});
        CHECK(skip_now(consumer, io).error == bq::errc::nothing_to_skip);
        CHECK_FALSE(consumer.unreadable_record());
        CHECK(values(consumer.try_consume()) == std::vector<std::string>{"fine"});  // nothing was committed
    }
    SECTION("a memory topic stores no encoded records")
    {
        bq::buffer_queue queue(io.get_executor());
        queue.add_topic(bq::memory_topic_options<std::string>{.name = "events"});
        auto consumer = queue.create_pull_consumer<std::string>({.topic = "events", .group = "g"});
        CHECK_FALSE(consumer.try_consume());
        CHECK(skip_now(consumer, io).error == bq::errc::nothing_to_skip);
    }
    SECTION("a record whose frame fails its checksum has no trustworthy end")
    {
        // Damaged while the queue runs (a damaged flushed record fails the next open instead).
        const temporary_directory directory;
        bq::buffer_queue queue(io.get_executor());
        queue.add_topic(events_topic(directory));
        auto producer = queue.producer<std::string>("events");
        REQUIRE(producer.try_produce(std::vector<std::string>{"first", "damaged", "last"}));
        const std::filesystem::path segment =
            bq::test::segment_path(directory.path() / "events" / "partition-00000", 0);
        const std::vector<unsigned char> bytes = bq::test::file_bytes(segment);
        const std::string marker = "damaged";
        const auto found = std::search(bytes.begin(), bytes.end(), marker.begin(), marker.end());
        REQUIRE(found != bytes.end());
        {
            // In place, never truncating: the file is mapped.
            std::fstream file(segment, std::ios::binary | std::ios::in | std::ios::out);
            REQUIRE(file);
            file.seekp(found - bytes.begin());
            file.put(static_cast<char>(*found ^ 0xFF));  // the payload no longer matches its checksum
            REQUIRE(file);
        }
        auto consumer = queue.create_pull_consumer<std::string>({.topic = "events", .group = "g"});
        CHECK(values(consumer.try_consume()) == std::vector<std::string>{"first"});
        REQUIRE_FALSE(commit_now(consumer, io));
        CHECK(consume_error(consumer) == bq::errc::corrupt_data);
        CHECK(skip_now(consumer, io).error == bq::errc::nothing_to_skip);
        CHECK(consume_error(consumer) == bq::errc::corrupt_data);  // still there: nothing was skipped
    }
}

TEST_CASE("skip: fails with closed once the consumer is closed", "[consumer][mmap]")
{
    const temporary_directory directory;
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(events_topic(directory));
    auto producer = queue.producer<std::string>("events");
    REQUIRE(producer.try_produce(std::string("poison")));
    auto consumer = queue.create_pull_consumer<std::string>({.topic = "events", .group = "g"});
    CHECK(consume_error(consumer) == bq::errc::corrupt_data);
    consumer.close();
    CHECK(skip_now(consumer, io).error == bq::errc::closed);
}

}  // namespace skip_test
