// Tests of pull_consumer_options::dead_letter_topic: an awaited consume() sends a record that does
// not decode to the dead-letter topic and steps past it only once that produce is acknowledged, so
// the record is in the dead-letter topic or still unread, never neither.
#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/dead_letter.hpp"
#include "bufferqueue/memory/memory_topic.hpp"
#include "bufferqueue/mmap/mmap_topic.hpp"

#include "catch.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace dead_letter_consume_test {

namespace {

namespace bq = bufferqueue;
using bq::test::commit_now;
using bq::test::temporary_directory;
using letter = bq::dead_letter<std::string>;

bq::mmap_topic_options<std::string> events_topic(const temporary_directory& directory)
{
    return {.name = "events",
            .partitions = 1,
            .data_directory = directory.path(),
            .segment_size = 4096,
            .serializer = bq::test::poisoned_string_serializer{}};
}

struct consume_outcome {
    boost::system::error_code error = bq::errc::invalid_argument;
    std::vector<std::string> items{};
};

/// Runs `co_await consumer.consume()` in a coroutine on `io` to completion.
consume_outcome consume_awaited(bq::pull_consumer<std::string>& consumer, boost::asio::io_context& io)
{
    std::optional<consume_outcome> outcome;
    boost::asio::co_spawn(
        io,
        [&]() -> boost::asio::awaitable<void> {
            boost::system::error_code error;
            bq::batch<std::string> delivered =
                co_await consumer.consume(boost::asio::redirect_error(boost::asio::use_awaitable, error));
            outcome = consume_outcome{error, {delivered.begin(), delivered.end()}};
        },
        boost::asio::detached);
    io.run();
    io.restart();
    REQUIRE(outcome);
    return *outcome;
}

std::vector<letter> letters_in(bq::buffer_queue& queue, const std::string& topic)
{
    auto reader = queue.create_pull_consumer<letter>({.topic = topic, .group = "reader", .auto_commit = true});
    std::vector<letter> letters;
    while (std::optional<bq::batch<letter>> delivered = reader.try_consume()) {
        letters.insert(letters.end(), delivered->begin(), delivered->end());
    }
    return letters;
}

std::string text_of(const std::vector<std::byte>& bytes)
{
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace

TEST_CASE("dead-letter consume: records that do not decode go to the dead-letter topic and the consumer goes on",
          "[consumer][mmap][dead_letter]")
{
    const temporary_directory directory;
    boost::asio::io_context io;
    const bool auto_commit = GENERATE(false, true);
    INFO("auto_commit: " << auto_commit);
    {
        bq::buffer_queue queue(io.get_executor());
        queue.add_topic(events_topic(directory));
        queue.add_topic(bq::memory_topic_options<letter>{.name = "events.dead"});
        auto producer = queue.producer<std::string>("events");
        REQUIRE(producer.try_produce(std::vector<std::string>{"first", "poison", "last", "poison", "after"}));
        auto consumer = queue.create_pull_consumer<std::string>(
            {.topic = "events", .group = "g", .auto_commit = auto_commit, .dead_letter_topic = "events.dead"});

        std::vector<std::string> received;
        for (int consumes = 0; consumes < 5 && received.size() < 3; ++consumes) {
            const consume_outcome outcome = consume_awaited(consumer, io);
            REQUIRE_FALSE(outcome.error);
            REQUIRE_FALSE(outcome.items.empty());
            received.insert(received.end(), outcome.items.begin(), outcome.items.end());
            if (!auto_commit) {
                REQUIRE_FALSE(commit_now(consumer, io));
            }
        }
        CHECK(received == std::vector<std::string>{"first", "last", "after"});
        CHECK(consumer.lag() == 0);
        CHECK(consumer.last_error().empty());

        const std::vector<letter> letters = letters_in(queue, "events.dead");
        REQUIRE(letters.size() == 2);
        for (const letter& each : letters) {
            CHECK_FALSE(each.item);
            CHECK(text_of(each.payload) == "poison");
            CHECK(each.topic == "events");
            CHECK(each.partition == 0);
            CHECK(each.attempts == 1);
            CHECK(each.error.find("cannot deserialize poison") != std::string::npos);
            REQUIRE(each.offset);
        }
        CHECK(*letters[0].offset < *letters[1].offset);
        CHECK(queue.stats<std::string>("events").groups.front().dead_letters == 2);
    }
    // The steps past the records are the group's committed position: nothing comes back.
    bq::buffer_queue reopened(io.get_executor());
    reopened.add_topic(events_topic(directory));
    auto consumer = reopened.create_pull_consumer<std::string>({.topic = "events", .group = "g"});
    CHECK_FALSE(consumer.try_consume());
}

TEST_CASE("dead-letter consume: when the dead-letter produce fails the record stays unread and is sent later",
          "[consumer][mmap][dead_letter]")
{
    const temporary_directory directory;
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(events_topic(directory));
    queue.add_topic(bq::memory_topic_options<letter>{
        .name = "events.dead", .bounded_capacity = 1, .full_mode = bq::full_mode::fail});
    auto dead_letters = queue.producer<letter>("events.dead");
    auto filler = queue.create_pull_consumer<letter>({.topic = "events.dead", .group = "filler"});
    REQUIRE(dead_letters.try_produce(letter{.topic = "elsewhere"}));  // the topic is full now
    auto producer = queue.producer<std::string>("events");
    REQUIRE(producer.try_produce(std::vector<std::string>{"first", "poison", "last"}));
    auto consumer =
        queue.create_pull_consumer<std::string>({.topic = "events", .group = "g", .dead_letter_topic = "events.dead"});

    consume_outcome outcome = consume_awaited(consumer, io);
    REQUIRE_FALSE(outcome.error);
    CHECK(outcome.items == std::vector<std::string>{"first"});
    REQUIRE_FALSE(commit_now(consumer, io));

    outcome = consume_awaited(consumer, io);
    CHECK(outcome.error == bq::errc::queue_full);
    CHECK(outcome.items.empty());
    const std::string failure = consumer.last_error();
    CHECK_THAT(failure, Catch::Contains("topic 'events' group 'g'") &&
                            Catch::Contains("dead-letter topic 'events.dead'") && Catch::Contains("stays unread"));
    CHECK(consumer.lag() == 2);  // nothing was stepped past
    CHECK(queue.stats<std::string>("events").groups.front().dead_letters == 0);

    // Room again: the next consume sends the letter, steps past the record and delivers the rest.
    REQUIRE(filler.try_consume());
    REQUIRE_FALSE(commit_now(filler, io));
    outcome = consume_awaited(consumer, io);
    REQUIRE_FALSE(outcome.error);
    CHECK(outcome.items == std::vector<std::string>{"last"});
    CHECK(consumer.last_error().empty());
    const std::optional<bq::batch<letter>> sent = filler.try_consume();
    REQUIRE(sent);
    REQUIRE(sent->size() == 1);
    CHECK(text_of((*sent)[0].payload) == "poison");
    CHECK(queue.stats<std::string>("events").groups.front().dead_letters == 1);
}

TEST_CASE("dead-letter consume: a dead-letter key selector that throws fails the consume with its own message, and "
          "the record stays unread",
          "[consumer][mmap][dead_letter]")
{
    const temporary_directory directory;
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(events_topic(directory));
    bool key_throws = true;
    queue.add_topic(bq::memory_topic_options<letter>{.name = "events.dead", .partition_key = [&](const letter&) {
                                                         if (key_throws) {
                                                             throw std::runtime_error("the letter's key is broken");
                                                         }
                                                         return std::int64_t{1};
                                                     }});
    auto producer = queue.producer<std::string>("events");
    REQUIRE(producer.try_produce(std::vector<std::string>{"poison", "last"}));
    auto consumer = queue.create_pull_consumer<std::string>(
        {.topic = "events", .group = "g", .auto_commit = true, .dead_letter_topic = "events.dead"});

    consume_outcome outcome = consume_awaited(consumer, io);
    CHECK(outcome.error == bq::errc::invalid_argument);  // what a throwing key selector is, not out of memory
    CHECK(outcome.items.empty());
    CHECK_THAT(consumer.last_error(),
               Catch::Contains("topic 'events' group 'g'") && Catch::Contains("dead-letter topic 'events.dead'") &&
                   Catch::Contains("the letter's key is broken") && Catch::Contains("stays unread"));
    CHECK(consumer.lag() == 2);  // nothing was stepped past

    key_throws = false;  // the next consume routes the record and goes on
    outcome = consume_awaited(consumer, io);
    REQUIRE_FALSE(outcome.error);
    CHECK(outcome.items == std::vector<std::string>{"last"});
    CHECK(letters_in(queue, "events.dead").size() == 1);
}

TEST_CASE("dead-letter consume: a cancel while the letter is produced ends the consume once that produce ends",
          "[consumer][mmap][dead_letter]")
{
    const temporary_directory directory;
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(events_topic(directory));
    queue.add_topic(bq::memory_topic_options<letter>{
        .name = "events.dead", .bounded_capacity = 1, .full_mode = bq::full_mode::wait});
    auto filler = queue.create_pull_consumer<letter>({.topic = "events.dead", .group = "filler", .auto_commit = true});
    REQUIRE(queue.producer<letter>("events.dead").try_produce(letter{.topic = "elsewhere"}));  // full now
    REQUIRE(queue.producer<std::string>("events").try_produce(std::string("poison")));
    auto consumer = queue.create_pull_consumer<std::string>(
        {.topic = "events", .group = "g", .auto_commit = true, .dead_letter_topic = "events.dead"});

    std::optional<boost::system::error_code> result;
    consumer.consume([&](boost::system::error_code error, bq::batch<std::string>) { result = error; });
    // Run until the letter's produce waits for room in the dead-letter topic.
    for (int polls = 0; polls < 5000 && queue.stats<letter>("events.dead").waiting_producers == 0; ++polls) {
        io.run_for(std::chrono::milliseconds(1));
        io.restart();
    }
    REQUIRE(queue.stats<letter>("events.dead").waiting_producers == 1);
    consumer.cancel();
    REQUIRE(filler.try_consume());         // room again: the letter is stored, then the cancel takes effect
    io.run_for(std::chrono::seconds(10));  // a consume that went on to wait for more data would still be pending
    REQUIRE(result);
    CHECK(*result == boost::asio::error::operation_aborted);
    CHECK(consumer.lag() == 0);  // the record was routed and stepped past before the cancel ended the consume
    const std::optional<bq::batch<letter>> sent = filler.try_consume();
    REQUIRE(sent);
    CHECK(text_of((*sent)[0].payload) == "poison");
}

TEST_CASE("dead-letter consume: a waiting consume is woken by a produce, and a second consume is refused",
          "[consumer][memory][dead_letter]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(bq::memory_topic_options<std::string>{.name = "events"});
    queue.add_topic(bq::memory_topic_options<letter>{.name = "events.dead"});
    auto consumer =
        queue.create_pull_consumer<std::string>({.topic = "events", .group = "g", .dead_letter_topic = "events.dead"});
    std::optional<consume_outcome> first;
    std::optional<boost::system::error_code> second;
    consumer.consume([&](boost::system::error_code error, bq::batch<std::string> delivered) {
        first = consume_outcome{error, {delivered.begin(), delivered.end()}};
    });
    consumer.consume([&](boost::system::error_code error, bq::batch<std::string>) { second = error; });
    CHECK_FALSE(second);  // posted, never completed inside the call
    io.poll();
    io.restart();
    REQUIRE(second);
    CHECK(*second == bq::errc::operation_in_progress);
    CHECK_FALSE(first);  // still waiting: the topic is empty
    auto producer = queue.producer<std::string>("events");
    REQUIRE(producer.try_produce(std::string("hello")));
    io.run();
    REQUIRE(first);
    CHECK_FALSE(first->error);
    CHECK(first->items == std::vector<std::string>{"hello"});
}

TEST_CASE("dead-letter consume: a dead-letter topic that is missing or of another item type is refused by name",
          "[consumer][memory][dead_letter]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(bq::memory_topic_options<std::string>{.name = "events"});
    queue.add_topic(bq::memory_topic_options<std::string>{.name = "events.strings"});
    const auto missing = bq::test::error_from([&] {
        (void)queue.create_pull_consumer<std::string>(
            {.topic = "events", .group = "g", .dead_letter_topic = "events.dead"});
    });
    REQUIRE(missing);
    CHECK(missing->code() == bq::errc::no_such_topic);
    CHECK_THAT(missing->what(), Catch::Contains("topic 'events' group 'g'") && Catch::Contains("'dead_letter_topic'") &&
                                    Catch::Contains("events.dead"));
    const auto mistyped = bq::test::error_from([&] {
        (void)queue.create_pull_consumer<std::string>(
            {.topic = "events", .group = "g", .dead_letter_topic = "events.strings"});
    });
    REQUIRE(mistyped);
    CHECK(mistyped->code() == bq::errc::type_mismatch);
    CHECK_THAT(mistyped->what(), Catch::Contains("'dead_letter_topic'"));
    // Refused before the group was created: it can be created now.
    CHECK_NOTHROW(queue.create_pull_consumer<std::string>({.topic = "events", .group = "g"}));
}

}  // namespace dead_letter_consume_test
