#include "bufferqueue/producer.hpp"

#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/memory/memory_topic.hpp"
#include "catch.hpp"
#include "test_support.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <cstddef>
#include <exception>
#include <list>
#include <map>
#include <optional>
#include <ranges>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace producer_test {

namespace {

namespace bq = bufferqueue;
using bq::test::error_from;
using bq::test::rethrow;

struct order {
    int key = 0;
    int sequence = 0;
    bool poison = false;

    bool operator==(const order&) const = default;
};

bq::pull_consumer_options automatic(std::string topic, std::string group)
{
    return {.topic = std::move(topic), .group = std::move(group), .auto_commit = true, .batch_size = 1000};
}

// What each consumer of a one-partition-per-consumer group can read now, indexed by partition.
template <class T>
std::vector<std::vector<T>> read_partitions(std::vector<bq::pull_consumer<T>>& consumers)
{
    std::vector<std::vector<T>> partitions(consumers.size());
    for (std::size_t index = 0; index < consumers.size(); ++index) {
        REQUIRE(consumers[index].partitions() == std::vector<std::size_t>{index});
        while (std::optional<bq::batch<T>> delivered = consumers[index].try_consume()) {
            CHECK(delivered->partition() == index);
            partitions[index].insert(partitions[index].end(), delivered->begin(), delivered->end());
        }
    }
    return partitions;
}

// A bounded or unbounded topic of `order` with one auto-commit consumer per partition.
struct order_topic {
    explicit order_topic(std::size_t partitions, bq::key_selector<order> key = {},
                         std::optional<std::size_t> capacity = std::nullopt)
        : queue(io.get_executor())
    {
        queue.add_topic(bq::memory_topic_options<order>{.name = "orders",
                                                        .partitions = partitions,
                                                        .segment_size = 4,
                                                        .bounded_capacity = capacity,
                                                        .full_mode = bq::full_mode::fail,
                                                        .partition_key = std::move(key)});
        consumers = queue.create_pull_consumers<order>(automatic("orders", "all"), partitions);
    }

    boost::asio::io_context io;
    bq::buffer_queue queue;
    std::vector<bq::pull_consumer<order>> consumers;
};

}  // namespace

TEST_CASE("producer: round-robin advances per item, also inside a batch", "[producer][memory]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<int>{.name = "spread", .partitions = 4, .segment_size = 2});
    auto consumers = queue.create_pull_consumers<int>(automatic("spread", "g"), 4);
    auto producer = queue.producer<int>("spread");

    const std::vector<int> batch{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    REQUIRE(producer.try_produce(std::span<const int>(batch)));
    CHECK(read_partitions(consumers) == std::vector<std::vector<int>>{{0, 4, 8}, {1, 5, 9}, {2, 6}, {3, 7}});

    // Selection continues where the batch stopped (partition 2), across singles and batches alike.
    REQUIRE(producer.try_produce(10));
    const std::vector<int> second{11, 12, 13};
    REQUIRE(producer.try_produce(std::span<const int>(second)));
    REQUIRE(producer.try_produce(14));
    CHECK(read_partitions(consumers) == std::vector<std::vector<int>>{{12}, {13}, {10, 14}, {11}});
}

TEST_CASE("producer: awaited batches are routed per item like try_produce batches", "[producer][memory]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<int>{.name = "awaited", .partitions = 3});
    auto consumers = queue.create_pull_consumers<int>(automatic("awaited", "g"), 3);
    auto producer = queue.producer<int>("awaited");

    const std::vector<int> batch{0, 1, 2, 3, 4, 5, 6};
    boost::asio::co_spawn(
        io,
        [&]() -> boost::asio::awaitable<void> {
            co_await producer.produce(std::span<const int>(batch));
            co_await producer.produce(7);
        },
        rethrow);
    io.run();
    CHECK(read_partitions(consumers) == std::vector<std::vector<int>>{{0, 3, 6}, {1, 4, 7}, {2, 5}});
}

TEST_CASE("producer: key routing sends equal keys to one partition in input order", "[producer][memory]")
{
    order_topic topic(5, [](const order& item) { return item.key; });
    auto producer = topic.queue.producer<order>("orders");

    // Interleaved keys, some colliding modulo 5 (1 and 6, 3 and -2).
    const int keys[] = {1, 3, 6, 1, -2, 3, 6, 1, 0, -2, 3, 1};
    std::vector<order> batch;
    for (int sequence = 0; const int key : keys) {
        batch.push_back(order{key, sequence++, false});
    }
    REQUIRE(producer.try_produce(std::span<const order>(batch)));
    REQUIRE(producer.try_produce(order{1, 100, false}));
    REQUIRE(producer.try_produce(order{6, 101, false}));

    const std::vector<std::vector<order>> partitions = read_partitions(topic.consumers);
    std::size_t total = 0;
    for (std::size_t partition = 0; partition < partitions.size(); ++partition) {
        std::map<int, int> last_sequence;
        for (const order& item : partitions[partition]) {
            INFO("key " << item.key << " sequence " << item.sequence);
            CHECK(bq::partition_for_key(item.key, 5) == partition);
            const auto [previous, inserted] = last_sequence.try_emplace(item.key, item.sequence);
            if (!inserted) {
                CHECK(previous->second < item.sequence);  // input order per key
                previous->second = item.sequence;
            }
        }
        total += partitions[partition].size();
    }
    CHECK(total == batch.size() + 2);
    // (1 - 1) mod 5 = 0 and (6 - 1) mod 5 = 0: both keys share partition 0, in input order.
    std::vector<int> partition_zero;
    for (const order& item : partitions[0]) {
        partition_zero.push_back(item.sequence);
    }
    CHECK(partition_zero == std::vector<int>{0, 2, 3, 6, 7, 11, 100, 101});
}

TEST_CASE("producer: any input range is copied once and produced as one batch", "[producer][memory]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<int>{.name = "ranges", .partitions = 2});
    queue.add_topic(bq::memory_topic_options<int>{
        .name = "bounded-ranges", .bounded_capacity = 3, .full_mode = bq::full_mode::fail});
    auto consumers = queue.create_pull_consumers<int>(automatic("ranges", "g"), 2);
    auto producer = queue.producer<int>("ranges");
    auto bounded = queue.producer<int>("bounded-ranges");
    auto bounded_consumer = queue.create_pull_consumer<int>(automatic("bounded-ranges", "g"));

    const std::list<int> listed{0, 1, 2};
    const std::set<int> ordered{5, 3, 4};
    boost::asio::co_spawn(
        io,
        [&]() -> boost::asio::awaitable<void> {
            co_await producer.produce(listed);
            // An rvalue range. (Built outside the co_await: GCC 12 rejects a braced temporary there.)
            std::list<int> moved{6, 7};
            co_await producer.produce(std::move(moved));
        },
        rethrow);
    io.run();
    CHECK(producer.try_produce(ordered));
    CHECK(read_partitions(consumers) == std::vector<std::vector<int>>{{0, 2, 7, 4}, {1, 6, 3, 5}});

    // A range that does not fit is rejected whole.
    CHECK_FALSE(bounded.try_produce(std::list<int>{1, 2, 3, 4}));
    CHECK(bounded.try_produce(std::set<int>{1, 2, 3}));
    CHECK_FALSE(bounded.try_produce(std::list<int>{4}));
    std::vector<int> stored;
    while (auto delivered = bounded_consumer.try_consume()) {
        stored.insert(stored.end(), delivered->begin(), delivered->end());
    }
    CHECK(stored == std::vector<int>{1, 2, 3});

#if !defined(__clang__) || __clang_major__ >= 15
    // Views (libstdc++ 12's <ranges> needs clang 15 or later).
    const std::vector<int> numbers{10, 11, 12, 13, 14, 15, 16};
    const auto even = [](int value) { return value % 2 == 0; };
    io.restart();
    boost::asio::co_spawn(
        io, [&]() -> boost::asio::awaitable<void> { co_await producer.produce(numbers | std::views::filter(even)); },
        rethrow);
    io.run();
    CHECK(
        producer.try_produce(numbers | std::views::take(2) | std::views::transform([](int value) { return -value; })));
    CHECK(read_partitions(consumers) == std::vector<std::vector<int>>{{10, 14, -10}, {12, 16, -11}});
#endif
}

TEST_CASE("producer: a throwing key selector propagates and leaks no capacity", "[producer][memory][capacity]")
{
    const auto selector = [](const order& item) {
        if (item.poison) {
            throw std::runtime_error("poisoned key");
        }
        return item.key;
    };
    order_topic topic(2, selector, 2);
    auto producer = topic.queue.producer<order>("orders");
    const std::vector<order> poisoned{{1, 0, false}, {2, 1, true}};

    CHECK_THROWS_AS(producer.try_produce(order{1, 0, true}), std::runtime_error);
    CHECK_THROWS_AS(producer.try_produce(std::span<const order>(poisoned)), std::runtime_error);
    CHECK_THROWS_AS(producer.try_produce(std::list<order>(poisoned.begin(), poisoned.end())), std::runtime_error);
    // produce() computes keys in the call itself, whatever the completion token.
    CHECK_THROWS_AS(producer.produce(order{1, 0, true}, [](boost::system::error_code) {}), std::runtime_error);
    CHECK_THROWS_AS(producer.produce(std::span<const order>(poisoned), [](boost::system::error_code) {}),
                    std::runtime_error);

    // Inside a coroutine, the exception reaches the awaiting code.
    bool caught = false;
    boost::asio::co_spawn(
        topic.io,
        [&]() -> boost::asio::awaitable<void> {
            try {
                co_await producer.produce(std::span<const order>(poisoned));
            } catch (const std::runtime_error&) {
                caught = true;
            }
        },
        rethrow);
    topic.io.run();
    CHECK(caught);

    // Nothing was stored and the whole capacity (2) is still available.
    for (auto& consumer : topic.consumers) {
        CHECK_FALSE(consumer.try_consume());
    }
    const std::vector<order> healthy{{1, 0, false}, {2, 1, false}};
    CHECK(producer.try_produce(std::span<const order>(healthy)));
    CHECK_FALSE(producer.try_produce(order{3, 2, false}));
}

TEST_CASE("producer: a fractional floating key fails with invalid_argument naming the topic", "[producer][memory]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    struct measured {
        double weight = 0;
    };
    queue.add_topic(bq::memory_topic_options<measured>{
        .name = "weights", .partitions = 4, .partition_key = [](const measured& item) { return item.weight; }});
    auto producer = queue.producer<measured>("weights");
    auto consumer = queue.create_pull_consumer<measured>(automatic("weights", "g"));

    const auto expect_invalid = [](const std::optional<bq::error>& failure) {
        REQUIRE(failure);
        CHECK(failure->code() == bq::errc::invalid_argument);
        CHECK(std::string(failure->what()).find("'weights'") != std::string::npos);
    };
    expect_invalid(error_from([&] { producer.try_produce(measured{1.5}); }));
    const std::vector<measured> mixed{{2.0}, {1.5}};
    expect_invalid(error_from([&] { producer.try_produce(std::span<const measured>(mixed)); }));
    expect_invalid(error_from([&] { producer.produce(measured{1.5}, [](boost::system::error_code) {}); }));
    expect_invalid(
        error_from([&] { producer.produce(std::span<const measured>(mixed), [](boost::system::error_code) {}); }));
    CHECK_FALSE(consumer.try_consume());  // the valid item of the mixed batch was not stored either

    // Integral floating keys are fine: 3.0 goes where 3 goes.
    REQUIRE(producer.try_produce(measured{3.0}));
    const auto delivered = consumer.try_consume();
    REQUIRE(delivered);
    CHECK(delivered->partition() == bq::partition_for_key(3, 4));
}

}  // namespace producer_test
