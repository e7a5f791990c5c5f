// Kafka topics beside a bare librdkafka loop on the same mock cluster, in the same run
// (docs/benchmarks.md, "Kafka"): producing 8,192 ints until the broker acknowledged every one, and
// consuming 8,192 ints in one consumer group, committing each batch once the broker acknowledged it.
// Both sides use one partition, the same client properties and the same batch size (1,000). Our rows:
// `bufferqueue` with the default json_serializer<int> (the bare loop writes the same JSON text with
// std::to_chars and decodes it with std::from_chars), `bufferqueue_raw` with raw_serializer<int> (4
// bytes; the bare loop copies 4 bytes), which leaves only the topic's own overhead. The target (issue
// 13): ours takes at most 1.25x the bare loop's time; summarize.py judges it on the raw rows.
//
// The cluster, the topics, the queue and the group members are made once per process (a group join
// costs seconds on the mock) and never destroyed: the process ends with them.
#include "bufferqueue/kafka.hpp"

#include "bench_support.hpp"

#include <benchmark/benchmark.h>
#include <boost/asio/io_context.hpp>

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace bq = bufferqueue;
using bq::bench::message_count;
using bq::bench::messages;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr std::size_t batch_size = 1000;

/// The client properties of both sides: quiet, records sent after 1 ms, fetched within 10 ms.
const std::map<std::string, std::string>& properties()
{
    static const std::map<std::string, std::string> all{{"log_level", "0"},
                                                        {"linger.ms", "1"},
                                                        {"fetch.wait.max.ms", "10"},
                                                        {"session.timeout.ms", "6000"},
                                                        {"heartbeat.interval.ms", "500"}};
    return all;
}

/// One mock broker with the four topics, one per row.
bq::kafka_mock_cluster& cluster()
{
    static bq::kafka_mock_cluster* const mock = [] {
        auto* made = new bq::kafka_mock_cluster(1);
        for (const char* topic :
             {"produce-ours", "produce-ours-raw", "produce-bare", "consume-ours", "consume-ours-raw", "consume-bare"}) {
            made->create_topic(topic, 1);
        }
        return made;
    }();
    return *mock;
}

rd_kafka_conf_t* bare_configuration(const std::map<std::string, std::string>& extra = {})
{
    std::array<char, 512> reason{};
    rd_kafka_conf_t* configuration = rd_kafka_conf_new();
    std::map<std::string, std::string> all = properties();
    all["bootstrap.servers"] = cluster().bootstrap_servers();
    for (const auto& [name, value] : extra) {
        all[name] = value;
    }
    for (const auto& [name, value] : all) {
        if (rd_kafka_conf_set(configuration, name.c_str(), value.c_str(), reason.data(), reason.size()) !=
            RD_KAFKA_CONF_OK) {
            throw std::runtime_error(name + ": " + reason.data());
        }
    }
    return configuration;
}

/// The bare producer: rd_kafka_produce of each record to partition 0, then rd_kafka_poll until every
/// delivery report arrived (the counting callback).
class bare_producer {
public:
    /// `raw`: the ints' 4 bytes (what raw_serializer<int> writes), else their decimal text (JSON).
    bare_producer(const char* topic, bool raw) : topic_(topic), raw_(raw)
    {
        rd_kafka_conf_t* configuration = bare_configuration();
        rd_kafka_conf_set_dr_msg_cb(configuration, [](rd_kafka_t*, const rd_kafka_message_t* message, void* opaque) {
            auto* self = static_cast<bare_producer*>(opaque);
            ++self->delivered_;
            self->failed_ += message->err != RD_KAFKA_RESP_ERR_NO_ERROR ? 1 : 0;
        });
        rd_kafka_conf_set_opaque(configuration, this);
        std::array<char, 512> reason{};
        client_ = rd_kafka_new(RD_KAFKA_PRODUCER, configuration, reason.data(), reason.size());
        if (client_ == nullptr) {
            throw std::runtime_error(reason.data());
        }
        handle_ = rd_kafka_topic_new(client_, topic_, nullptr);
    }

    /// Produces `values` as JSON text and waits for every acknowledgement; false when one failed.
    bool produce(std::span<const int> values)
    {
        delivered_ = 0;
        failed_ = 0;
        std::array<char, 16> text{};
        for (const int value : values) {
            const char* end = text.data() + sizeof value;
            if (raw_) {
                std::memcpy(text.data(), &value, sizeof value);
            } else {
                end = std::to_chars(text.data(), text.data() + text.size(), value).ptr;
            }
            // rd_kafka_produce, not rd_kafka_producev: clang -Wpedantic refuses the latter's macros.
            while (rd_kafka_produce(handle_, 0, RD_KAFKA_MSG_F_COPY, text.data(),
                                    static_cast<std::size_t>(end - text.data()), nullptr, 0, nullptr) == -1 &&
                   rd_kafka_last_error() == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                rd_kafka_poll(client_, 1);
            }
        }
        while (delivered_ < values.size()) {
            rd_kafka_poll(client_, 100);
        }
        return failed_ == 0;
    }

private:
    const char* topic_;
    bool raw_;
    rd_kafka_t* client_ = nullptr;
    rd_kafka_topic_t* handle_ = nullptr;
    std::size_t delivered_ = 0;  // delivery reports since the last produce (the polling thread's)
    std::size_t failed_ = 0;
};

/// The bare consumer: one member of group "bare", batches of up to 1,000 from the consumer queue
/// (what is there, never waiting for a full batch, as our consumer), each committed synchronously
/// (rd_kafka_commit of the batch's last offset + 1).
class bare_consumer {
public:
    bare_consumer()
    {
        rd_kafka_conf_t* configuration = bare_configuration(
            {{"group.id", "bare"}, {"enable.auto.commit", "false"}, {"auto.offset.reset", "earliest"}});
        std::array<char, 512> reason{};
        client_ = rd_kafka_new(RD_KAFKA_CONSUMER, configuration, reason.data(), reason.size());
        if (client_ == nullptr) {
            throw std::runtime_error(reason.data());
        }
        rd_kafka_poll_set_consumer(client_);
        rd_kafka_topic_partition_list_t* topics = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(topics, "consume-bare", RD_KAFKA_PARTITION_UA);
        rd_kafka_subscribe(client_, topics);
        rd_kafka_topic_partition_list_destroy(topics);
        queue_ = rd_kafka_queue_get_consumer(client_);
        // Joined once the assignment arrived (rd_kafka_assignment non-empty).
        for (;;) {
            rd_kafka_topic_partition_list_t* assigned = nullptr;
            rd_kafka_assignment(client_, &assigned);
            const bool joined = assigned->cnt > 0;
            rd_kafka_topic_partition_list_destroy(assigned);
            if (joined) {
                break;
            }
            rd_kafka_message_t* message = rd_kafka_consumer_poll(client_, 100);
            if (message != nullptr) {
                rd_kafka_message_destroy(message);
            }
        }
    }

    /// Receives `count` records, decoding them; returns their sum.
    std::int64_t consume(std::size_t count)
    {
        std::int64_t sum = 0;
        std::array<rd_kafka_message_t*, batch_size> batch{};
        std::size_t received = 0;
        while (received < count) {
            // What is there now, up to 1,000; when nothing is, wait (up to 100 ms) for one record and
            // take it with what came with it (rd_kafka_consume_batch_queue with a timeout would wait
            // for a full batch).
            ssize_t got = rd_kafka_consume_batch_queue(queue_, 0, batch.data(), batch.size());
            if (got == 0) {
                batch[0] = rd_kafka_consumer_poll(client_, 100);
                got = batch[0] == nullptr
                          ? 0
                          : 1 + std::max<ssize_t>(
                                    0, rd_kafka_consume_batch_queue(queue_, 0, batch.data() + 1, batch.size() - 1));
            }
            std::int64_t last_offset = -1;
            for (ssize_t index = 0; index < got; ++index) {
                rd_kafka_message_t* message = batch[static_cast<std::size_t>(index)];
                if (message->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
                    int value = 0;
                    const char* text = static_cast<const char*>(message->payload);
                    std::from_chars(text, text + message->len, value);
                    sum += value;
                    ++received;
                    last_offset = message->offset;
                }
                rd_kafka_message_destroy(message);
            }
            if (last_offset >= 0) {
                rd_kafka_topic_partition_list_t* offsets = rd_kafka_topic_partition_list_new(1);
                rd_kafka_topic_partition_list_add(offsets, "consume-bare", 0)->offset = last_offset + 1;
                rd_kafka_commit(client_, offsets, 0);
                rd_kafka_topic_partition_list_destroy(offsets);
            }
        }
        return sum;
    }

private:
    rd_kafka_t* client_ = nullptr;
    rd_kafka_queue_t* queue_ = nullptr;
};

/// Our side: a buffer_queue with a one-partition Kafka topic per row, and one pull consumer per
/// consume row (batches of 1,000, committed one by one), joined before the first run.
struct ours {
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    std::map<std::string, bq::pull_consumer<int>> consumers;  // by topic

    template <class Serializer>
    void add(const char* topic, Serializer serializer)
    {
        queue.add_topic(bq::kafka_topic_options<int>{.name = topic,
                                                     .partitions = 1,
                                                     .bootstrap_servers = cluster().bootstrap_servers(),
                                                     .serializer = serializer,
                                                     .properties = properties()});
    }

    ours()
    {
        add("produce-ours", bq::json_serializer<int>{});
        add("consume-ours", bq::json_serializer<int>{});
        add("produce-ours-raw", bq::raw_serializer<int>{});
        add("consume-ours-raw", bq::raw_serializer<int>{});
        for (const char* topic : {"consume-ours", "consume-ours-raw"}) {
            consumers.emplace(
                topic, queue.create_pull_consumer<int>({.topic = topic, .group = topic, .batch_size = batch_size}));
        }
        for (auto& [topic, consumer] : consumers) {
            while (consumer.partitions().empty()) {
                io.restart();
                io.run_for(std::chrono::milliseconds(10));
            }
        }
    }

    /// Runs `io` until `done()` holds.
    template <class Done>
    void run_until(Done done)
    {
        while (!done()) {
            io.restart();
            io.run_one();
        }
    }

    bool produce(const char* topic, std::span<const int> values)
    {
        std::optional<boost::system::error_code> result;
        queue.producer<int>(topic).produce(values, [&](boost::system::error_code error) { result = error; });
        run_until([&] { return result.has_value(); });
        return !*result;
    }

    std::int64_t consume(const char* topic, std::size_t count)
    {
        bq::pull_consumer<int>* consumer = &consumers.at(topic);
        std::int64_t sum = 0;
        std::size_t received = 0;
        while (received < count) {
            std::optional<boost::system::error_code> result;
            consumer->consume([&](boost::system::error_code error, bq::batch<int> batch) {
                for (const int value : batch) {
                    sum += value;
                    ++received;
                }
                result = error;
            });
            run_until([&] { return result.has_value(); });
            std::optional<boost::system::error_code> committed;
            consumer->commit([&](boost::system::error_code error) { committed = error; });
            run_until([&] { return committed.has_value(); });
        }
        return sum;
    }
};

ours& our_side()
{
    static ours* const side = new ours();
    return *side;
}

bare_producer& bare_producer_of(const char* topic, bool raw = false)
{
    static std::map<std::string, bare_producer*> producers;
    bare_producer*& producer = producers[topic];
    if (producer == nullptr) {
        producer = new bare_producer(topic, raw);
    }
    return *producer;
}

bare_consumer& bare_consumer_side()
{
    static bare_consumer* const side = new bare_consumer();
    return *side;
}

void report(benchmark::State& state, std::size_t items)
{
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * items));
}

void produce_ours(benchmark::State& state, const char* topic)
{
    ours& side = our_side();
    for (auto _ : state) {
        if (!side.produce(topic, messages())) {
            state.SkipWithError("a produce failed");
            break;
        }
    }
    report(state, message_count);
}

void produce_bare(benchmark::State& state)
{
    bare_producer& producer = bare_producer_of("produce-bare");
    for (auto _ : state) {
        if (!producer.produce(messages())) {
            state.SkipWithError("a delivery failed");
            break;
        }
    }
    report(state, message_count);
}

/// The expected sum of one round's values, 0..8191.
constexpr std::int64_t round_sum = static_cast<std::int64_t>(message_count) * (message_count - 1) / 2;

void consume_ours(benchmark::State& state, const char* topic, bool raw)
{
    ours& side = our_side();
    bare_producer& filler = bare_producer_of(topic, raw);
    for (auto _ : state) {
        filler.produce(messages());  // untimed: the records to consume
        const auto started = clock_type::now();
        const std::int64_t sum = side.consume(topic, message_count);
        state.SetIterationTime(std::chrono::duration<double>(clock_type::now() - started).count());
        if (sum != round_sum) {
            state.SkipWithError("consumed other records than were produced");
            break;
        }
    }
    report(state, message_count);
}

void consume_bare(benchmark::State& state)
{
    bare_consumer& side = bare_consumer_side();
    bare_producer& filler = bare_producer_of("consume-bare");
    for (auto _ : state) {
        filler.produce(messages());
        const auto started = clock_type::now();
        const std::int64_t sum = side.consume(message_count);
        state.SetIterationTime(std::chrono::duration<double>(clock_type::now() - started).count());
        if (sum != round_sum) {
            state.SkipWithError("consumed other records than were produced");
            break;
        }
    }
    report(state, message_count);
}

}  // namespace

BENCHMARK_CAPTURE(produce_ours, json, "produce-ours")
    ->Name("kafka/produce/bufferqueue")
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(produce_ours, raw, "produce-ours-raw")
    ->Name("kafka/produce/bufferqueue_raw")
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(produce_bare)->Name("kafka/produce/librdkafka")->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(consume_ours, json, "consume-ours", false)
    ->Name("kafka/consume/bufferqueue")
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(consume_ours, raw, "consume-ours-raw", true)
    ->Name("kafka/consume/bufferqueue_raw")
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(consume_bare)->Name("kafka/consume/librdkafka")->UseManualTime()->Unit(benchmark::kMicrosecond);
