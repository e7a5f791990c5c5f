// Tests of push consumers: registration by type and by callable, both lifetimes, both commit
// modes, redelivery, the error sink, start/stop semantics, configuration errors, mmap topics and
// (tagged [concurrency]) loops on a multi-threaded executor.
#include "bufferqueue/push_consumer.hpp"

#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/memory/memory_topic.hpp"
#include "bufferqueue/mmap/mmap_topic.hpp"

#include "catch.hpp"
#include "push/push_test_support.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace push_consumer_test {

namespace {

namespace asio = boost::asio;
namespace bq = bufferqueue;
using bq::test::error_from;
using bq::test::int_topic;
using bq::test::missing_from;
using bq::test::run_until_then_stop;
using bq::test::sink_log;
constexpr auto hang_guard = bq::test::push_hang_guard;

/// Counts, under a lock, how often each item was delivered (handlers may run on several threads).
struct delivery_log {
    std::mutex mutex;
    std::map<int, int> seen;
    std::size_t batches = 0;

    void record(const bq::batch<int>& items)
    {
        std::lock_guard lock(mutex);
        ++batches;
        for (int item : items) {
            ++seen[item];
        }
    }

    std::size_t distinct()
    {
        std::lock_guard lock(mutex);
        return seen.size();
    }

    int times(int item)
    {
        std::lock_guard lock(mutex);
        const auto found = seen.find(item);
        return found == seen.end() ? 0 : found->second;
    }
};

using numbers_queue = bq::test::numbers_queue<delivery_log>;

// ------------------------------------------------------------------------------- consumer types

delivery_log* singleton_log = nullptr;
std::atomic<int> singleton_instances{0};

struct singleton_auto_consumer {
    static constexpr bq::push_subscription subscription{.topic = "numbers",
                                                        .group = "singleton-auto",
                                                        .batch_size = 10,
                                                        .lifetime = bq::lifetime::singleton,
                                                        .concurrency = 2};

    singleton_auto_consumer() { ++singleton_instances; }

    asio::awaitable<void> consume(bq::batch<int> items)
    {
        singleton_log->record(items);
        co_return;
    }
};
static_assert(bq::push_consumer<singleton_auto_consumer>);
static_assert(bq::auto_commit_push_handler<singleton_auto_consumer, int>);

delivery_log* per_batch_log = nullptr;
std::atomic<int> per_batch_constructed{0};
std::atomic<int> per_batch_alive{0};

struct per_batch_manual_consumer {
    static constexpr bq::push_subscription subscription{.topic = "numbers",
                                                        .group = "per-batch-manual",
                                                        .batch_size = 7,
                                                        .lifetime = bq::lifetime::per_batch,
                                                        .concurrency = 3};

    per_batch_manual_consumer()
    {
        ++per_batch_constructed;
        ++per_batch_alive;
    }
    per_batch_manual_consumer(const per_batch_manual_consumer&) = delete;
    ~per_batch_manual_consumer() { --per_batch_alive; }

    asio::awaitable<void> consume(bq::batch<int> items, bq::committer& committer)
    {
        per_batch_log->record(items);
        CHECK_FALSE(committer.committed());
        co_await committer.commit();
        CHECK(committer.committed());
        CHECK(++uses_ == 1);  // a fresh instance for every batch
    }

    int uses_ = 0;
};
static_assert(bq::push_consumer<per_batch_manual_consumer>);
static_assert(bq::manual_commit_push_handler<per_batch_manual_consumer, int>);

/// Needs constructor arguments: registered with a factory.
struct prefixed_consumer {
    static constexpr bq::push_subscription subscription{
        .topic = "words", .group = "prefixed", .batch_size = 5, .lifetime = bq::lifetime::per_batch, .concurrency = 1};

    prefixed_consumer(std::string prefix, std::vector<std::string>& out) : prefix_(std::move(prefix)), out_(out) {}

    asio::awaitable<void> consume(bq::batch<std::string> items)
    {
        for (const std::string& item : items) {
            out_.push_back(prefix_ + item);
        }
        co_return;
    }

    std::string prefix_;
    std::vector<std::string>& out_;
};
static_assert(bq::push_consumer<prefixed_consumer>);

struct counting_consumer {
    static constexpr bq::push_subscription subscription{.topic = "words",
                                                        .group = "counting",
                                                        .batch_size = 100,
                                                        .lifetime = bq::lifetime::singleton,
                                                        .concurrency = 1};

    explicit counting_consumer(std::atomic<int>& count) : count_(count) {}

    asio::awaitable<void> consume(bq::batch<std::string> items)
    {
        count_ += static_cast<int>(items.size());
        co_return;
    }

    std::atomic<int>& count_;
};

struct not_a_consumer {
    asio::awaitable<void> consume(int) { co_return; }
};
static_assert(!bq::push_consumer<not_a_consumer>);

struct overloaded_consumer {
    static constexpr bq::push_subscription subscription{.topic = "numbers", .group = "both"};
    asio::awaitable<void> consume(bq::batch<int>);
    asio::awaitable<void> consume(bq::batch<int>, bq::committer&);
};
static_assert(!bq::push_consumer<overloaded_consumer>);  // ambiguous: both commit modes

// ---------------------------------------------------------------------------------------- tests

TEST_CASE("push consumer: a singleton auto-commit consumer type receives every item once, from one instance",
          "[push][memory]")
{
    numbers_queue fixture(4);
    singleton_log = &fixture.log;
    singleton_instances = 0;
    fixture.queue.add_push_consumers<singleton_auto_consumer>();
    CHECK(singleton_instances == 1);  // a singleton is made at registration

    fixture.run(1000, [&] { return fixture.log.distinct() == fixture.items.size(); });

    CHECK(singleton_instances == 1);
    for (int item : fixture.items) {
        CHECK(fixture.log.times(item) == 1);
    }
    CHECK(fixture.log.batches >= 100);  // batch_size 10
}

TEST_CASE("push consumer: a per-batch manual-commit consumer gets a fresh instance per batch, destroyed after it",
          "[push][memory]")
{
    numbers_queue fixture(3);
    per_batch_log = &fixture.log;
    per_batch_constructed = 0;
    per_batch_alive = 0;
    fixture.queue.add_push_consumers<per_batch_manual_consumer>();
    CHECK(per_batch_constructed == 0);  // per-batch instances are made per batch

    fixture.run(500, [&] { return fixture.log.distinct() == fixture.items.size(); });

    for (int item : fixture.items) {
        CHECK(fixture.log.times(item) == 1);  // committed, so never delivered again
    }
    CHECK(per_batch_constructed == static_cast<int>(fixture.log.batches));
    CHECK(per_batch_alive == 0);
}

TEST_CASE("push consumer: several types register in one call, and factories build types that need arguments",
          "[push][memory]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<std::string>{.name = "words", .partitions = 2});
    std::vector<std::string> prefixed;
    std::atomic<int> counted{0};
    queue.add_push_consumers<prefixed_consumer, counting_consumer>(
        [&] { return prefixed_consumer("p:", prefixed); },              // by value, per batch
        [&] { return std::make_unique<counting_consumer>(counted); });  // unique_ptr, singleton
    queue.start();
    const std::vector<std::string> words{"a", "b", "c", "d", "e", "f", "g"};
    REQUIRE(queue.producer<std::string>("words").try_produce(std::span<const std::string>(words)));
    REQUIRE(run_until_then_stop(io, queue, [&] { return prefixed.size() == words.size() && counted == 7; }));
    const std::multiset<std::string> got(prefixed.begin(), prefixed.end());
    CHECK(got == std::multiset<std::string>{"p:a", "p:b", "p:c", "p:d", "p:e", "p:f", "p:g"});
}

TEST_CASE("push consumer: a callable handler's item type is deduced, and per_batch calls a fresh copy",
          "[push][memory]")
{
    numbers_queue fixture(2);
    auto calls = std::make_shared<int>(0);
    fixture.queue.add_push_consumer(
        {.topic = "numbers", .group = "lambda", .batch_size = 4, .lifetime = bq::lifetime::per_batch, .concurrency = 2},
        [&log = fixture.log, calls, uses = 0](bq::batch<int> batch) mutable -> asio::awaitable<void> {
            CHECK(++uses == 1);  // the copy is fresh for every batch
            ++*calls;
            log.record(batch);
            co_return;
        });
    fixture.queue.add_push_consumer<int>({.topic = "numbers", .group = "explicit-type", .concurrency = 1},
                                         [](auto batch, bq::committer& committer) -> asio::awaitable<void> {
                                             for (int item : batch) {
                                                 CHECK(item >= 0);
                                             }
                                             co_await committer.commit();
                                         });
    fixture.run(40, [&] { return fixture.log.distinct() == fixture.items.size(); });
    CHECK(*calls == static_cast<int>(fixture.log.batches));
}

TEST_CASE("push consumer: under manual commit a batch whose handler throws is delivered again and reported",
          "[push][memory]")
{
    numbers_queue fixture(1);
    bool thrown = false;
    fixture.queue.add_push_consumer({.topic = "numbers", .group = "flaky", .batch_size = 5},
                                    [&](bq::batch<int> batch, bq::committer& committer) -> asio::awaitable<void> {
                                        fixture.log.record(batch);
                                        if (!thrown) {
                                            thrown = true;
                                            throw std::runtime_error("handler failed on purpose");
                                        }
                                        co_await committer.commit();
                                    });
    fixture.run(20, [&] { return fixture.log.distinct() == fixture.items.size(); });

    for (int item : fixture.items) {
        CHECK(fixture.log.times(item) == (item < 5 ? 2 : 1));  // the first batch came twice, nothing else did
    }
    REQUIRE(fixture.errors.lines.size() == 1);
    CHECK(fixture.errors.lines[0] == "numbers|flaky|handler failed on purpose|exception");
}

TEST_CASE("push consumer: under manual commit a handler that returns without committing gets the batch again",
          "[push][memory]")
{
    numbers_queue fixture(1);
    int calls = 0;
    fixture.queue.add_push_consumer({.topic = "numbers", .group = "retrying", .batch_size = 10},
                                    [&](bq::batch<int> batch, bq::committer& committer) -> asio::awaitable<void> {
                                        fixture.log.record(batch);
                                        if (++calls % 2 == 0) {  // every second call commits
                                            co_await committer.commit();
                                        }
                                    });
    fixture.run(30, [&] { return fixture.log.distinct() == fixture.items.size() && calls % 2 == 0; });
    for (int item : fixture.items) {
        CHECK(fixture.log.times(item) == 2);
    }
    CHECK(fixture.errors.size() == 0);
}

TEST_CASE("push consumer: under auto commit a batch whose handler throws is reported and not delivered again",
          "[push][memory]")
{
    numbers_queue fixture(1);
    fixture.queue.add_push_consumer({.topic = "numbers", .group = "lossy", .batch_size = 5},
                                    [&](bq::batch<int> batch) -> asio::awaitable<void> {
                                        fixture.log.record(batch);
                                        if (batch.front() == 0) {
                                            throw 42;  // not a std::exception
                                        }
                                        co_return;
                                    });
    fixture.run(20, [&] { return fixture.log.distinct() == fixture.items.size(); });
    for (int item : fixture.items) {
        CHECK(fixture.log.times(item) == 1);
    }
    REQUIRE(fixture.errors.lines.size() == 1);
    CHECK(fixture.errors.lines[0] == "numbers|lossy|unknown exception|exception");
}

TEST_CASE("push consumer: the default error sink writes one line naming topic, group and message", "[push]")
{
    bq::test::temporary_directory directory;
    const std::string path = directory.file("stderr.txt");
    std::fflush(stderr);
    const int saved = ::dup(2);
    REQUIRE(saved >= 0);
    REQUIRE(std::freopen(path.c_str(), "w", stderr) != nullptr);
    const std::runtime_error failure("disk on fire");
    bq::default_push_error_sink(
        {.topic = "t1", .group = "g1", .exception = std::make_exception_ptr(failure), .message = failure.what()});
    std::fflush(stderr);
    REQUIRE(::dup2(saved, 2) == 2);
    ::close(saved);
    std::ifstream written(path);
    std::stringstream text;
    text << written.rdbuf();
    CHECK(text.str() == "bufferqueue: push consumer of topic 't1' group 'g1' failed: disk on fire\n");
}

TEST_CASE("push consumer: stop waits for running handlers, and under manual commit nothing is lost across a restart",
          "[push][mmap]")
{
    bq::test::temporary_directory directory;
    const auto topic_options = [&] {
        return bq::mmap_topic_options<int>{
            .name = "durable", .partitions = 2, .data_directory = directory.path(), .segment_size = 64 * 1024};
    };
    const auto items = bq::test::range(0, 200);
    std::map<int, int> handled;  // items whose batch was committed, across both runs
    int running = 0;
    {
        asio::io_context io;
        bq::buffer_queue queue{io.get_executor()};
        queue.add_topic(topic_options());
        int batches = 0;
        queue.add_push_consumer({.topic = "durable", .group = "slow", .batch_size = 10, .concurrency = 2},
                                [&](bq::batch<int> items, bq::committer& committer) -> asio::awaitable<void> {
                                    ++batches;
                                    ++running;
                                    asio::steady_timer pause(co_await asio::this_coro::executor,
                                                             std::chrono::milliseconds(20));
                                    co_await pause.async_wait(asio::use_awaitable);  // stop() arrives meanwhile
                                    co_await committer.commit();
                                    for (int item : items) {
                                        ++handled[item];
                                    }
                                    --running;
                                });
        queue.start();
        REQUIRE(queue.producer<int>("durable").try_produce(std::span<const int>(items)));
        REQUIRE(run_until_then_stop(io, queue, [&] { return batches >= 3 && running > 0; }));
        CHECK(running == 0);  // stop() was requested during a handler and completed after it
        CHECK(handled.size() < items.size());
    }
    // The next run resumes from the committed offsets: the rest arrives, nothing twice.
    {
        asio::io_context io;
        bq::buffer_queue queue{io.get_executor()};
        queue.add_topic(topic_options());
        queue.add_push_consumer({.topic = "durable", .group = "slow", .batch_size = 50, .concurrency = 2},
                                [&](bq::batch<int> items, bq::committer& committer) -> asio::awaitable<void> {
                                    co_await committer.commit();
                                    for (int item : items) {
                                        ++handled[item];
                                    }
                                });
        queue.start();
        REQUIRE(run_until_then_stop(io, queue, [&] { return handled.size() == items.size(); }));
    }
    for (int item : items) {
        CHECK(handled[item] == 1);
    }
}

TEST_CASE("push consumer: under auto commit every pulled batch reaches its handler before stop completes",
          "[push][mmap]")
{
    bq::test::temporary_directory directory;
    const auto topic_options = [&] {
        return bq::mmap_topic_options<int>{
            .name = "auto", .partitions = 2, .data_directory = directory.path(), .segment_size = 64 * 1024};
    };
    const auto items = bq::test::range(0, 100);
    std::map<int, int> handled;
    for (int run = 0; run < 2; ++run) {
        asio::io_context io;
        bq::buffer_queue queue{io.get_executor()};
        queue.add_topic(topic_options());
        queue.add_push_consumer({.topic = "auto", .group = "auto-group", .batch_size = 10, .concurrency = 2},
                                [&](bq::batch<int> items) -> asio::awaitable<void> {
                                    asio::steady_timer pause(co_await asio::this_coro::executor,
                                                             std::chrono::milliseconds(5));
                                    co_await pause.async_wait(asio::use_awaitable);
                                    for (int item : items) {
                                        ++handled[item];
                                    }
                                });
        queue.start();
        if (run == 0) {
            REQUIRE(queue.producer<int>("auto").try_produce(std::span<const int>(items)));
            REQUIRE(run_until_then_stop(io, queue, [&] { return handled.size() >= 30; }));
            CHECK(handled.size() < items.size());
        } else {
            REQUIRE(run_until_then_stop(io, queue, [&] { return handled.size() == items.size(); }));
        }
    }
    for (int item : items) {
        CHECK(handled[item] == 1);
    }
}

TEST_CASE("push consumer: start and stop semantics", "[push][memory]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("numbers", 1));
    int calls = 0;
    const auto handler = [&](bq::batch<int>) -> asio::awaitable<void> {
        ++calls;
        co_return;
    };

    SECTION("stop before start completes at once and start is refused afterwards")
    {
        queue.add_push_consumer({.topic = "numbers", .group = "g"}, handler);
        bool stopped = false;
        queue.stop([&] { stopped = true; });
        io.run_for(hang_guard);
        CHECK(stopped);
        const auto failure = error_from([&] { queue.start(); });
        REQUIRE(failure);
        CHECK(failure->code() == bq::errc::closed);
    }
    SECTION("start twice is harmless; registering after start is refused")
    {
        queue.add_push_consumer({.topic = "numbers", .group = "g"}, handler);
        queue.start();
        queue.start();
        const auto failure =
            error_from([&] { queue.add_push_consumer({.topic = "numbers", .group = "late"}, handler); });
        REQUIRE(failure);
        CHECK(failure->code() == bq::errc::invalid_argument);
        CHECK(missing_from(failure->what(), {"'numbers'", "'late'", "start()"}) == "");
        REQUIRE(queue.producer<int>("numbers").try_produce(1));
        REQUIRE(run_until_then_stop(io, queue, [&] { return calls == 1; }));
        CHECK(calls == 1);  // one loop, not two
        const auto restart = error_from([&] { queue.start(); });
        REQUIRE(restart);
        CHECK(restart->code() == bq::errc::closed);
    }
    SECTION("stop with no push consumers completes")
    {
        queue.start();
        REQUIRE(run_until_then_stop(io, queue, [] { return true; }));
    }
    SECTION("start on a closed queue is refused")
    {
        queue.close();
        const auto failure = error_from([&] { queue.start(); });
        REQUIRE(failure);
        CHECK(failure->code() == bq::errc::closed);
    }
}

TEST_CASE("push consumer: destroying the queue while loops run ends them without touching the queue", "[push][memory]")
{
    asio::io_context io;
    auto queue = std::make_unique<bq::buffer_queue>(io.get_executor());
    queue->add_topic(int_topic("numbers", 2));
    auto seen = std::make_shared<std::atomic<int>>(0);
    queue->add_push_consumer({.topic = "numbers", .group = "g", .batch_size = 1, .concurrency = 2},
                             [seen](bq::batch<int> items, bq::committer& committer) -> asio::awaitable<void> {
                                 *seen += static_cast<int>(items.size());
                                 co_await committer.commit();
                             });
    queue->start();
    REQUIRE(queue->producer<int>("numbers").try_produce(1));
    REQUIRE(queue->producer<int>("numbers").try_produce(2));
    for (int round = 0; round < 1000 && *seen < 2; ++round) {
        io.run_one_for(std::chrono::milliseconds(10));
    }
    CHECK(*seen == 2);
    queue.reset();           // the loops are waiting for data
    io.run_for(hang_guard);  // they end, so the context runs out of work instead of timing out
    CHECK(io.stopped());
}

TEST_CASE("push consumer: configuration errors name the topic and group", "[push][memory]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("numbers", 2));
    queue.add_topic(bq::memory_topic_options<std::string>{.name = "words"});
    const auto handler = [](bq::batch<int>) -> asio::awaitable<void> { co_return; };
    const auto failure_of = [&](bq::push_subscription subscription) {
        return error_from([&] { queue.add_push_consumer(subscription, handler); });
    };

    struct expectation {
        bq::push_subscription subscription;
        bq::errc code;
        std::vector<std::string_view> parts;
    };
    const std::vector<expectation> cases{
        {{.topic = "missing", .group = "g"}, bq::errc::no_such_topic, {"'missing'"}},
        {{.topic = "words", .group = "g"}, bq::errc::type_mismatch, {"'words'"}},
        {{.topic = "numbers", .group = "g", .concurrency = 0}, bq::errc::too_many_consumers, {"'numbers'", "'g'", "0"}},
        {{.topic = "numbers", .group = "g", .concurrency = 3}, bq::errc::too_many_consumers, {"'numbers'", "'g'", "2"}},
        {{.topic = "numbers", .group = "g", .batch_size = 0},
         bq::errc::invalid_argument,
         {"'numbers'", "'g'", "batch_size"}},
        {{.topic = "numbers", .group = ""}, bq::errc::invalid_argument, {"'numbers'", "group"}},
        {{.topic = "numbers", .group = "g", .lifetime = static_cast<bq::lifetime>(7)},
         bq::errc::invalid_argument,
         {"'numbers'", "'g'", "lifetime"}},
    };
    for (const expectation& each : cases) {
        const auto failure = failure_of(each.subscription);
        REQUIRE(failure);
        CHECK(failure->code() == each.code);
        for (const std::string_view part : each.parts) {
            CHECK(missing_from(failure->what(), {part}) == "");
        }
    }

    // A group name already taken (by a pull consumer group or an earlier push consumer).
    const auto holder = queue.create_pull_consumer<int>({.topic = "numbers", .group = "taken"});  // open
    const auto taken = failure_of({.topic = "numbers", .group = "taken"});
    REQUIRE(taken);
    CHECK(taken->code() == bq::errc::group_exists);
    CHECK(missing_from(taken->what(), {"'numbers'", "'taken'"}) == "");
    queue.add_push_consumer({.topic = "numbers", .group = "push"}, handler);
    const auto twice = failure_of({.topic = "numbers", .group = "push"});
    REQUIRE(twice);
    CHECK(twice->code() == bq::errc::group_exists);
}

struct duplicate_a {
    static constexpr bq::push_subscription subscription{.topic = "numbers", .group = "same"};
    asio::awaitable<void> consume(bq::batch<int>) { co_return; }
};
struct duplicate_b {
    static constexpr bq::push_subscription subscription{.topic = "numbers", .group = "same"};
    asio::awaitable<void> consume(bq::batch<int>) { co_return; }
};
struct valid_c {
    static constexpr bq::push_subscription subscription{.topic = "numbers", .group = "c"};
    asio::awaitable<void> consume(bq::batch<int>) { co_return; }
};

TEST_CASE("push consumer: one call registering the same group twice is refused before creating any group",
          "[push][memory]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("numbers", 1));
    const auto failure = error_from([&] { queue.add_push_consumers<valid_c, duplicate_a, duplicate_b>(); });
    REQUIRE(failure);
    CHECK(failure->code() == bq::errc::invalid_argument);
    CHECK(missing_from(failure->what(), {"'numbers'", "'same'"}) == "");
    // Nothing was created: group "c" is still free.
    CHECK_NOTHROW(queue.create_pull_consumer<int>({.topic = "numbers", .group = "c"}));
}

struct later_singleton {
    static constexpr bq::push_subscription subscription{.topic = "numbers", .group = "later"};
    asio::awaitable<void> consume(bq::batch<int>) { co_return; }
};

TEST_CASE("push consumer: a registration whose later singleton factory fails leaves no group created",
          "[push][memory][groups]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("numbers", 2));
    const auto make_c = [] { return std::make_shared<valid_c>(); };
    SECTION("the factory throws")
    {
        const auto register_both = [&] {
            queue.add_push_consumers<valid_c, later_singleton>(
                make_c, []() -> std::shared_ptr<later_singleton> { throw std::runtime_error("no connection"); });
        };
        CHECK_THROWS_WITH(register_both(), Catch::Contains("no connection"));
    }
    SECTION("the factory returns null")
    {
        const auto failure = error_from([&] {
            queue.add_push_consumers<valid_c, later_singleton>(make_c,
                                                               [] { return std::shared_ptr<later_singleton>(); });
        });
        REQUIRE(failure);
        CHECK(failure->code() == bq::errc::invalid_argument);
        CHECK(missing_from(failure->what(), {"'numbers'", "'later'", "null"}) == "");
    }
    // Neither group exists: both can be created (and registered) now.
    CHECK_NOTHROW(queue.create_pull_consumer<int>({.topic = "numbers", .group = "c"}));
    CHECK_NOTHROW(queue.create_pull_consumer<int>({.topic = "numbers", .group = "later"}));
}

TEST_CASE("push consumer: a per-batch factory that throws is reported like a throwing handler", "[push][memory]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<std::string>{.name = "words"});
    sink_log errors;
    queue.set_push_error_sink(errors.sink());
    std::vector<std::string> prefixed;
    int attempts = 0;
    queue.add_push_consumers<prefixed_consumer>([&] {
        if (++attempts == 1) {
            throw std::runtime_error("no connection yet");
        }
        return prefixed_consumer(">", prefixed);
    });
    queue.start();
    REQUIRE(queue.producer<std::string>("words").try_produce(std::string("x")));
    REQUIRE(run_until_then_stop(io, queue, [&] { return errors.size() == 1; }));
    CHECK(errors.lines[0] == "words|prefixed|no connection yet|exception");
    CHECK(prefixed.empty());  // auto commit: the batch is gone with the failure
}

TEST_CASE("push consumer: loops on a multi-threaded executor deliver everything once and stop cleanly",
          "[push][memory][concurrency]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("numbers", 4));
    delivery_log manual_log;
    delivery_log auto_log;
    queue.add_push_consumer({.topic = "numbers", .group = "manual", .batch_size = 16, .concurrency = 4},
                            [&](bq::batch<int> items, bq::committer& committer) -> asio::awaitable<void> {
                                manual_log.record(items);
                                co_await committer.commit();
                            });
    queue.add_push_consumer(
        {.topic = "numbers", .group = "auto", .batch_size = 8, .lifetime = bq::lifetime::per_batch, .concurrency = 3},
        [&](bq::batch<int> items) -> asio::awaitable<void> {
            auto_log.record(items);
            co_return;
        });
    queue.start();
    constexpr int per_thread = 2000;
    std::vector<std::thread> threads;
    for (int thread = 0; thread < 2; ++thread) {
        threads.emplace_back([&, thread] {
            auto producer = queue.producer<int>("numbers");
            for (int i = 0; i < per_thread; ++i) {
                while (!producer.try_produce(thread * per_thread + i)) {
                }
            }
        });
    }
    std::atomic<bool> stopped{false};
    std::thread stopper([&] {
        const auto deadline = std::chrono::steady_clock::now() + hang_guard / 2;
        while ((manual_log.distinct() < 2 * per_thread || auto_log.distinct() < 2 * per_thread) &&
               std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        queue.stop([&] { stopped = true; });
    });
    std::vector<std::thread> runners;
    for (int runner = 0; runner < 2; ++runner) {
        runners.emplace_back([&] { io.run_for(hang_guard); });
    }
    for (auto& thread : threads) {
        thread.join();
    }
    stopper.join();
    for (auto& runner : runners) {
        runner.join();
    }
    CHECK(stopped);
    for (int item = 0; item < 2 * per_thread; ++item) {
        CHECK(manual_log.times(item) == 1);
        CHECK(auto_log.times(item) == 1);
    }
}

}  // namespace

}  // namespace push_consumer_test
