// Tests of push subscriptions' dead-letter topics: a batch that failed max_attempts times goes to
// the dead-letter topic and is committed only once that produce is acknowledged, so every item is
// processed or dead-lettered, never neither - with the handler throwing, with the dead-letter
// produce failing, and with the process killed at any moment on persistent topics.
#include "bufferqueue/push_consumer.hpp"

#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/dead_letter.hpp"
#include "bufferqueue/memory/memory_topic.hpp"
#include "bufferqueue/mmap/mmap_topic.hpp"
#include "bufferqueue/retry_backoff.hpp"

#include "catch.hpp"
#include "push/push_test_support.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <future>
#include <mutex>
#include <random>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace push_dead_letter_test {

namespace {

namespace asio = boost::asio;
namespace bq = bufferqueue;
using bq::test::error_from;
using bq::test::int_topic;
using bq::test::items_of;
using bq::test::missing_from;
using bq::test::run_until_then_stop;
using bq::test::sink_log;
using std::chrono::milliseconds;

constexpr bq::retry_backoff quick = bq::test::quick_backoff;

/// The items of every batch a handler saw, in order.
struct delivery_record {
    std::vector<std::vector<int>> batches;
};

using numbers_queue = bq::test::numbers_queue<delivery_record>;

/// Everything the dead-letter topic holds now (a pull consumer of group `group`, auto commit).
std::vector<bq::dead_letter<int>> drain_letters(bq::pull_consumer<bq::dead_letter<int>>& reader)
{
    std::vector<bq::dead_letter<int>> letters;
    while (auto batch = reader.try_consume()) {
        letters.insert(letters.end(), batch->begin(), batch->end());
    }
    return letters;
}

std::vector<int> items_in(const std::vector<bq::dead_letter<int>>& letters)
{
    std::vector<int> items;
    for (const auto& each : letters) {
        items.push_back(each.item.value_or(-1));
    }
    return items;
}

std::uint64_t lag_of(bq::buffer_queue& queue, const std::string& topic, const std::string& group)
{
    for (const bq::group_stats& each : queue.stats<int>(topic).groups) {
        if (each.name == group) {
            return each.lag;
        }
    }
    FAIL("no group " << group << " on topic " << topic);
    return 0;
}

/// Registers group "work" on "numbers" (batches of 5, manual commit, one attempt, dead-letter topic
/// "numbers.dead") with a handler that records each batch in `fixture.log` and always throws.
void add_always_failing(numbers_queue& fixture)
{
    fixture.queue.add_push_consumer({.topic = "numbers",
                                     .group = "work",
                                     .batch_size = 5,
                                     .max_attempts = 1,
                                     .retry_backoff = quick,
                                     .dead_letter_topic = "numbers.dead"},
                                    [&fixture](bq::batch<int> items, bq::committer&) -> asio::awaitable<void> {
                                        fixture.log.batches.push_back(items_of(items));
                                        throw std::runtime_error("always fails");
                                        co_return;
                                    });
}

}  // namespace

TEST_CASE("push dead letters: a batch that failed max_attempts times goes to the dead-letter topic, is committed, "
          "and the loop goes on",
          "[push][dead_letter][memory]")
{
    numbers_queue fixture;
    fixture.queue.add_topic(bq::memory_topic_options<bq::dead_letter<int>>{.name = "numbers.dead"});
    auto reader = fixture.queue.create_pull_consumer<bq::dead_letter<int>>(
        {.topic = "numbers.dead", .group = "ops", .auto_commit = true});
    fixture.queue.add_push_consumer({.topic = "numbers",
                                     .group = "work",
                                     .batch_size = 5,
                                     .max_attempts = 2,
                                     .retry_backoff = quick,
                                     .dead_letter_topic = "numbers.dead"},
                                    [&](bq::batch<int> items, bq::committer& committer) -> asio::awaitable<void> {
                                        fixture.log.batches.push_back(items_of(items));
                                        if (items.front() == 5) {
                                            throw std::runtime_error("cannot handle 5..9");
                                        }
                                        co_await committer.commit();
                                    });
    fixture.start(15);
    REQUIRE(run_until_then_stop(fixture.io, fixture.queue, [&] { return fixture.log.batches.size() >= 4; }));

    // 0..4 once, 5..9 twice (max_attempts), then the loop went on with 10..14.
    CHECK(fixture.log.batches == std::vector<std::vector<int>>{bq::test::range(0, 5), bq::test::range(5, 10),
                                                               bq::test::range(5, 10), bq::test::range(10, 15)});
    const std::vector<bq::dead_letter<int>> letters = drain_letters(reader);
    CHECK(items_in(letters) == bq::test::range(5, 10));
    for (const auto& letter : letters) {
        CHECK(letter.topic == "numbers");
        CHECK(letter.partition == 0);
        CHECK(letter.attempts == 2);
        CHECK(letter.error.find("cannot handle 5..9") != std::string::npos);
        CHECK(letter.payload.empty());
        CHECK_FALSE(letter.offset);  // memory topics report no per-item offsets
    }
    CHECK(lag_of(fixture.queue, "numbers", "work") == 0);  // everything processed or dead-lettered
    // The group's push counters: two failed deliveries, one batch given up, five dead letters.
    const auto groups = fixture.queue.stats<int>("numbers").groups;
    REQUIRE(groups.size() == 1);
    CHECK(groups.front().push_failed_deliveries == 2);
    CHECK(groups.front().push_given_up_batches == 1);
    CHECK(groups.front().dead_letters == 5);
    const auto all = fixture.queue.stats();  // the same through the all-topics snapshot
    const auto numbers =
        std::find_if(all.begin(), all.end(), [](const bq::topic_stats& each) { return each.topic == "numbers"; });
    REQUIRE(numbers != all.end());
    REQUIRE(numbers->groups.size() == 1);
    CHECK(numbers->groups.front().dead_letters == 5);
    // Two failed attempts and one report that the batch was dead-lettered.
    REQUIRE(fixture.errors.size() == 3);
    CHECK(missing_from(fixture.errors.lines.back(), {"numbers|work|", "partition 0", "5 items", "failed 2 times",
                                                     "dead-letter topic", "committed", "cannot handle 5..9"}) == "");
}

TEST_CASE("push dead letters: while the dead-letter produce fails the batch stays uncommitted, and it is "
          "dead-lettered once the produce succeeds",
          "[push][dead_letter][memory]")
{
    numbers_queue fixture;
    // Room for 5 letters, one taken by an earlier letter: the batch's 5 letters are refused at once.
    fixture.queue.add_topic(bq::memory_topic_options<bq::dead_letter<int>>{
        .name = "numbers.dead", .bounded_capacity = 5, .full_mode = bq::full_mode::fail});
    auto reader = fixture.queue.create_pull_consumer<bq::dead_letter<int>>(
        {.topic = "numbers.dead", .group = "ops", .auto_commit = true});
    auto letters = fixture.queue.producer<bq::dead_letter<int>>("numbers.dead");
    REQUIRE(letters.try_produce(bq::dead_letter<int>{.item = -1}));
    add_always_failing(fixture);
    fixture.start(5);
    const auto refused = [&] { return fixture.errors.count("producing its dead letters failed"); };
    std::uint64_t lag_while_refused = 0;
    std::vector<bq::dead_letter<int>> received;
    REQUIRE(run_until_then_stop(fixture.io, fixture.queue, [&] {
        if (refused() < 3) {
            return false;
        }
        if (received.empty()) {
            lag_while_refused = lag_of(fixture.queue, "numbers", "work");
        }
        // Reading the earlier letter frees room: the next try succeeds.
        const auto more = drain_letters(reader);
        received.insert(received.end(), more.begin(), more.end());
        return received.size() == 6 && lag_of(fixture.queue, "numbers", "work") == 0;
    }));
    CHECK(lag_while_refused == 5);  // never committed while its letters were refused
    CHECK(items_in(received) == std::vector<int>{-1, 0, 1, 2, 3, 4});
    CHECK(fixture.log.batches.size() == 1);  // the handler is not called again: only the produce is retried
    CHECK(missing_from(fixture.errors.lines.at(1),
                       {"numbers|work|", "producing its dead letters failed", "uncommitted"}) == "");
}

TEST_CASE("push dead letters: a dead-letter key selector that throws is reported, tried again after the backoff, "
          "and stop() completes",
          "[push][dead_letter][memory]")
{
    numbers_queue fixture;
    std::atomic<bool> key_throws{true};
    fixture.queue.add_topic(bq::memory_topic_options<bq::dead_letter<int>>{
        .name = "numbers.dead", .partition_key = [&](const bq::dead_letter<int>&) {
            if (key_throws.load()) {
                throw std::runtime_error("the letter's key is broken");
            }
            return std::int64_t{1};
        }});
    auto reader = fixture.queue.create_pull_consumer<bq::dead_letter<int>>(
        {.topic = "numbers.dead", .group = "ops", .auto_commit = true});
    add_always_failing(fixture);
    fixture.start(5);
    const auto key_failures = [&] { return fixture.errors.count("the letter's key is broken"); };
    std::uint64_t lag_while_failing = 0;
    std::vector<bq::dead_letter<int>> received;
    REQUIRE(run_until_then_stop(fixture.io, fixture.queue, [&] {
        if (key_failures() < 3) {
            return false;  // reported every time, and tried again
        }
        if (key_throws.exchange(false)) {
            lag_while_failing = lag_of(fixture.queue, "numbers", "work");
        }
        const auto more = drain_letters(reader);
        received.insert(received.end(), more.begin(), more.end());
        return received.size() == 5 && lag_of(fixture.queue, "numbers", "work") == 0;
    }));
    CHECK(lag_while_failing == 5);  // never committed while its letters could not be produced
    CHECK(items_in(received) == bq::test::range(0, 5));
    CHECK(fixture.log.batches.size() == 1);  // only the produce is retried
    std::lock_guard lock(fixture.errors.mutex);
    const auto reported =
        std::find_if(fixture.errors.lines.begin(), fixture.errors.lines.end(),
                     [](const std::string& line) { return line.find("key is broken") != std::string::npos; });
    REQUIRE(reported != fixture.errors.lines.end());
    CHECK(missing_from(*reported, {"numbers|work|", "producing its dead letters failed", "uncommitted", "exception"}) ==
          "");
}

TEST_CASE("push dead letters: stop() from another thread ends the wait for a dead-letter produce that waits for room, "
          "with the loop on two io_context threads",
          "[push][dead_letter][memory][concurrency]")
{
    numbers_queue fixture;
    // Room for 5 letters, one taken: the batch's 5 letters wait for room nobody frees.
    fixture.queue.add_topic(bq::memory_topic_options<bq::dead_letter<int>>{
        .name = "numbers.dead", .bounded_capacity = 5, .full_mode = bq::full_mode::wait});
    auto reader = fixture.queue.create_pull_consumer<bq::dead_letter<int>>({.topic = "numbers.dead", .group = "ops"});
    REQUIRE(fixture.queue.producer<bq::dead_letter<int>>("numbers.dead").try_produce(bq::dead_letter<int>{.item = -1}));
    add_always_failing(fixture);
    auto work = asio::make_work_guard(fixture.io);
    std::vector<std::thread> threads;
    for (int each = 0; each < 2; ++each) {
        threads.emplace_back([&] { fixture.io.run(); });
    }
    fixture.start(5);
    const auto deadline = std::chrono::steady_clock::now() + bq::test::push_hang_guard;
    while (fixture.queue.stats<bq::dead_letter<int>>("numbers.dead").waiting_producers == 0 &&
           std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(milliseconds(1));
    }
    REQUIRE(fixture.queue.stats<bq::dead_letter<int>>("numbers.dead").waiting_producers == 1);

    std::future<void> stopped = fixture.queue.stop(asio::use_future);
    const bool completed = stopped.wait_for(bq::test::push_hang_guard) == std::future_status::ready;
    work.reset();
    fixture.queue.close();  // the waiting produce ends now, so the threads run out of work
    for (std::thread& each : threads) {
        each.join();
    }
    REQUIRE(completed);
    CHECK(lag_of(fixture.queue, "numbers", "work") == 5);  // uncommitted: the next run delivers it again
    CHECK(fixture.errors.count("stop() ended the wait for its dead letters") == 1);
}

TEST_CASE("push dead letters: a group removed and created again under the same name starts its counters at zero",
          "[push][dead_letter][stats][memory]")
{
    numbers_queue fixture;
    fixture.queue.add_topic(bq::memory_topic_options<bq::dead_letter<int>>{.name = "numbers.dead"});
    add_always_failing(fixture);
    fixture.start(5);
    REQUIRE(
        run_until_then_stop(fixture.io, fixture.queue, [&] { return lag_of(fixture.queue, "numbers", "work") == 0; }));
    {
        const auto groups = fixture.queue.stats<int>("numbers").groups;
        REQUIRE(groups.size() == 1);
        CHECK(groups.front().push_failed_deliveries == 1);
        CHECK(groups.front().push_given_up_batches == 1);
        CHECK(groups.front().dead_letters == 5);
    }
    REQUIRE(fixture.queue.remove_group<int>("numbers", "work"));
    auto again = fixture.queue.create_pull_consumer<int>({.topic = "numbers", .group = "work"});
    const auto groups = fixture.queue.stats<int>("numbers").groups;
    REQUIRE(groups.size() == 1);
    CHECK(groups.front().name == "work");
    CHECK(groups.front().push_failed_deliveries == 0);
    CHECK(groups.front().push_given_up_batches == 0);
    CHECK(groups.front().dead_letters == 0);
}

TEST_CASE("push dead letters: invalid dead-letter settings are refused, naming topic, group and option",
          "[push][dead_letter][memory]")
{
    numbers_queue fixture;
    fixture.queue.add_topic(int_topic("ints", 1));
    fixture.queue.add_topic(bq::memory_topic_options<bq::dead_letter<int>>{.name = "numbers.dead"});
    const auto manual = [](bq::batch<int>, bq::committer&) -> asio::awaitable<void> { co_return; };
    const auto automatic = [](bq::batch<int>) -> asio::awaitable<void> { co_return; };
    const bq::push_subscription good{
        .topic = "numbers", .group = "g", .max_attempts = 3, .dead_letter_topic = "numbers.dead"};

    auto missing = good;
    missing.dead_letter_topic = "nowhere";
    auto failure = error_from([&] { fixture.queue.add_push_consumer(missing, manual); });
    REQUIRE(failure);
    CHECK(failure->code() == bq::errc::no_such_topic);
    CHECK(missing_from(failure->what(), {"topic 'numbers'", "group 'g'", "'dead_letter_topic'", "nowhere"}) == "");

    auto wrong_type = good;
    wrong_type.dead_letter_topic = "ints";
    failure = error_from([&] { fixture.queue.add_push_consumer(wrong_type, manual); });
    REQUIRE(failure);
    CHECK(failure->code() == bq::errc::type_mismatch);

    failure = error_from([&] { fixture.queue.add_push_consumer(good, automatic); });
    REQUIRE(failure);
    CHECK(failure->code() == bq::errc::invalid_argument);
    CHECK(missing_from(failure->what(), {"group 'g'", "'dead_letter_topic'", "manual-commit"}) == "");

    auto unlimited = good;
    unlimited.max_attempts = 0;
    failure = error_from([&] { fixture.queue.add_push_consumer(unlimited, manual); });
    REQUIRE(failure);
    CHECK(failure->code() == bq::errc::invalid_argument);
    CHECK(missing_from(failure->what(), {"'dead_letter_topic'", "'max_attempts'"}) == "");

    // Nothing was left behind: the group was never created, and the good settings are accepted.
    const auto has_group = [&] {
        const auto groups = fixture.queue.stats<int>("numbers").groups;
        return std::any_of(groups.begin(), groups.end(), [](const bq::group_stats& each) { return each.name == "g"; });
    };
    CHECK_FALSE(has_group());
    fixture.queue.add_push_consumer(good, manual);
    CHECK(has_group());
}

using poisoned_serializer = bq::test::poisoned_string_serializer;

TEST_CASE("push dead letters: a record that does not decode goes to the dead-letter topic with its stored bytes, "
          "and the records after it are delivered",
          "[push][dead_letter][mmap]")
{
    const bq::test::temporary_directory directory;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    sink_log errors;
    queue.set_push_error_sink(errors.sink());
    queue.add_topic(bq::mmap_topic_options<std::string>{.name = "events",
                                                        .partitions = 1,
                                                        .data_directory = directory.path(),
                                                        .segment_size = 4096,
                                                        .serializer = poisoned_serializer{}});
    queue.add_topic(bq::memory_topic_options<bq::dead_letter<std::string>>{.name = "events.dead"});
    auto reader = queue.create_pull_consumer<bq::dead_letter<std::string>>(
        {.topic = "events.dead", .group = "ops", .auto_commit = true});
    std::vector<std::string> handled;
    queue.add_push_consumer({.topic = "events",
                             .group = "work",
                             .max_attempts = 1,
                             .retry_backoff = quick,
                             .dead_letter_topic = "events.dead"},
                            [&](bq::batch<std::string> items, bq::committer& committer) -> asio::awaitable<void> {
                                handled.insert(handled.end(), items.begin(), items.end());
                                co_await committer.commit();
                            });
    queue.start();
    REQUIRE(queue.producer<std::string>("events").try_produce(std::vector<std::string>{"first", "poison", "last"}));
    std::vector<bq::dead_letter<std::string>> letters;
    REQUIRE(run_until_then_stop(io, queue, [&] {
        while (auto batch = reader.try_consume()) {
            letters.insert(letters.end(), batch->begin(), batch->end());
        }
        return handled.size() == 2 && letters.size() == 1;
    }));
    CHECK(handled == std::vector<std::string>{"first", "last"});
    const bq::dead_letter<std::string>& letter = letters.front();
    CHECK_FALSE(letter.item);
    CHECK(std::string(reinterpret_cast<const char*>(letter.payload.data()), letter.payload.size()) == "poison");
    CHECK(letter.topic == "events");
    CHECK(letter.partition == 0);
    REQUIRE(letter.offset);
    CHECK(*letter.offset > 0);  // after the record "first"
    CHECK(letter.attempts == 1);
    CHECK(missing_from(letter.error, {"cannot decode the record at offset", "cannot deserialize poison"}) == "");
    CHECK(missing_from(errors.lines.back(), {"events|work|", "does not decode", "dead-letter topic", "skipped"}) == "");
}

// The property under a crash: a child process runs the push consumer (items whose batch holds a
// multiple of 7 always fail and are dead-lettered, the others are recorded in a file and
// committed) and is killed with SIGKILL at a random moment, three times; then this process runs it
// to the end. Every item must be recorded as processed or be in the dead-letter topic.
TEST_CASE("push dead letters: on persistent topics every item is processed or dead-lettered when the process is "
          "killed at any moment",
          "[push][dead_letter][mmap]")
{
    constexpr int item_count = 240;
    const bq::test::temporary_directory directory;
    const std::filesystem::path processed_file = directory.path() / "processed.txt";
    const auto add_topics = [&](bq::buffer_queue& queue) {
        queue.add_topic(bq::mmap_topic_options<int>{
            .name = "orders", .partitions = 2, .data_directory = directory.path(), .segment_size = 16 * 1024});
        queue.add_topic(bq::mmap_topic_options<bq::dead_letter<int>>{
            .name = "orders.dead", .partitions = 1, .data_directory = directory.path(), .segment_size = 64 * 1024});
    };
    const auto has_poison = [](const bq::batch<int>& items) {
        return std::any_of(items.begin(), items.end(), [](int value) { return value % 7 == 0; });
    };
    const bq::push_subscription subscription{.topic = "orders",
                                             .group = "work",
                                             .batch_size = 3,
                                             .concurrency = 2,
                                             .max_attempts = 2,
                                             .retry_backoff = quick,
                                             .dead_letter_topic = "orders.dead"};
    {
        asio::io_context io;
        bq::buffer_queue queue{io.get_executor()};
        add_topics(queue);
        const auto items = bq::test::range(0, item_count);
        REQUIRE(queue.producer<int>("orders").try_produce(std::span<const int>(items)));
    }

    std::minstd_rand random(2026);
    for (int round = 0; round < 3; ++round) {
        const pid_t child = ::fork();
        REQUIRE(child >= 0);
        if (child == 0) {
            // The child: no Catch2 here, only an exit status.
            int status = 3;
            try {
                const int file = ::open(processed_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
                asio::io_context io;
                bq::buffer_queue queue{io.get_executor()};
                add_topics(queue);
                queue.set_push_error_sink([](const bq::push_error&) {});
                queue.add_push_consumer(
                    subscription, [&](bq::batch<int> items, bq::committer& committer) -> asio::awaitable<void> {
                        if (has_poison(items)) {
                            throw std::runtime_error("poison");
                        }
                        // A little work per batch, so the kill lands in the middle.
                        asio::steady_timer pause(co_await asio::this_coro::executor, milliseconds(1));
                        co_await pause.async_wait(asio::use_awaitable);
                        std::string lines;
                        for (int value : items) {
                            lines += std::to_string(value) + "\n";
                        }
                        if (::write(file, lines.data(), lines.size()) < 0) {
                            throw std::runtime_error("cannot record");
                        }
                        co_await committer.commit();
                    });
                queue.start();
                io.run_for(std::chrono::seconds(30));  // killed long before
                status = 0;
            } catch (...) {
                status = 4;
            }
            ::_exit(status);
        }
        // Killed once it has recorded something new in this round (or after a hang guard), a random
        // moment later.
        const auto recorded_size = [&] {
            std::error_code ignored;
            const auto size = std::filesystem::file_size(processed_file, ignored);
            return ignored ? std::uintmax_t{0} : size;
        };
        const std::uintmax_t before = recorded_size();
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (recorded_size() == before && std::chrono::steady_clock::now() < give_up) {
            std::this_thread::sleep_for(milliseconds(1));
        }
        std::this_thread::sleep_for(milliseconds(random() % 40));
        REQUIRE(::kill(child, SIGKILL) == 0);
        int status = 0;
        REQUIRE(::waitpid(child, &status, 0) == child);
        INFO("round " << round << ": the child ended by itself with status " << WEXITSTATUS(status));
        REQUIRE(WIFSIGNALED(status));  // it was still running: the kill fell somewhere in its work
    }

    // This process finishes the work, then reads what was processed and what was dead-lettered.
    std::set<int> processed;
    std::vector<bq::dead_letter<int>> letters;
    {
        asio::io_context io;
        bq::buffer_queue queue{io.get_executor()};
        add_topics(queue);
        sink_log errors;
        queue.set_push_error_sink(errors.sink());
        queue.add_push_consumer(subscription,
                                [&](bq::batch<int> items, bq::committer& committer) -> asio::awaitable<void> {
                                    if (has_poison(items)) {
                                        throw std::runtime_error("poison");
                                    }
                                    co_await committer.commit();
                                    processed.insert(items.begin(), items.end());
                                });
        queue.start();
        REQUIRE(run_until_then_stop(io, queue, [&] { return lag_of(queue, "orders", "work") == 0; }));
        auto reader = queue.create_pull_consumer<bq::dead_letter<int>>(
            {.topic = "orders.dead", .group = "audit", .auto_commit = true, .batch_size = 1000});
        letters = drain_letters(reader);
    }
    // Every complete line of the children's record (a line the kill cut short has no newline, and
    // its batch was not committed: it was delivered again).
    const std::vector<unsigned char> recorded = bq::test::file_bytes(processed_file);
    std::string line;
    for (const unsigned char each : recorded) {
        if (each == '\n') {
            processed.insert(std::stoi(line));
            line.clear();
        } else {
            line.push_back(static_cast<char>(each));
        }
    }
    std::set<int> dead_lettered;
    for (const auto& letter : letters) {
        REQUIRE(letter.item);
        dead_lettered.insert(*letter.item);
        CHECK(letter.topic == "orders");
        CHECK(letter.attempts == 2);
        CHECK(letter.offset);  // mmap topics report each record's position
    }
    std::vector<int> neither;
    for (int value = 0; value < item_count; ++value) {
        if (!processed.contains(value) && !dead_lettered.contains(value)) {
            neither.push_back(value);
        }
    }
    CHECK(neither.empty());
    for (int value = 0; value < item_count; value += 7) {
        CHECK(dead_lettered.contains(value));  // a poisoned batch is never processed
    }
    CHECK(!processed.empty());
    INFO("processed " << processed.size() << ", dead-lettered " << dead_lettered.size() << " (" << letters.size()
                      << " letters)");
    CHECK(processed.size() + dead_lettered.size() >= item_count);
}

}  // namespace push_dead_letter_test
