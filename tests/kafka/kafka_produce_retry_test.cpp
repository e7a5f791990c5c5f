// Kafka topics: what librdkafka's retries do to the stored records (docs/kafka.md, "Retries, order
// and duplicates"): a retried request neither reorders the records of a key nor stores one twice,
// because the producer is idempotent by default; with `enable.idempotence=false` it does both.
//
// The mock cluster plays the broker, but librdkafka's mock checks no producer ids or sequence
// numbers of an idempotent producer: `rd_kafka_mock_validate_records` (rdkafka_mock.c) returns at
// once for a producer without a `transactional.id`, in 2.0.2 and in every later release read (up to
// 2.15), so it stores a request a Kafka broker refuses or recognises as a retry. These tests
// therefore script the broker's answer to the second produce request themselves, as a Kafka broker
// answers (KIP-98):
// - to a plain producer it is an ordinary request: served and stored (script: error 0);
// - to an idempotent producer whose earlier batch is missing it is OUT_OF_ORDER_SEQUENCE_NUMBER
//   (nothing stored), and a batch it stored already is DUPLICATE_SEQUENCE_NUMBER (nothing stored
//   again; librdkafka takes that as delivered; newer brokers answer the original offset instead).
// Which of the two the producer is, the test finds out from the cluster - an idempotent producer
// asks for a producer id (InitProducerId) before its first record, a plain one never does - not from
// the configuration, so the answers follow what the client really is.
#include "bufferqueue/kafka.hpp"

#include "bufferqueue/buffer_queue.hpp"

#include "catch.hpp"
#include "kafka_test_support.hpp"

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace kafka_produce_retry_test {

namespace {

namespace bq = bufferqueue;
using namespace std::chrono_literals;
using bq::kafka_request;
using bq::test::kafka_reader;
using bq::test::produce_and_wait;
using bq::test::quiet_properties;
using bq::test::run_until;

constexpr int not_leader_for_partition = 6;
constexpr int out_of_order_sequence_number = 45;
constexpr int duplicate_sequence_number = 46;

// A one-broker mock cluster with topic "keys" (one partition) registered in a queue; every item
// has the same key, so all go to partition 0 and must keep their produce order there.
class keyed_topic {
public:
    explicit keyed_topic(std::map<std::string, std::string> properties)
    {
        cluster_.create_topic("keys", 1);
        // A marker answer (no error, no delay), given only if the producer asks for a producer id.
        cluster_.push_broker_responses(1, kafka_request::init_producer_id, {{.error = 0}});
        queue_.add_topic(bq::kafka_topic_options<int>{.name = "keys",
                                                      .partitions = 1,
                                                      .bootstrap_servers = cluster_.bootstrap_servers(),
                                                      .partition_key = [](int) { return std::string("one key"); },
                                                      .properties = quiet_properties(std::move(properties))});
        producer_.emplace(queue_.producer<int>("keys"));
        // The first record: the client is connected and knows the leader before the faults start.
        REQUIRE(produce_and_wait(*producer_, {0}, io_) == boost::system::error_code());
        idempotent_ = cluster_.pending_broker_responses(1, kafka_request::init_producer_id) == 0;
    }

    bq::kafka_mock_cluster& cluster() { return cluster_; }
    boost::asio::io_context& io() { return io_; }
    bq::producer<int>& producer() { return *producer_; }
    // Whether the producer asked the broker for a producer id, i.e. is idempotent.
    bool idempotent() const { return idempotent_; }
    // How many scripted produce answers the broker has not given yet (0: every scripted request came).
    std::size_t pending_produce_answers() const { return cluster_.pending_broker_responses(1, kafka_request::produce); }

    // What the broker stored, in its order.
    std::vector<std::string> stored()
    {
        kafka_reader reader(cluster_.bootstrap_servers());
        const std::int64_t count = reader.end_offset("keys", 0);
        return reader.values("keys", 0, static_cast<std::size_t>(count));
    }

private:
    bq::kafka_mock_cluster cluster_{1};
    boost::asio::io_context io_;
    bq::buffer_queue queue_{io_.get_executor()};
    std::optional<bq::producer<int>> producer_;
    bool idempotent_ = false;
};

struct pair_outcome {
    boost::system::error_code first;
    boost::system::error_code second;
    std::vector<std::string> stored;
};

// Produces 1 and then 2 (one key, one awaited produce each) while the broker holds back its answer
// to the first request (NOT_LEADER_FOR_PARTITION, retriable: nothing stored) for a second, so the
// second request is sent while the first is unanswered, as with any produce rate above one
// request per round trip. The broker answers the second as a Kafka broker would (file comment).
pair_outcome produce_pair_with_a_refused_first_request(keyed_topic& topic)
{
    const int second_answer = topic.idempotent() ? out_of_order_sequence_number : 0;
    topic.cluster().push_broker_responses(
        1, kafka_request::produce, {{.error = not_leader_for_partition, .delay = 1000ms}, {.error = second_answer}});
    std::optional<boost::system::error_code> first;
    std::optional<boost::system::error_code> second;
    topic.producer().produce(1, [&](boost::system::error_code error) { first = error; });
    REQUIRE(run_until(topic.io(), [&] { return topic.pending_produce_answers() == 1; }));  // its request arrived
    topic.producer().produce(2, [&](boost::system::error_code error) { second = error; });
    REQUIRE(run_until(topic.io(), [&] { return topic.pending_produce_answers() == 0; }));  // and this one
    INFO("the second request must reach the broker while the first is unanswered (held back 1 s)");
    REQUIRE_FALSE(first.has_value());
    REQUIRE(run_until(
        topic.io(), [&] { return first.has_value() && second.has_value(); }, 15s));
    return {*first, *second, topic.stored()};
}

// Produces 1 while the broker stores the request at once but holds back its answer past the
// client's socket.timeout.ms (500 ms; librdkafka caps each request's timeout by it), so librdkafka
// sends again a request it cannot know was stored. The broker answers the retry as a Kafka broker
// would (file comment).
boost::system::error_code produce_with_a_timed_out_request(keyed_topic& topic)
{
    const int retry_answer = topic.idempotent() ? duplicate_sequence_number : 0;
    topic.cluster().push_broker_responses(1, kafka_request::produce,
                                          {{.error = 0, .delay = 2500ms}, {.error = retry_answer}});
    const boost::system::error_code result = produce_and_wait(topic.producer(), {1}, topic.io(), 15s);
    INFO("the request must have been sent again after it timed out");
    REQUIRE(topic.pending_produce_answers() == 0);
    return result;
}

// Quick retries; the timeout test's requests time out after 500 ms.
const std::map<std::string, std::string> retry_properties{{"retry.backoff.ms", "10"}};
const std::map<std::string, std::string> timeout_properties{{"retry.backoff.ms", "10"}, {"socket.timeout.ms", "500"}};

std::map<std::string, std::string> with(std::map<std::string, std::string> properties, const std::string& name,
                                        const std::string& value)
{
    properties[name] = value;
    return properties;
}

}  // namespace

TEST_CASE("two awaited kafka produces of one key are stored in produce order when the first request meets a retriable "
          "error",
          "[kafka]")
{
    if (bq::test::skip_on_real_kafka_cluster("scripts the broker's answers")) {
        return;
    }
    keyed_topic topic(retry_properties);
    CHECK(topic.idempotent());  // the default
    const pair_outcome outcome = produce_pair_with_a_refused_first_request(topic);
    CHECK(outcome.first == boost::system::error_code());
    CHECK(outcome.second == boost::system::error_code());
    CHECK(outcome.stored == std::vector<std::string>{"0", "1", "2"});
}

TEST_CASE("an acknowledged kafka produce is stored once when its request timed out and was sent again", "[kafka]")
{
    if (bq::test::skip_on_real_kafka_cluster("scripts the broker's answers")) {
        return;
    }
    keyed_topic topic(timeout_properties);
    CHECK(topic.idempotent());  // the default
    CHECK(produce_with_a_timed_out_request(topic) == boost::system::error_code());
    CHECK(topic.stored() == std::vector<std::string>{"0", "1"});
}

TEST_CASE("with enable.idempotence=false a retried kafka request can reorder a key's records or store one twice",
          "[kafka]")
{
    if (bq::test::skip_on_real_kafka_cluster("scripts the broker's answers")) {
        return;
    }
    // What docs/kafka.md says turning idempotence off costs; also shows that the property wins.
    SECTION("a refused first request is retried after the second was stored")
    {
        keyed_topic topic(with(retry_properties, "enable.idempotence", "false"));
        REQUIRE_FALSE(topic.idempotent());
        const pair_outcome outcome = produce_pair_with_a_refused_first_request(topic);
        CHECK(outcome.first == boost::system::error_code());
        CHECK(outcome.second == boost::system::error_code());
        CHECK(outcome.stored == std::vector<std::string>{"0", "2", "1"});
    }
    SECTION("a timed-out request that was stored is stored again")
    {
        keyed_topic topic(with(timeout_properties, "enable.idempotence", "false"));
        REQUIRE_FALSE(topic.idempotent());
        CHECK(produce_with_a_timed_out_request(topic) == boost::system::error_code());
        CHECK(topic.stored() == std::vector<std::string>{"0", "1", "1"});
    }
}

}  // namespace kafka_produce_retry_test
