// Conformance, routing: round-robin per item (also inside a batch), equal keys to one partition in
// input order, and the documented key mapping on every backend.
#include "conformance/conformance_support.hpp"

#include <bufferqueue/bufferqueue.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace routing_conformance_test {

using namespace conformance;

TEMPLATE_LIST_TEST_CASE("conformance: round-robin routing advances one partition per item, also inside a batch",
                        "[conformance][routing]", conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    constexpr std::size_t partitions = 4;
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue, conformance_topic<int>{.name = "spread", .partitions = partitions});
    auto consumers = queue.create_pull_consumers<int>(manual("spread", "g"), group_size<TestType>(partitions));
    auto producer = queue.producer<int>("spread");

    // Singles, a span, an awaited batch and an awaited single: one sequence 0..22 from one thread.
    REQUIRE(producer.try_produce(0));
    REQUIRE(producer.try_produce(1));
    const std::vector<int> batch = range(2, 12);
    REQUIRE(producer.try_produce(std::span<const int>(batch)));
    run_coroutine(io, [&]() -> asio::awaitable<void> {
        co_await producer.produce(range(12, 21));
        co_await producer.produce(21);
    });
    REQUIRE(producer.try_produce(22));

    const auto by_partition = collect(consumers, io, 23);
    std::map<int, std::size_t> partition_of;
    std::size_t total = 0;
    for (const auto& [partition, items] : by_partition) {
        total += items.size();
        for (const int item : items) {
            partition_of[item] = partition;
        }
        // Within a partition, one thread's items keep their order.
        CHECK(std::is_sorted(items.begin(), items.end()));
    }
    REQUIRE(total == 23);
    REQUIRE(partition_of.size() == 23);
    // Item i goes to partition (start + i) mod 4: every next item, inside a batch or across calls,
    // goes to the next partition.
    const std::size_t start = partition_of.at(0);
    for (int item = 0; item < 23; ++item) {
        INFO("item " << item);
        CHECK(partition_of.at(item) == (start + static_cast<std::size_t>(item)) % partitions);
    }
    // So the partitions hold 6, 6, 6 and 5 items.
    std::vector<std::size_t> sizes;
    for (std::size_t offset = 0; offset < partitions; ++offset) {
        const auto found = by_partition.find((start + offset) % partitions);
        sizes.push_back(found == by_partition.end() ? 0 : found->second.size());
    }
    CHECK(sizes == std::vector<std::size_t>{6, 6, 6, 5});
}

TEMPLATE_LIST_TEST_CASE("conformance: a long batch spanning several segments goes one partition per item and keeps "
                        "its order in each partition",
                        "[conformance][routing]", conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    constexpr std::size_t partitions = 3;
    constexpr int count = 5000;  // memory's default segment holds 1,024 items: several per partition
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue, conformance_topic<int>{.name = "long", .partitions = partitions});
    auto consumers = queue.create_pull_consumers<int>(manual("long", "g"), group_size<TestType>(partitions));
    auto producer = queue.producer<int>("long");

    // A memory topic stores a long batch in two passes when a consumer waits on the topic
    // (router.hpp): there, once with a consumer of another group parked, once without.
    const bool consumer_waits = std::is_same_v<TestType, memory_backend> && GENERATE(false, true);
    INFO((consumer_waits ? "a consumer of another group waits while the batch is produced" : "nobody waits"));
    std::optional<bq::pull_consumer<int>> watcher;
    std::size_t watched = 0;
    if (consumer_waits) {
        watcher.emplace(queue.create_pull_consumer<int>({.topic = "long", .group = "watch", .auto_commit = true}));
        asio::co_spawn(
            io,
            [&]() -> asio::awaitable<void> {
                for (;;) {
                    bq::batch<int> received = co_await watcher->consume(asio::use_awaitable);
                    watched += received.size();
                }
            },
            asio::detached);
        REQUIRE(run_until(io, [&] { return queue.stats<int>("long").waiting_consumers > 0; }));
    }

    REQUIRE(producer.try_produce(0));  // the batch starts at the second partition of the rotation
    REQUIRE(producer.try_produce(range(1, count)));

    const auto by_partition = collect(consumers, io, count);
    if (consumer_waits) {
        REQUIRE(run_until(io, [&] { return watched == static_cast<std::size_t>(count); }));
        watcher->close();
        io.poll();  // the watcher's loop ends (its parked consume completes with operation_aborted)
    }
    std::map<int, std::size_t> partition_of;
    for (const auto& [partition, items] : by_partition) {
        CHECK(std::is_sorted(items.begin(), items.end()));
        for (const int item : items) {
            partition_of[item] = partition;
        }
    }
    REQUIRE(partition_of.size() == static_cast<std::size_t>(count));
    const std::size_t start = partition_of.at(0);
    for (int item = 0; item < count; ++item) {
        INFO("item " << item);
        REQUIRE(partition_of.at(item) == (start + static_cast<std::size_t>(item)) % partitions);
    }
}

TEMPLATE_LIST_TEST_CASE("conformance: items given up as rvalues are stored like copies, round-robin and in order",
                        "[conformance][routing]", conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue, conformance_topic<std::string>{.name = "given", .partitions = 1});
    auto consumer = queue.create_pull_consumer<std::string>(manual("given", "g"));
    auto producer = queue.producer<std::string>("given");
    // Strings past the small-string buffer: a move hands over the heap payload.
    const auto item = [](int index) { return std::string(40, 'a') + std::to_string(index); };

    std::string single = item(0);
    REQUIRE(producer.try_produce(std::move(single)));
    std::vector<std::string> batch{item(1), item(2)};
    REQUIRE(producer.try_produce(std::move(batch)));
    std::string awaited = item(3);
    std::vector<std::string> awaited_batch{item(4), item(5)};
    run_coroutine(io, [&]() -> asio::awaitable<void> {
        co_await producer.produce(std::move(awaited));
        co_await producer.produce(std::move(awaited_batch));
    });
    CHECK(collect(consumer, io, 6) ==
          std::map<std::size_t, std::vector<std::string>>{{0, {item(0), item(1), item(2), item(3), item(4), item(5)}}});
}

TEMPLATE_LIST_TEST_CASE("conformance: items with equal keys reach one partition and keep their input order",
                        "[conformance][routing]", conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    constexpr std::size_t partitions = 5;
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    // The key is the text before the ':' ("alpha:3" has key "alpha").
    backend.add_topic(queue, conformance_topic<std::string>{.name = "keyed",
                                                            .partitions = partitions,
                                                            .partition_key = [](const std::string& item) {
                                                                return item.substr(0, item.find(':'));
                                                            }});
    auto consumers = queue.create_pull_consumers<std::string>(manual("keyed", "g", 3), group_size<TestType>(2));
    auto producer = queue.producer<std::string>("keyed");

    const std::vector<std::string> keys{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"};
    std::vector<std::string> input;
    for (int seq = 0; seq < 12; ++seq) {
        for (std::size_t key = 0; key < keys.size(); ++key) {
            if ((static_cast<std::size_t>(seq) + key) % 3 != 0) {  // keys interleave irregularly
                input.push_back(keys[key] + ":" + std::to_string(seq));
            }
        }
    }
    // Half as single produces, half as one batch, so both paths route by key.
    const std::size_t half = input.size() / 2;
    for (std::size_t index = 0; index < half; ++index) {
        REQUIRE(producer.try_produce(input[index]));
    }
    REQUIRE(producer.try_produce(std::span<const std::string>(input).subspan(half)));

    std::map<std::string, std::size_t> partition_of_key;
    std::map<std::string, std::vector<std::string>> delivered_by_key;
    std::size_t total = 0;
    for (const auto& [partition, items] : collect(consumers, io, input.size())) {
        for (const std::string& item : items) {
            const std::string key = item.substr(0, item.find(':'));
            const auto [known, inserted] = partition_of_key.emplace(key, partition);
            CHECK(known->second == partition);  // every item of a key in one partition
            delivered_by_key[key].push_back(item);
            ++total;
        }
    }
    CHECK(total == input.size());
    for (const std::string& key : keys) {
        INFO("key " << key);
        std::vector<std::string> expected;
        for (const std::string& item : input) {
            if (item.substr(0, item.find(':')) == key) {
                expected.push_back(item);
            }
        }
        CHECK(delivered_by_key[key] == expected);  // input order
    }
}

TEMPLATE_LIST_TEST_CASE("conformance: a key reaches the partition the documented partition_for_key mapping names",
                        "[conformance][routing]", conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    constexpr std::uint32_t partitions = 7;
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    // Integer keys: the item is its own key, including zero and negative ones.
    backend.add_topic(queue, conformance_topic<int>{.name = "by-number",
                                                    .partitions = partitions,
                                                    .partition_key = [](const int& item) { return item; }});
    // String keys: the item is its own key (four UTF-16 units folded, then mod partitions).
    backend.add_topic(queue, conformance_topic<std::string>{
                                 .name = "by-text",
                                 .partitions = partitions,
                                 .partition_key = [](const std::string& item) { return std::string_view(item); }});
    // Two group names: on Kafka one name on two topics is one consumer group, whose members' joins
    // rebalance each other (docs/kafka.md, "Pull consumers").
    auto numbers = queue.create_pull_consumer<int>(manual("by-number", "numbers", 1000));
    auto texts = queue.create_pull_consumer<std::string>(manual("by-text", "texts", 1000));

    const std::vector<int> number_keys{-20, -7, -1, 0, 1, 2, 6, 7, 8, 13, 14, 15, 100, 1001, 65536, 2147483647};
    const std::vector<std::string> text_keys{
        "", "a", "b", "order-1", "order-2", "zz top", "\xc3\xa9t\xc3\xa9", "\xf0\x9f\x98\x80 smile", "k", "key"};
    REQUIRE(queue.producer<int>("by-number").try_produce(std::span<const int>(number_keys)));
    REQUIRE(queue.producer<std::string>("by-text").try_produce(std::span<const std::string>(text_keys)));

    // The documented table, spot-checked, so a change of partition_for_key itself is noticed too.
    CHECK(bq::partition_for_key(8, partitions) == 0);
    CHECK(bq::partition_for_key(7, partitions) == 6);
    CHECK(bq::partition_for_key(0, partitions) == 6);
    CHECK(bq::partition_for_key(-1, partitions) == 5);
    CHECK(bq::partition_for_key(std::string_view(""), partitions) == 0);
    CHECK(bq::partition_for_key(std::string_view("a"), partitions) == 97 % partitions);

    std::size_t seen_numbers = 0;
    for (const auto& [partition, items] : collect(numbers, io, number_keys.size())) {
        for (const int key : items) {
            INFO("key " << key);
            CHECK(partition == bq::partition_for_key(key, partitions));
            ++seen_numbers;
        }
    }
    CHECK(seen_numbers == number_keys.size());
    std::size_t seen_texts = 0;
    for (const auto& [partition, items] : collect(texts, io, text_keys.size())) {
        for (const std::string& key : items) {
            INFO("key " << key);
            CHECK(partition == bq::partition_for_key(std::string_view(key), partitions));
            ++seen_texts;
        }
    }
    CHECK(seen_texts == text_keys.size());
}

}  // namespace routing_conformance_test
