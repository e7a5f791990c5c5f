// Items given up by the producer (rvalues, owned batches) are moved into memory storage, never
// copied; lvalues and spans are copied once; a try_produce that fails leaves its items as they were.
#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/memory/memory_topic.hpp"
#include "bufferqueue/producer.hpp"

#include "catch.hpp"
#include "test_support.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace move_test {

namespace {

namespace bq = bufferqueue;
using bq::test::rethrow;

/// An item that counts how often items of its type were copied and moved (one thread at a time).
struct counted {
    static inline int copies = 0;
    static inline int moves = 0;

    explicit counted(int key_value) : key(key_value), payload(100, static_cast<char>('a' + key_value % 26)) {}
    counted(const counted& other) : key(other.key), payload(other.payload) { ++copies; }
    counted(counted&& other) noexcept : key(other.key), payload(std::move(other.payload)) { ++moves; }
    counted& operator=(const counted&) = delete;
    counted& operator=(counted&&) = delete;
    ~counted() = default;

    static void reset() { copies = moves = 0; }

    int key;
    std::string payload;  // about 100 bytes, on the heap: what a copy allocates and a move steals
};

/// A vector of `counted` items `first`, ..., `last - 1`, built by moves only.
std::vector<counted> make_items(int first, int last)
{
    std::vector<counted> items;
    items.reserve(static_cast<std::size_t>(last - first));
    for (int key = first; key < last; ++key) {
        items.emplace_back(key);
    }
    return items;
}

/// The keys every consumer of `consumers` can read now, in partition order then delivery order;
/// checks each payload is whole (not a moved-from one).
std::vector<int> read_keys(std::vector<bq::pull_consumer<counted>>& consumers)
{
    std::vector<int> keys;
    for (auto& consumer : consumers) {
        while (std::optional<bq::batch<counted>> delivered = consumer.try_consume()) {
            for (const counted& item : *delivered) {
                CHECK(item.payload == std::string(100, static_cast<char>('a' + item.key % 26)));
                keys.push_back(item.key);
            }
        }
    }
    return keys;
}

/// An input range whose elements are rvalues: a `std::ranges::subrange` of move iterators, which
/// clang 14 cannot compile with libstdc++ 12's ranges.
struct moving_range {
    std::vector<counted>* items;
    auto begin() const { return std::make_move_iterator(items->begin()); }
    auto end() const { return std::make_move_iterator(items->end()); }
};

/// A memory topic of `counted` with one auto-commit consumer per partition.
struct counted_topic {
    explicit counted_topic(std::size_t partitions, std::optional<std::size_t> capacity = std::nullopt,
                           bq::full_mode mode = bq::full_mode::fail, bq::key_selector<counted> key = {})
        : queue(io.get_executor())
    {
        queue.add_topic(bq::memory_topic_options<counted>{.name = "moved",
                                                          .partitions = partitions,
                                                          .segment_size = 4,
                                                          .bounded_capacity = capacity,
                                                          .full_mode = mode,
                                                          .partition_key = std::move(key)});
        consumers = queue.create_pull_consumers<counted>(
            {.topic = "moved", .group = "all", .auto_commit = true, .batch_size = 1000}, partitions);
    }

    boost::asio::io_context io;
    bq::buffer_queue queue;
    std::vector<bq::pull_consumer<counted>> consumers;
};

}  // namespace

TEST_CASE("producer: try_produce moves an rvalue item, an rvalue vector and a range of rvalues in, copying none",
          "[producer][memory]")
{
    counted_topic topic(3);
    auto producer = topic.queue.producer<counted>("moved");
    counted single(0);
    std::vector<counted> batch = make_items(1, 8);  // spread over 3 partitions: strided sources
    std::vector<counted> ranged = make_items(8, 10);
    counted::reset();

    REQUIRE(producer.try_produce(std::move(single)));
    REQUIRE(producer.try_produce(std::move(batch)));
    // A range of rvalues is moved into the call's vector, then moved in from there.
    REQUIRE(producer.try_produce(moving_range{&ranged}));
    CHECK(counted::copies == 0);
    std::vector<int> keys = read_keys(topic.consumers);
    std::sort(keys.begin(), keys.end());
    CHECK(keys == bq::test::range(0, 10));
}

TEST_CASE("producer: an awaited produce moves an rvalue item or vector in, also after waiting for room",
          "[producer][memory][capacity]")
{
    counted_topic topic(2, 2, bq::full_mode::wait);
    auto producer = topic.queue.producer<counted>("moved");
    std::vector<int> keys;
    counted::reset();
    boost::asio::co_spawn(
        topic.io,
        [&]() -> boost::asio::awaitable<void> {
            co_await producer.produce(counted(0));
            co_await producer.produce(make_items(1, 2));  // the topic is full now
            co_await producer.produce(counted(2));        // waits for room, then is stored
            co_await producer.produce(make_items(3, 6));  // larger than the capacity: in slices
        },
        rethrow);
    // Consume as room is needed: each round frees what was produced so far.
    for (int round = 0; round < 100 && keys.size() < 6; ++round) {
        topic.io.restart();
        topic.io.poll();
        const std::vector<int> read = read_keys(topic.consumers);
        keys.insert(keys.end(), read.begin(), read.end());
    }
    std::sort(keys.begin(), keys.end());
    CHECK(keys == bq::test::range(0, 6));
    // Only the temporaries `counted(k)` and the vectors' own items were constructed; none copied.
    CHECK(counted::copies == 0);
}

TEST_CASE("producer: lvalues and spans are copied into a memory topic once per item", "[producer][memory]")
{
    counted_topic topic(2);
    auto producer = topic.queue.producer<counted>("moved");
    const counted single(0);
    const std::vector<counted> batch = make_items(1, 4);
    const counted awaited(4);
    counted::reset();

    REQUIRE(producer.try_produce(single));
    REQUIRE(producer.try_produce(std::span<const counted>(batch)));
    CHECK(counted::copies == 4);
    // The awaited produce copies the item into its operation once and moves it on from there.
    boost::asio::co_spawn(
        topic.io, [&]() -> boost::asio::awaitable<void> { co_await producer.produce(awaited); }, rethrow);
    topic.io.run();
    CHECK(counted::copies == 5);
    CHECK(single.payload.size() == 100);
    std::vector<int> keys = read_keys(topic.consumers);
    std::sort(keys.begin(), keys.end());
    CHECK(keys == bq::test::range(0, 5));
}

TEST_CASE("producer: a try_produce that finds no room leaves the rvalue item and vector as they were",
          "[producer][memory][capacity]")
{
    counted_topic topic(1, 1);
    auto producer = topic.queue.producer<counted>("moved");
    REQUIRE(producer.try_produce(counted(0)));  // the topic is full now
    counted single(1);
    std::vector<counted> batch = make_items(2, 4);
    counted::reset();

    CHECK_FALSE(producer.try_produce(std::move(single)));
    CHECK_FALSE(producer.try_produce(std::move(batch)));
    CHECK(counted::moves == 0);
    CHECK(single.payload == std::string(100, 'b'));
    REQUIRE(batch.size() == 2);
    CHECK(batch[0].payload == std::string(100, 'c'));
    CHECK(batch[1].payload == std::string(100, 'd'));
    CHECK(read_keys(topic.consumers) == std::vector<int>{0});
}

TEST_CASE("producer: rvalues routed by key are moved to their key's partitions in input order", "[producer][memory]")
{
    // Key k goes to partition (k - 1) mod 2: odd keys to 0, even keys to 1.
    counted_topic topic(2, std::nullopt, bq::full_mode::fail,
                        bq::key_selector<counted>([](const counted& item) { return item.key; }));
    auto producer = topic.queue.producer<counted>("moved");
    std::vector<counted> batch = make_items(1, 7);
    counted::reset();
    REQUIRE(producer.try_produce(std::move(batch)));
    CHECK(counted::copies == 0);
    CHECK(read_keys(topic.consumers) == std::vector<int>{1, 3, 5, 2, 4, 6});
}

}  // namespace move_test
