// Kafka topics: a record that does not decode stays where it is, as on persistent topics - every
// consume of the group fails on it until `skip()` (or a consumer's dead-letter topic) steps past it,
// so it is never dropped silently.
#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/dead_letter.hpp"
#include "bufferqueue/kafka.hpp"
#include "bufferqueue/memory/memory_topic.hpp"

#include "catch.hpp"
#include "kafka_test_support.hpp"
#include "test_support.hpp"

#include <utility>  // before the Asio coroutine headers (GCC 12)

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace kafka_undecodable_test {

namespace {

namespace bq = bufferqueue;
using bq::test::run_until;
using letter = bq::dead_letter<std::string>;

struct consume_outcome {
    boost::system::error_code error;
    std::vector<std::string> items;
};

consume_outcome consume_one(boost::asio::io_context& io, bq::pull_consumer<std::string>& consumer)
{
    std::optional<consume_outcome> outcome;
    consumer.consume([&](boost::system::error_code error, bq::batch<std::string> delivered) {
        outcome = consume_outcome{error, {delivered.begin(), delivered.end()}};
    });
    REQUIRE(run_until(io, [&] { return outcome.has_value(); }));
    return *outcome;
}

boost::system::error_code commit_one(boost::asio::io_context& io, bq::pull_consumer<std::string>& consumer)
{
    std::optional<boost::system::error_code> result;
    consumer.commit([&](boost::system::error_code error) { result = error; });
    REQUIRE(run_until(io, [&] { return result.has_value(); }));
    return *result;
}

}  // namespace

TEST_CASE("a kafka record that does not decode fails every consume until the consumer's dead-letter topic takes it",
          "[kafka][slow][dead_letter]")
{
    const std::string topic = bq::test::unique_topic("undecodable");
    bq::test::shared_kafka_cluster().create_topic(topic, 1);
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(
        bq::kafka_topic_options<std::string>{.name = topic,
                                             .partitions = 1,
                                             .bootstrap_servers = bq::test::shared_kafka_cluster().bootstrap_servers(),
                                             .serializer = bq::test::poisoned_string_serializer{},
                                             .properties = bq::test::group_properties()});
    queue.add_topic(bq::memory_topic_options<letter>{.name = "dead"});
    auto producer = queue.producer<std::string>(topic);
    std::optional<boost::system::error_code> produced;
    producer.produce(std::vector<std::string>{"first", "poison", "last"},
                     [&](boost::system::error_code error) { produced = error; });
    REQUIRE(run_until(io, [&] { return produced.has_value(); }));
    REQUIRE_FALSE(*produced);

    auto consumer =
        queue.create_pull_consumer<std::string>({.topic = topic, .group = "g", .dead_letter_topic = "dead"});
    REQUIRE(run_until(
        io, [&] { return consumer.partitions().size() == 1; }, std::chrono::seconds(20)));
    consume_outcome outcome = consume_one(io, consumer);
    REQUIRE_FALSE(outcome.error);
    CHECK(outcome.items == std::vector<std::string>{"first"});
    REQUIRE_FALSE(commit_one(io, consumer));

    // try_consume does not route: the record stays and fails every pull (nothing goes past it).
    for (int attempt = 0; attempt < 2; ++attempt) {
        const auto failure = bq::test::error_from([&] { (void)consumer.try_consume(); });
        REQUIRE(failure);
        CHECK(failure->code() == bq::errc::corrupt_data);
        CHECK_THAT(failure->what(), Catch::Contains("partition 0 offset 1"));
    }
    const std::optional<bq::skipped_record> described = consumer.unreadable_record();
    REQUIRE(described);
    CHECK(described->offset == 1);
    CHECK(described->next_offset == 2);
    CHECK(std::string(reinterpret_cast<const char*>(described->payload.data()), described->payload.size()) == "poison");

    // consume() sends it to the dead-letter topic, steps past it and delivers the rest.
    outcome = consume_one(io, consumer);
    REQUIRE_FALSE(outcome.error);
    CHECK(outcome.items == std::vector<std::string>{"last"});
    auto reader = queue.create_pull_consumer<letter>({.topic = "dead", .group = "ops", .auto_commit = true});
    const std::optional<bq::batch<letter>> letters = reader.try_consume();
    REQUIRE(letters);
    REQUIRE(letters->size() == 1);
    const letter& sent = (*letters)[0];
    CHECK_FALSE(sent.item);
    CHECK(std::string(reinterpret_cast<const char*>(sent.payload.data()), sent.payload.size()) == "poison");
    CHECK(sent.topic == topic);
    CHECK(sent.partition == 0);
    CHECK(sent.offset == std::optional<std::uint64_t>(1));
    consumer.close();
}

}  // namespace kafka_undecodable_test
