#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/memory/memory_topic.hpp"

#include "bufferqueue/mmap/mmap_topic.hpp"

#include "catch.hpp"
#include "test_support.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace buffer_queue_test {

namespace {

namespace bq = bufferqueue;
using bq::test::rethrow;

// Distinct item types whose names show up in registry messages.
struct registry_alpha {
    int value = 0;
};
struct registry_beta {
    std::string text;
};
struct registry_gamma {
    double weight = 0;
};

// Rethrows what a co_spawned coroutine threw, so it propagates out of io_context::run().
// The bufferqueue::error `action` throws; fails the test when it throws nothing or something else.
template <class Action>
bq::error thrown_error(Action&& action)
{
    try {
        action();
    } catch (const bq::error& failure) {
        return failure;
    }
    FAIL("no bufferqueue::error was thrown");
    return bq::error(bq::errc::invalid_argument, "unreachable");
}

bool contains(const std::string& text, const std::string& part)
{
    return text.find(part) != std::string::npos;
}

// Everything `consumer` (auto-commit) can read now, without waiting.
template <class T>
std::vector<T> read_all(bq::pull_consumer<T>& consumer)
{
    std::vector<T> items;
    while (std::optional<bq::batch<T>> delivered = consumer.try_consume()) {
        items.insert(items.end(), delivered->begin(), delivered->end());
    }
    return items;
}

// Everything `consumer` (auto-commit) can read now, by partition.
template <class T>
std::map<std::size_t, std::vector<T>> read_by_partition(bq::pull_consumer<T>& consumer)
{
    std::map<std::size_t, std::vector<T>> items;
    while (std::optional<bq::batch<T>> delivered = consumer.try_consume()) {
        auto& partition = items[delivered->partition()];
        partition.insert(partition.end(), delivered->begin(), delivered->end());
    }
    return items;
}

bq::pull_consumer_options automatic(std::string topic, std::string group)
{
    return {.topic = std::move(topic), .group = std::move(group), .auto_commit = true, .batch_size = 100};
}

}  // namespace

TEST_CASE("buffer queue: a queue made from an io_context's executor, a strand or a thread pool runs its "
          "completions there",
          "[registry]")
{
    // io.get_executor() takes the constructor that converts it in the library; the others convert
    // to any_io_executor at the call.
    static_assert(std::is_constructible_v<bq::buffer_queue, boost::asio::io_context::executor_type>);
    static_assert(
        std::is_constructible_v<bq::buffer_queue, boost::asio::strand<boost::asio::io_context::executor_type>>);
    static_assert(std::is_constructible_v<bq::buffer_queue, boost::asio::thread_pool::executor_type>);
    static_assert(!std::is_constructible_v<bq::buffer_queue, boost::asio::io_context&>);

    boost::asio::io_context io;
    const auto strand = boost::asio::make_strand(io);
    boost::asio::thread_pool pool(1);
    bq::buffer_queue on_io(io.get_executor());
    bq::buffer_queue on_strand(strand);
    bq::buffer_queue on_pool(pool.get_executor());
    CHECK(on_io.get_executor() == bq::buffer_queue::executor_type(io.get_executor()));
    CHECK(on_strand.get_executor() == bq::buffer_queue::executor_type(strand));
    CHECK(on_pool.get_executor() == bq::buffer_queue::executor_type(pool.get_executor()));
    CHECK(on_io.get_executor() != on_strand.get_executor());

    // A waiting consume without an executor of its own completes on the queue's executor: here, the
    // io_context's thread.
    on_io.add_topic(bq::memory_topic_options<int>{.name = "numbers"});
    bq::pull_consumer<int> consumer = on_io.create_pull_consumer<int>({.topic = "numbers", .group = "g"});
    std::optional<std::thread::id> completed_on;
    std::size_t received = 0;
    consumer.consume([&](boost::system::error_code error, bq::batch<int> batch) {
        CHECK_FALSE(error);
        received = batch.size();
        completed_on = std::this_thread::get_id();
    });
    std::thread producer([&] { on_io.producer<int>("numbers").try_produce(7); });
    producer.join();
    io.run();
    CHECK(received == 1);
    REQUIRE(completed_on.has_value());
    CHECK(*completed_on == std::this_thread::get_id());
    pool.join();
}

TEST_CASE("buffer queue: one topic name registered for two item types gives two independent buffers", "[registry]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<int>{.name = "orders", .partitions = 3});
    queue.add_topic(bq::memory_topic_options<std::string>{.name = "orders", .partitions = 2});
    queue.add_topic(bq::memory_topic_options<registry_alpha>{.name = "orders"});

    auto ints = queue.create_pull_consumer<int>(automatic("orders", "group"));
    auto strings = queue.create_pull_consumer<std::string>(automatic("orders", "group"));
    auto alphas = queue.create_pull_consumer<registry_alpha>(automatic("orders", "group"));

    auto int_producer = queue.producer<int>("orders");
    auto string_producer = queue.producer<std::string>("orders");
    for (int i = 0; i < 6; ++i) {
        REQUIRE(int_producer.try_produce(i));
    }
    REQUIRE(string_producer.try_produce(std::string("a")));
    REQUIRE(string_producer.try_produce(std::string("b")));

    std::vector<int> got_ints = read_all(ints);
    std::sort(got_ints.begin(), got_ints.end());
    CHECK(got_ints == std::vector<int>{0, 1, 2, 3, 4, 5});
    std::vector<std::string> got_strings = read_all(strings);
    std::sort(got_strings.begin(), got_strings.end());
    CHECK(got_strings == std::vector<std::string>{"a", "b"});
    CHECK(read_all(alphas).empty());

    REQUIRE(queue.producer<registry_alpha>("orders").try_produce(registry_alpha{42}));
    const std::vector<registry_alpha> got_alphas = read_all(alphas);
    REQUIRE(got_alphas.size() == 1);
    CHECK(got_alphas[0].value == 42);
    CHECK(read_all(ints).empty());
    CHECK(read_all(strings).empty());

    // Each buffer keeps its own partition count.
    CHECK(queue.create_pull_consumers<int>(automatic("orders", "three"), 3).size() == 3);
    CHECK(thrown_error([&] { queue.create_pull_consumers<std::string>(automatic("orders", "three"), 3); }).code() ==
          bq::errc::too_many_consumers);
}

TEST_CASE("buffer queue: registering the same item type and name twice fails with topic_exists", "[registry]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<int>{.name = "twice", .partitions = 2});
    const bq::error failure =
        thrown_error([&] { queue.add_topic(bq::memory_topic_options<int>{.name = "twice", .partitions = 5}); });
    CHECK(failure.code() == bq::errc::topic_exists);
    CHECK(contains(failure.what(), "'twice'"));

    // The first registration stays in force (2 partitions, not 5).
    CHECK(thrown_error([&] { queue.create_pull_consumers<int>(automatic("twice", "g"), 3); }).code() ==
          bq::errc::too_many_consumers);
    CHECK(queue.create_pull_consumers<int>(automatic("twice", "g"), 2).size() == 2);
}

TEST_CASE("buffer queue: an unknown topic name fails with no_such_topic", "[registry]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<int>{.name = "known"});

    const bq::error failure = thrown_error([&] { (void)queue.producer<int>("unknown"); });
    CHECK(failure.code() == bq::errc::no_such_topic);
    CHECK(contains(failure.what(), "'unknown'"));
    CHECK(thrown_error([&] { queue.create_pull_consumers<int>(automatic("unknown", "g"), 1); }).code() ==
          bq::errc::no_such_topic);
    CHECK(thrown_error([&] { (void)queue.producer<int>("Known"); }).code() == bq::errc::no_such_topic);
}

TEST_CASE("buffer queue: a name registered only for other item types fails with type_mismatch listing them",
          "[registry]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<registry_alpha>{.name = "shared"});
    queue.add_topic(bq::memory_topic_options<registry_beta>{.name = "shared"});

    const bq::error failure = thrown_error([&] { (void)queue.producer<registry_gamma>("shared"); });
    CHECK(failure.code() == bq::errc::type_mismatch);
    const std::string message = failure.what();
    INFO(message);
    CHECK(contains(message, "'shared'"));
    CHECK(contains(message, "registry_alpha"));
    CHECK(contains(message, "registry_beta"));
    CHECK(contains(message, "registry_gamma"));

    const bq::error consumer_failure =
        thrown_error([&] { queue.create_pull_consumers<registry_gamma>(automatic("shared", "g"), 1); });
    CHECK(consumer_failure.code() == bq::errc::type_mismatch);
    CHECK(contains(consumer_failure.what(), "registry_alpha"));
    CHECK(contains(consumer_failure.what(), "registry_beta"));

    // A failed lookup registers nothing: the name can still be added for the third type.
    queue.add_topic(bq::memory_topic_options<registry_gamma>{.name = "shared"});
    CHECK(queue.producer<registry_gamma>("shared").try_produce(registry_gamma{1.0}));
}

TEST_CASE("buffer queue: each invalid memory topic option fails with invalid_argument naming option and topic",
          "[registry][memory]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};

    const bq::error empty_name = thrown_error([&] { queue.add_topic(bq::memory_topic_options<int>{}); });
    CHECK(empty_name.code() == bq::errc::invalid_argument);
    CHECK(contains(empty_name.what(), "'name'"));

    struct invalid_case {
        const char* option;
        bq::memory_topic_options<int> options;
    };
    const invalid_case cases[] = {
        {"partitions", {.name = "bad-partitions", .partitions = 0}},
        {"partitions", {.name = "too-many-partitions", .partitions = bq::max_partitions + 1}},
        {"segment_size", {.name = "bad-segment", .segment_size = 0}},
        {"bounded_capacity", {.name = "bad-capacity", .bounded_capacity = 0}},
        {"full_mode", {.name = "bad-mode", .full_mode = static_cast<bq::full_mode>(7)}},
        {"producer_lanes", {.name = "too-many-lanes", .producer_lanes = 65}},
    };
    for (const invalid_case& each : cases) {
        INFO(each.option << " of " << each.options.name);
        const bq::error failure = thrown_error([&] { queue.add_topic(each.options); });
        CHECK(failure.code() == bq::errc::invalid_argument);
        CHECK(contains(failure.what(), "'" + std::string(each.option) + "'"));
        CHECK(contains(failure.what(), "'" + each.options.name + "'"));
        // Nothing was registered.
        CHECK(thrown_error([&] { (void)queue.producer<int>(each.options.name); }).code() == bq::errc::no_such_topic);
    }

    // The boundaries themselves are valid.
    queue.add_topic(bq::memory_topic_options<int>{.name = "smallest",
                                                  .partitions = 1,
                                                  .segment_size = 1,
                                                  .bounded_capacity = 1,
                                                  .full_mode = bq::full_mode::fail,
                                                  .producer_lanes = 1});
    CHECK(queue.producer<int>("smallest").try_produce(1));
    queue.add_topic(bq::memory_topic_options<int>{.name = "most-lanes", .partitions = 2, .producer_lanes = 64});
    CHECK(queue.producer<int>("most-lanes").try_produce(1));
}

TEST_CASE("buffer queue: consumer groups are unique per topic, not across topics", "[registry]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<int>{.name = "first", .partitions = 2});
    queue.add_topic(bq::memory_topic_options<int>{.name = "second", .partitions = 2});

    auto first = queue.create_pull_consumers<int>(automatic("first", "billing"), 2);
    const bq::error failure = thrown_error([&] { queue.create_pull_consumers<int>(automatic("first", "billing"), 1); });
    CHECK(failure.code() == bq::errc::group_exists);
    CHECK(contains(failure.what(), "'billing'"));
    CHECK(contains(failure.what(), "'first'"));
    // Once every consumer of the group is gone it may be opened again (it used to stay group_exists
    // for the queue's lifetime); group_lifecycle_test.cpp checks that it resumes from its commit.
    first.clear();
    CHECK(queue.create_pull_consumers<int>(automatic("first", "billing"), 2).size() == 2);

    // The same group name on another topic is a different group with its own progress.
    auto second = queue.create_pull_consumer<int>(automatic("second", "billing"));
    auto first_other = queue.create_pull_consumer<int>(automatic("first", "audit"));
    REQUIRE(queue.producer<int>("second").try_produce(7));
    CHECK(read_all(second) == std::vector<int>{7});
    CHECK(read_all(first_other).empty());
}

TEST_CASE("buffer queue: consumer count must be between 1 and the partition count", "[registry]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<int>{.name = "counted", .partitions = 3});

    const bq::error none = thrown_error([&] { queue.create_pull_consumers<int>(automatic("counted", "g"), 0); });
    CHECK(none.code() == bq::errc::too_many_consumers);
    CHECK(contains(none.what(), "'counted'"));
    const bq::error many = thrown_error([&] { queue.create_pull_consumers<int>(automatic("counted", "g"), 4); });
    CHECK(many.code() == bq::errc::too_many_consumers);
    CHECK(contains(many.what(), "'g'"));

    // A rejected request does not create the group.
    CHECK(queue.create_pull_consumers<int>(automatic("counted", "g"), 3).size() == 3);
    CHECK(queue.create_pull_consumers<int>(automatic("counted", "h"), 1).size() == 1);
}

TEST_CASE("buffer queue: an empty group name or a zero batch size fails with invalid_argument", "[registry]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<int>{.name = "validated", .partitions = 2});

    const bq::error empty_group = thrown_error(
        [&] { queue.create_pull_consumers<int>(bq::pull_consumer_options{.topic = "validated", .group = ""}, 1); });
    CHECK(empty_group.code() == bq::errc::invalid_argument);
    CHECK(contains(empty_group.what(), "'group'"));
    CHECK(contains(empty_group.what(), "'validated'"));

    const bq::error zero_batch = thrown_error([&] {
        queue.create_pull_consumers<int>(bq::pull_consumer_options{.topic = "validated", .group = "g", .batch_size = 0},
                                         1);
    });
    CHECK(zero_batch.code() == bq::errc::invalid_argument);
    CHECK(contains(zero_batch.what(), "'batch_size'"));
    CHECK(contains(zero_batch.what(), "'g'"));

    // Rejected options created no group.
    CHECK(queue.create_pull_consumers<int>(bq::pull_consumer_options{.topic = "validated", .group = "g"}, 2).size() ==
          2);
}

TEST_CASE("buffer queue: partitions are spread evenly and contiguously over a group's consumers", "[registry]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    using assignment = std::vector<std::vector<std::size_t>>;
    const auto assign = [&](std::size_t partitions, std::size_t consumers) {
        const std::string name = "spread-" + std::to_string(partitions) + "-" + std::to_string(consumers);
        queue.add_topic(bq::memory_topic_options<int>{.name = name, .partitions = partitions});
        assignment result;
        for (const auto& consumer : queue.create_pull_consumers<int>(automatic(name, "g"), consumers)) {
            result.push_back(consumer.partitions());
        }
        return result;
    };
    CHECK(assign(5, 2) == assignment{{0, 1, 2}, {3, 4}});
    CHECK(assign(8, 3) == assignment{{0, 1, 2}, {3, 4, 5}, {6, 7}});
    CHECK(assign(4, 4) == assignment{{0}, {1}, {2}, {3}});
    CHECK(assign(3, 1) == assignment{{0, 1, 2}});
    CHECK(assign(7, 4) == assignment{{0, 1}, {2, 3}, {4, 5}, {6}});
    CHECK(assign(1, 1) == assignment{{0}});
}

TEST_CASE("buffer queue: each consumer of a group reads only its assigned partitions", "[registry]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<int>{.name = "five", .partitions = 5});
    auto consumers = queue.create_pull_consumers<int>(automatic("five", "g"), 2);
    auto producer = queue.producer<int>("five");
    for (int i = 0; i < 10; ++i) {
        REQUIRE(producer.try_produce(i));  // round-robin: item i goes to partition i % 5
    }
    using by_partition = std::map<std::size_t, std::vector<int>>;
    CHECK(read_by_partition(consumers[0]) == by_partition{{0, {0, 5}}, {1, {1, 6}}, {2, {2, 7}}});
    CHECK(read_by_partition(consumers[1]) == by_partition{{3, {3, 8}}, {4, {4, 9}}});
}

TEST_CASE("buffer queue: after close, produce, add_topic and create fail with closed", "[registry]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<int>{.name = "closing", .partitions = 2});
    auto producer = queue.producer<int>("closing");
    auto consumer = queue.create_pull_consumer<int>(automatic("closing", "g"));
    REQUIRE(producer.try_produce(1));
    CHECK_FALSE(queue.is_closed());

    queue.close();
    CHECK(queue.is_closed());
    queue.close();  // idempotent
    CHECK(queue.is_closed());

    CHECK(thrown_error([&] { producer.try_produce(2); }).code() == bq::errc::closed);
    const std::vector<int> batch_input{3, 4};
    CHECK(thrown_error([&] { producer.try_produce(std::span<const int>(batch_input)); }).code() == bq::errc::closed);
    CHECK(thrown_error([&] { queue.add_topic(bq::memory_topic_options<int>{.name = "later"}); }).code() ==
          bq::errc::closed);
    CHECK(thrown_error([&] { queue.create_pull_consumers<int>(automatic("closing", "later"), 1); }).code() ==
          bq::errc::closed);
    CHECK(thrown_error([&] { (void)consumer.try_consume(); }).code() == bq::errc::closed);

    std::optional<boost::system::error_code> single;
    std::optional<boost::system::error_code> batched;
    std::optional<boost::system::error_code> consumed;
    producer.produce(5, [&](boost::system::error_code ec) { single = ec; });
    producer.produce(std::span<const int>(batch_input), [&](boost::system::error_code ec) { batched = ec; });
    consumer.consume([&](boost::system::error_code ec, bq::batch<int>) { consumed = ec; });
    io.run();
    REQUIRE(single);
    CHECK(*single == bq::errc::closed);
    REQUIRE(batched);
    CHECK(*batched == bq::errc::closed);
    REQUIRE(consumed);
    CHECK(*consumed == bq::errc::closed);
}

// A persistent topic of ints with small segments, in `directory`.
bq::mmap_topic_options<int> stored_topic(const std::filesystem::path& directory)
{
    return {.name = "stored", .partitions = 2, .data_directory = directory, .segment_size = 4096};
}

TEST_CASE("buffer queue: once the queue is destroyed, asynchronous produce, consume and commit on a persistent "
          "topic complete with closed",
          "[registry][mmap]")
{
    const bufferqueue::test::temporary_directory directory;
    boost::asio::io_context io;
    auto queue = std::make_unique<bq::buffer_queue>(io.get_executor());
    queue->add_topic(stored_topic(directory.path()));
    auto producer = queue->producer<int>("stored");
    auto consumer = queue->create_pull_consumer<int>({.topic = "stored", .group = "g", .batch_size = 4});
    REQUIRE(producer.try_produce(1));
    REQUIRE(consumer.try_consume());
    queue.reset();  // joins and frees the queue's I/O pool; the handles live on

    std::optional<boost::system::error_code> single;
    std::optional<boost::system::error_code> batched;
    std::optional<boost::system::error_code> consumed;
    std::optional<boost::system::error_code> committed;
    const std::vector<int> batch_input{3, 4};
    producer.produce(5, [&](boost::system::error_code ec) { single = ec; });
    producer.produce(std::span<const int>(batch_input), [&](boost::system::error_code ec) { batched = ec; });
    consumer.consume([&](boost::system::error_code ec, bq::batch<int>) { consumed = ec; });
    consumer.commit([&](boost::system::error_code ec) { committed = ec; });
    io.run();
    REQUIRE(single);
    CHECK(*single == bq::errc::closed);
    REQUIRE(batched);
    CHECK(*batched == bq::errc::closed);
    REQUIRE(consumed);
    CHECK(*consumed == bq::errc::closed);
    REQUIRE(committed);
    CHECK(*committed == bq::errc::closed);
}

TEST_CASE("buffer queue: operations started on another thread while the queue is destroyed complete without "
          "touching the destroyed I/O pool",
          "[registry][mmap][concurrency]")
{
    const bufferqueue::test::temporary_directory directory;
    boost::asio::io_context io;
    auto queue = std::make_unique<bq::buffer_queue>(io.get_executor());
    queue->add_topic(stored_topic(directory.path()));
    auto producer = queue->producer<int>("stored");
    auto consumer = queue->create_pull_consumer<int>({.topic = "stored", .group = "g", .batch_size = 4});

    std::atomic<bool> destroyed{false};
    std::atomic<int> started{0};
    std::atomic<int> completed{0};
    std::atomic<int> late_started{0};
    std::atomic<int> late_not_closed{0};  // operations started after the destruction that did not report closed
    std::promise<void> running;
    std::promise<void> go;
    std::thread other([&, go_signal = go.get_future()] {
        const auto start = [&](int item) {
            const bool late = destroyed.load();
            started += 2;
            late_started += late ? 2 : 0;
            const auto check = [&, late](boost::system::error_code ec) {
                if (late && ec != bq::errc::closed) {
                    ++late_not_closed;
                }
                ++completed;
            };
            producer.produce(item, check);
            consumer.commit(check);
        };
        for (int i = 0; i < 20; ++i) {
            start(i);
        }
        running.set_value();
        go_signal.wait();
        // Races with the destruction, then goes on after it.
        for (int i = 20; late_started.load() < 200; ++i) {
            start(i);
        }
    });
    running.get_future().wait();
    go.set_value();
    queue.reset();
    destroyed = true;
    other.join();
    io.run();  // the completions run on the handlers' (here the queue's former) executor
    CHECK(completed.load() == started.load());
    CHECK(late_started.load() > 0);
    CHECK(late_not_closed.load() == 0);
}

TEST_CASE("buffer queue: errc values compare equal to the codes of both exception types", "[registry]")
{
    const bq::error thrown(bq::errc::queue_full, "topic 'x' is full");
    CHECK(thrown.code() == bq::errc::queue_full);
    CHECK(thrown.code() != bq::errc::closed);
    CHECK(std::string(thrown.what()).find("topic 'x'") != std::string::npos);
    const std::system_error& as_std = thrown;
    CHECK(as_std.code() == bq::errc::queue_full);

    const boost::system::error_code boost_code = bq::errc::nothing_to_commit;
    CHECK(boost_code == bq::errc::nothing_to_commit);
    CHECK(boost_code != bq::errc::auto_commit_enabled);
    CHECK(boost_code.category() == bq::error_category());
    CHECK(std::string(bq::error_category().name()) == "bufferqueue");
    const std::error_code std_code = boost_code;
    CHECK(std_code == bq::errc::nothing_to_commit);
    CHECK(std_code != bq::errc::queue_full);
    CHECK(boost::system::system_error(boost_code).code() == bq::errc::nothing_to_commit);
    // Every code has its own message (the last enumerator is nothing_to_skip); an unknown one says so.
    const std::string unknown = bq::error_category().message(0);
    CHECK(unknown == "unknown bufferqueue error");
    for (int value = static_cast<int>(bq::errc::queue_full); value <= static_cast<int>(bq::errc::nothing_to_skip);
         ++value) {
        INFO("errc value " << value);
        CHECK(bq::error_category().message(value) != unknown);
    }
}

TEST_CASE("buffer queue: awaited failures throw boost::system::system_error comparing equal to errc", "[registry]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<int>{.name = "awaited", .partitions = 1});
    queue.add_topic(
        bq::memory_topic_options<int>{.name = "full", .bounded_capacity = 1, .full_mode = bq::full_mode::fail});
    auto automatic_consumer = queue.create_pull_consumer<int>(automatic("awaited", "automatic"));
    auto manual_consumer = queue.create_pull_consumer<int>({.topic = "awaited", .group = "manual"});
    auto full = queue.producer<int>("full");
    REQUIRE(full.try_produce(1));

    std::optional<boost::system::error_code> auto_commit;
    std::optional<boost::system::error_code> nothing;
    std::optional<boost::system::error_code> queue_full;
    bool finished = false;
    boost::asio::co_spawn(
        io,
        [&]() -> boost::asio::awaitable<void> {
            try {
                co_await automatic_consumer.commit();
            } catch (const boost::system::system_error& failure) {
                auto_commit = failure.code();
            }
            try {
                co_await manual_consumer.commit();
            } catch (const boost::system::system_error& failure) {
                nothing = failure.code();
            }
            try {
                co_await full.produce(2);
            } catch (const boost::system::system_error& failure) {
                queue_full = failure.code();
            }
            finished = true;
        },
        rethrow);
    io.run();
    CHECK(finished);
    REQUIRE(auto_commit);
    CHECK(*auto_commit == bq::errc::auto_commit_enabled);
    CHECK(std::error_code(*auto_commit) == bq::errc::auto_commit_enabled);
    REQUIRE(nothing);
    CHECK(*nothing == bq::errc::nothing_to_commit);
    REQUIRE(queue_full);
    CHECK(*queue_full == bq::errc::queue_full);
    CHECK(std::error_code(*queue_full) == bq::errc::queue_full);
}

TEST_CASE("buffer queue: produce, consume and commit complete through callbacks", "[registry]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<int>{.name = "callbacks", .partitions = 1});
    auto producer = queue.producer<int>("callbacks");
    auto consumer = queue.create_pull_consumer<int>({.topic = "callbacks", .group = "g"});

    std::vector<std::string> events;
    std::vector<int> received;
    consumer.consume([&](boost::system::error_code ec, bq::batch<int> delivered) {
        events.push_back("consumed: " + ec.message());
        received.assign(delivered.begin(), delivered.end());
        consumer.commit([&](boost::system::error_code commit_ec) {
            events.push_back("committed: " + commit_ec.message());
            CHECK_FALSE(commit_ec);
        });
    });
    io.poll();
    CHECK(events.empty());  // no data yet: the consume waits
    const std::vector<int> input{1, 2, 3};
    producer.produce(std::span<const int>(input), [&](boost::system::error_code ec) {
        events.push_back("produced: " + ec.message());
        CHECK_FALSE(ec);
    });
    io.run();
    // The produce and consume completions may run in either order; the commit follows the consume.
    REQUIRE(events.size() == 3);
    CHECK(std::count(events.begin(), events.end(), "produced: Success") == 1);
    const auto consumed_at = std::find(events.begin(), events.end(), "consumed: Success");
    REQUIRE(consumed_at != events.end());
    CHECK(std::find(consumed_at, events.end(), "committed: Success") != events.end());
    CHECK(received == input);

    // The commit took effect: the next consume starts after the batch.
    REQUIRE(producer.try_produce(4));
    io.restart();
    std::optional<std::vector<int>> next;
    consumer.consume([&](boost::system::error_code ec, bq::batch<int> delivered) {
        CHECK_FALSE(ec);
        next.emplace(delivered.begin(), delivered.end());
    });
    io.run();
    REQUIRE(next);
    CHECK(*next == std::vector<int>{4});
}

TEST_CASE("buffer queue: produce, consume and commit complete through use_future", "[registry]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<int>{.name = "futures", .partitions = 1});
    queue.add_topic(
        bq::memory_topic_options<int>{.name = "futures-full", .bounded_capacity = 1, .full_mode = bq::full_mode::fail});
    auto producer = queue.producer<int>("futures");
    auto automatic_consumer = queue.create_pull_consumer<int>(automatic("futures", "automatic"));
    auto consumer = queue.create_pull_consumer<int>({.topic = "futures", .group = "manual"});

    std::future<void> produced = producer.produce(10, boost::asio::use_future);
    produced.get();
    std::future<bq::batch<int>> consumed = consumer.consume(boost::asio::use_future);
    const bq::batch<int> delivered = consumed.get();
    REQUIRE(delivered.size() == 1);
    CHECK(delivered[0] == 10);
    consumer.commit(boost::asio::use_future).get();

    // A consume that has to wait completes once data arrives.
    std::future<bq::batch<int>> waiting = consumer.consume(boost::asio::use_future);
    const std::vector<int> input{11, 12};
    producer.produce(std::span<const int>(input), boost::asio::use_future).get();
    const bq::batch<int> second = waiting.get();
    CHECK(std::vector<int>(second.begin(), second.end()) == input);

    // Failures surface as boost::system::system_error from get().
    std::future<void> rejected = automatic_consumer.commit(boost::asio::use_future);
    try {
        rejected.get();
        FAIL("commit on an auto-commit consumer succeeded");
    } catch (const boost::system::system_error& failure) {
        CHECK(failure.code() == bq::errc::auto_commit_enabled);
    }
    auto full = queue.producer<int>("futures-full");
    REQUIRE(full.try_produce(1));
    std::future<void> full_produce = full.produce(2, boost::asio::use_future);
    try {
        full_produce.get();
        FAIL("produce into a full fail-mode topic succeeded");
    } catch (const boost::system::system_error& failure) {
        CHECK(failure.code() == bq::errc::queue_full);
    }
}

TEST_CASE("buffer queue: memory topics get producer lanes only where round-robin already spreads the order",
          "[registry][memory]")
{
    // The partitions the memory backend's make_topic hands to make_partitioned_topic.
    const auto lanes_of = [](const bq::memory_topic_options<int>& options) {
        const auto made = bq::detail::make_memory_partitions(options);
        REQUIRE(made.size() == options.partitions);
        return made[0].lane_count();
    };
    CHECK(lanes_of({.name = "spread", .partitions = 2}) == 8);
    CHECK(lanes_of({.name = "single", .partitions = 1}) == 1);
    CHECK(lanes_of({.name = "keyed", .partitions = 4, .partition_key = bq::key_selector<int>([](int v) {
                                                          return v;
                                                      })}) == 1);
    CHECK(lanes_of({.name = "chosen", .partitions = 1, .producer_lanes = 3}) == 3);
    CHECK(lanes_of({.name = "exact", .partitions = 4, .producer_lanes = 1}) == 1);
}

TEST_CASE("buffer queue: with one producer lane, a keyed partition keeps the order of appends across threads",
          "[registry][memory]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<int>{
        .name = "ordered", .partitions = 2, .partition_key = bq::key_selector<int>([](int) { return 7; })});
    auto producer = queue.producer<int>("ordered");
    // Two living threads take turns, each turn after the other's ended: the consumer must see the
    // turns in order (with a lane per thread it would see one thread's turns, then the other's).
    std::atomic<int> turn{0};
    std::atomic<int> refused{0};
    const auto take_turns = [&producer, &turn, &refused](int parity) {
        for (int round = parity; round < 8; round += 2) {
            while (turn.load() != round) {
                std::this_thread::yield();
            }
            for (int i = 0; i < 25; ++i) {
                refused += producer.try_produce(round * 25 + i) ? 0 : 1;
            }
            turn.store(round + 1);
        }
    };
    std::thread even(take_turns, 0);
    std::thread odd(take_turns, 1);
    even.join();
    odd.join();
    CHECK(refused == 0);
    auto consumers = queue.create_pull_consumers<int>(automatic("ordered", "reader"), 1);
    std::vector<int> read;
    while (auto delivered = consumers[0].try_consume()) {
        read.insert(read.end(), delivered->begin(), delivered->end());
    }
    std::vector<int> expected(200);
    std::iota(expected.begin(), expected.end(), 0);
    CHECK(read == expected);
}

}  // namespace buffer_queue_test
