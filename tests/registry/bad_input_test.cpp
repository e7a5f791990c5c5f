// Bad input at the API that the option and registry tests do not cover: a serializer, deserializer
// or key selector that throws, a record that does not decode among readable partitions, option
// values outside their enum, a key selector returning a null string, names of only whitespace.
// Each gives a clear error, stores and acknowledges nothing it should not, and leaves the queue
// usable. (Other invalid options, zero partitions, batch size 0, too many consumers and
// path-escaping names: buffer_queue_test.cpp and mmap_topic_test.cpp.)
#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/memory/memory_topic.hpp"

#include "bufferqueue/mmap/mmap_topic.hpp"

#include "catch.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <cstddef>
#include <exception>
#include <filesystem>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace bad_input_test {

namespace {

using bufferqueue::test::commit_now;
using bufferqueue::test::string_bytes_serializer;
using bufferqueue::test::temporary_directory;

namespace bq = bufferqueue;

// Stores strings as bytes; throws on the item (or the payload) "poison".
struct poisoned_serializer {
    bool throw_on_read = false;

    void serialize(const std::string& item, std::vector<std::byte>& out) const
    {
        if (item == "poison" && !throw_on_read) {
            throw std::runtime_error("cannot serialize poison");
        }
        string_bytes_serializer{}.serialize(item, out);
    }

    std::string deserialize(std::span<const std::byte> bytes) const
    {
        std::string item = string_bytes_serializer{}.deserialize(bytes);
        if (item == "poison" && throw_on_read) {
            throw std::runtime_error("cannot deserialize poison");
        }
        return item;
    }
};

bq::mmap_topic_options<std::string> poisoned_topic(const temporary_directory& directory, bool throw_on_read,
                                                   std::size_t partitions = 1)
{
    return {.name = "events",
            .partitions = partitions,
            .data_directory = directory.path(),
            .segment_size = 4096,
            .serializer = poisoned_serializer{.throw_on_read = throw_on_read}};
}

std::vector<std::string> drain(bq::pull_consumer<std::string>& consumer, boost::asio::io_context& io)
{
    std::vector<std::string> items;
    while (auto batch = consumer.try_consume()) {
        items.insert(items.end(), batch->begin(), batch->end());
        REQUIRE_FALSE(commit_now(consumer, io));
    }
    return items;
}

}  // namespace

TEST_CASE("bad input: a serializer that throws fails the produce and the topic keeps working", "[mmap][bad_input]")
{
    const temporary_directory directory;
    boost::asio::io_context io;
    {
        bq::buffer_queue queue(io.get_executor());
        queue.add_topic(poisoned_topic(directory, false));
        auto producer = queue.producer<std::string>("events");
        auto consumer = queue.create_pull_consumer<std::string>({.topic = "events", .group = "g"});
        REQUIRE(producer.try_produce(std::string("before")));
        CHECK_THROWS_WITH(producer.try_produce(std::string("poison")), Catch::Contains("cannot serialize poison"));
        // The async form completes with the error instead of throwing from a pool thread.
        bool completed = false;
        std::exception_ptr failure;
        producer.produce(std::string("poison"), [&](boost::system::error_code error) {
            completed = true;
            CHECK(error);
        });
        try {
            io.run();
        } catch (...) {
            failure = std::current_exception();
        }
        io.restart();
        CHECK(completed);
        CHECK_FALSE(failure);
        REQUIRE(producer.try_produce(std::string("after")));
        CHECK(drain(consumer, io) == std::vector<std::string>{"before", "after"});
    }
    // Nothing of the failed produce reached the disk.
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(poisoned_topic(directory, false));
    auto fresh = queue.create_pull_consumer<std::string>({.topic = "events", .group = "fresh"});
    CHECK(drain(fresh, io) == std::vector<std::string>{"before", "after"});
}

TEST_CASE("bad input: a deserializer that throws fails the consume naming the topic and the record",
          "[mmap][bad_input]")
{
    const temporary_directory directory;
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(poisoned_topic(directory, true));
    auto producer = queue.producer<std::string>("events");
    REQUIRE(producer.try_produce(std::vector<std::string>{"first", "poison", "last"}));

    SECTION("try_consume delivers the records before it, then throws corrupt_data")
    {
        auto consumer = queue.create_pull_consumer<std::string>({.topic = "events", .group = "g"});
        auto batch = consumer.try_consume();
        REQUIRE(batch);
        CHECK(std::vector<std::string>(batch->begin(), batch->end()) == std::vector<std::string>{"first"});
        REQUIRE_FALSE(commit_now(consumer, io));
        try {
            (void)consumer.try_consume();
            FAIL("a record that cannot be decoded was delivered");
        } catch (const bq::error& failure) {
            CHECK(failure.code() == bq::errc::corrupt_data);
            const std::string message = failure.what();
            CHECK(message.find("topic 'events'") != std::string::npos);
            // The storage's own description survives: the file and offset of the record.
            CHECK(message.find("cannot decode the record at offset") != std::string::npos);
            CHECK(message.find(".log") != std::string::npos);
        }
    }
    SECTION("an awaited consume completes with corrupt_data instead of terminating a thread")
    {
        auto consumer = queue.create_pull_consumer<std::string>({.topic = "events", .group = "g", .batch_size = 1});
        REQUIRE(consumer.try_consume());
        REQUIRE_FALSE(commit_now(consumer, io));
        bool completed = false;
        boost::system::error_code result;
        consumer.consume([&](boost::system::error_code error, bq::batch<std::string>) {
            completed = true;
            result = error;
        });
        io.run();
        io.restart();
        CHECK(completed);
        CHECK(result == bq::errc::corrupt_data);
    }
    // Another topic of the same queue is unaffected.
    queue.add_topic(bq::memory_topic_options<std::string>{.name = "other"});
    auto other = queue.producer<std::string>("other");
    REQUIRE(other.try_produce(std::string("fine")));
    auto reader = queue.create_pull_consumer<std::string>({.topic = "other", .group = "g"});
    CHECK(drain(reader, io) == std::vector<std::string>{"fine"});
}

TEST_CASE("bad input: a key selector that throws on a persistent topic stores nothing of the batch",
          "[mmap][bad_input]")
{
    const temporary_directory directory;
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    auto options = poisoned_topic(directory, false, 4);
    options.partition_key = [](const std::string& item) -> std::uint64_t {
        if (item == "bad key") {
            throw std::invalid_argument("no key for 'bad key'");
        }
        return item.size();
    };
    queue.add_topic(options);
    auto producer = queue.producer<std::string>("events");
    auto consumer = queue.create_pull_consumer<std::string>({.topic = "events", .group = "g"});
    CHECK_THROWS_WITH(producer.try_produce(std::vector<std::string>{"a", "bb", "bad key", "ccc"}),
                      Catch::Contains("no key for 'bad key'"));
    CHECK_FALSE(consumer.try_consume());
    REQUIRE(producer.try_produce(std::vector<std::string>{"a", "bb"}));
    std::vector<std::string> items = drain(consumer, io);
    std::sort(items.begin(), items.end());
    CHECK(items == std::vector<std::string>{"a", "bb"});
}

// ---- a record that does not decode ---------------------------------------------------------------

namespace {

// Two partitions: keys 1 route to partition 0, keys 2 to partition 1. "poison" goes to partition 0.
bq::mmap_topic_options<std::string> two_partition_poison_topic(const temporary_directory& directory)
{
    auto options = poisoned_topic(directory, true, 2);
    options.partition_key = [](const std::string& item) -> int { return item == "poison" ? 1 : 2; };
    return options;
}

}  // namespace

TEST_CASE("bad input: a record that does not decode fails only its partition, and the others are still read",
          "[mmap][bad_input][consumer]")
{
    const temporary_directory directory;
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(two_partition_poison_topic(directory));
    auto producer = queue.producer<std::string>("events");
    REQUIRE(producer.try_produce(std::vector<std::string>{"poison", "a", "b", "c"}));
    auto consumer = queue.create_pull_consumer<std::string>(
        {.topic = "events", .group = "g", .auto_commit = true, .batch_size = 1});
    REQUIRE(consumer.partitions().size() == 2);

    std::vector<std::string> delivered;
    int failures = 0;
    for (int attempt = 0; attempt < 12 && delivered.size() < 3; ++attempt) {
        try {
            if (auto batch = consumer.try_consume()) {
                CHECK(batch->partition() == 1);
                delivered.insert(delivered.end(), batch->begin(), batch->end());
            }
        } catch (const bq::error& failure) {
            CHECK(failure.code() == bq::errc::corrupt_data);
            CHECK(std::string(failure.what()).find("partition 0") != std::string::npos);
            ++failures;
        }
    }
    CHECK(delivered == std::vector<std::string>{"a", "b", "c"});
    CHECK(failures >= 1);
    // The bad partition keeps failing on its turn: nothing skips the record silently.
    CHECK_THROWS_AS(consumer.try_consume(), bq::error);
}

TEST_CASE("bad input: after an awaited consume fails, last_error names the topic, partition, file and offset",
          "[mmap][bad_input][consumer]")
{
    const temporary_directory directory;
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(two_partition_poison_topic(directory));
    auto producer = queue.producer<std::string>("events");
    REQUIRE(producer.try_produce(std::vector<std::string>{"poison", "a", "b"}));
    auto consumer = queue.create_pull_consumer<std::string>(
        {.topic = "events", .group = "g", .auto_commit = true, .batch_size = 1});
    CHECK(consumer.last_error().empty());

    std::optional<boost::system::error_code> awaited_code;
    std::string described;
    std::vector<std::string> delivered;
    boost::asio::co_spawn(
        io,
        [&]() -> boost::asio::awaitable<void> {
            try {
                (void)co_await consumer.consume();  // partition 0 first: the poison
            } catch (const boost::system::system_error& failure) {
                awaited_code = failure.code();
                described = consumer.last_error();
            }
            // The scan moved on: the next consumes read partition 1, and a success clears last_error.
            const bq::batch<std::string> next = co_await consumer.consume();
            delivered.assign(next.begin(), next.end());
            CHECK(consumer.last_error().empty());
        },
        [](std::exception_ptr failure) {
            if (failure) {
                std::rethrow_exception(failure);
            }
        });
    io.run();
    REQUIRE(awaited_code);
    CHECK(*awaited_code == bq::errc::corrupt_data);
    CHECK(bufferqueue::test::missing_from(described, {"topic 'events'", "group 'g'", "partition 0", ".log", "offset",
                                                      "cannot deserialize poison"}) == "");
    CHECK(delivered == std::vector<std::string>{"a"});
}

// ---- validation of options and keys ----------------------------------------------------------------

TEST_CASE("bad input: a flush_strategy outside the enum fails with invalid_argument naming option and topic",
          "[mmap][bad_input]")
{
    const temporary_directory directory;
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    auto options = poisoned_topic(directory, false);
    options.flush = static_cast<bq::flush_strategy>(7);
    const auto failure = bufferqueue::test::error_from([&] { queue.add_topic(options); });
    REQUIRE(failure);
    CHECK(failure->code() == bq::errc::invalid_argument);
    CHECK(bufferqueue::test::missing_from(failure->what(), {"'flush'", "'events'"}) == "");
    CHECK_FALSE(std::filesystem::exists(directory.path() / "events"));  // nothing was created
}

TEST_CASE("bad input: a const char* key selector returning null throws invalid_argument from produce",
          "[memory][mmap][bad_input]")
{
    const temporary_directory directory;
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    const auto null_for_empty = [](const std::string& item) -> const char* {
        return item.empty() ? nullptr : item.c_str();
    };
    queue.add_topic(
        bq::memory_topic_options<std::string>{.name = "memory", .partitions = 2, .partition_key = null_for_empty});
    auto options = poisoned_topic(directory, false, 2);
    options.partition_key = null_for_empty;
    queue.add_topic(options);
    for (const std::string topic : {"memory", "events"}) {
        INFO("topic " << topic);
        auto producer = queue.producer<std::string>(topic);
        auto consumer = queue.create_pull_consumer<std::string>({.topic = topic, .group = "g"});
        const auto from_try = bufferqueue::test::error_from([&] {
            (void)producer.try_produce(std::vector<std::string>{"x", "", "y"});
        });
        REQUIRE(from_try);
        CHECK(from_try->code() == bq::errc::invalid_argument);
        CHECK(std::string(from_try->what()).find("null") != std::string::npos);
        // Computed synchronously: the asynchronous produce throws from the call, before anything is stored.
        bool completed = false;
        const auto from_async = bufferqueue::test::error_from(
            [&] { producer.produce(std::string(), [&](boost::system::error_code) { completed = true; }); });
        REQUIRE(from_async);
        CHECK(from_async->code() == bq::errc::invalid_argument);
        io.run();
        io.restart();
        CHECK_FALSE(completed);
        CHECK_FALSE(consumer.try_consume());
    }
}

TEST_CASE("bad input: topic and group names of only whitespace fail with invalid_argument", "[memory][mmap][bad_input]")
{
    const temporary_directory directory;
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    for (const std::string blank : {" ", "   ", "\t", " \n\r\v\f "}) {
        const auto memory = bufferqueue::test::error_from(
            [&] { queue.add_topic(bq::memory_topic_options<std::string>{.name = blank}); });
        REQUIRE(memory);
        CHECK(memory->code() == bq::errc::invalid_argument);
        CHECK(std::string(memory->what()).find("'name'") != std::string::npos);
        auto options = poisoned_topic(directory, false);
        options.name = blank;
        const auto persistent = bufferqueue::test::error_from([&] { queue.add_topic(options); });
        REQUIRE(persistent);
        CHECK(persistent->code() == bq::errc::invalid_argument);
        CHECK(std::string(persistent->what()).find("'name'") != std::string::npos);
    }
    CHECK(std::filesystem::is_empty(directory.path()));  // no folder for a blank topic name
    queue.add_topic(bq::memory_topic_options<std::string>{.name = "memory"});
    queue.add_topic(poisoned_topic(directory, false));
    for (const std::string topic : {"memory", "events"}) {
        for (const std::string blank : {" ", "\t\t"}) {
            INFO("topic " << topic);
            const auto failure = bufferqueue::test::error_from(
                [&] { (void)queue.create_pull_consumer<std::string>({.topic = topic, .group = blank}); });
            REQUIRE(failure);
            CHECK(failure->code() == bq::errc::invalid_argument);
            CHECK(bufferqueue::test::missing_from(failure->what(), {"'group'", "'" + topic + "'"}) == "");
        }
        // Names with whitespace around other characters stay valid.
        CHECK_NOTHROW(queue.create_pull_consumer<std::string>({.topic = topic, .group = " worker 1 "}));
    }
}

}  // namespace bad_input_test
