// Bad input at the API of persistent topics that the option and registry tests do not cover: a
// serializer, deserializer or key selector that throws. Each gives a clear error, stores and
// acknowledges nothing it should not, and leaves the queue usable. (Invalid options, zero
// partitions, batch size 0, too many consumers and path-escaping names: buffer_queue_test.cpp and
// mmap_topic_test.cpp.)
#include "bufferqueue/buffer_queue.hpp"

#include "bufferqueue/mmap_topic.hpp"

#include "catch.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/io_context.hpp>

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

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
