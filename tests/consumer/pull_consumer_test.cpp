// Tests of the pull consumer on memory topics: batch sizes and contents, ring scanning, auto and
// manual commit, consumer groups, waiting, closing, and the lifetime of a delivered batch.
#include "bufferqueue/pull_consumer.hpp"

#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/memory/memory_topic.hpp"

#include "catch.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace pull_consumer_test {

namespace {

namespace asio = boost::asio;
namespace bq = bufferqueue;
using bq::test::int_topic;
using bq::test::items_of;
using bq::test::range;
using bq::test::rethrow;

/// An item that names the partition it is routed to (through the topic's key selector).
struct tagged {
    std::uint32_t partition = 0;
    std::uint32_t seq = 0;
    friend bool operator==(const tagged&, const tagged&) = default;
};

/// A topic whose key selector sends `tagged{p, ...}` to partition p.
bq::memory_topic_options<tagged> keyed_topic(std::string name, std::size_t partitions, std::size_t segment_size = 1024)
{
    bq::memory_topic_options<tagged> options;
    options.name = std::move(name);
    options.partitions = partitions;
    options.segment_size = segment_size;
    options.partition_key = [](const tagged& item) { return static_cast<std::int64_t>(item.partition) + 1; };
    return options;
}

bq::pull_consumer_options group(std::string topic, std::string name, bool auto_commit, std::size_t batch_size)
{
    return {.topic = std::move(topic), .group = std::move(name), .auto_commit = auto_commit, .batch_size = batch_size};
}

/// Bounds every run of an io_context: a consume that never completes fails the test instead of
/// hanging it. A hang guard only; a passing run returns as soon as the context runs out of work.
constexpr auto hang_guard = std::chrono::minutes(1);

/// Bounds loops that wait for progress, so a consumer that stops advancing fails the test.
constexpr int max_rounds = 10000;

/// Runs `body` as a coroutine on `io` until the context runs out of work, then rethrows whatever
/// the coroutine threw, so a failed assertion inside it fails the test.
template <class Body>
void run_coroutine(asio::io_context& io, Body&& body)
{
    std::exception_ptr failure;
    bool finished = false;
    asio::co_spawn(io, std::forward<Body>(body), [&](std::exception_ptr thrown) {
        failure = thrown;
        finished = true;
    });
    io.restart();
    io.run_for(hang_guard);
    if (failure) {
        std::rethrow_exception(failure);
    }
    REQUIRE(finished);
}

std::vector<tagged> tagged_range(std::uint32_t partition, std::uint32_t first, std::uint32_t last)
{
    std::vector<tagged> values;
    for (std::uint32_t seq = first; seq < last; ++seq) {
        values.push_back({partition, seq});
    }
    return values;
}

/// A string long enough to live on the heap, so reading a destroyed copy is caught by ASan.
std::string heap_string(int value)
{
    return "item-" + std::to_string(value) + "-with-a-tail-too-long-for-the-small-string-buffer";
}

}  // namespace

TEST_CASE("pull consumer: a batch holds between 1 and batch_size items in produced order", "[consumer][memory]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("numbers", 1));
    auto producer = queue.producer<int>("numbers");
    auto consumer = queue.create_pull_consumer<int>(group("numbers", "g", true, 10));

    for (int value : range(0, 25)) {
        REQUIRE(producer.try_produce(value));
    }
    run_coroutine(io, [&]() -> asio::awaitable<void> {
        std::vector<std::size_t> sizes;
        std::vector<int> received;
        for (int round = 0; received.size() < 25 && round < max_rounds; ++round) {
            const bq::batch<int> delivered = co_await consumer.consume();
            REQUIRE(delivered.size() >= 1);
            REQUIRE(delivered.size() <= 10);
            REQUIRE(delivered.partition() == 0);
            sizes.push_back(delivered.size());
            received.insert(received.end(), delivered.begin(), delivered.end());
        }
        CHECK(received == range(0, 25));
        // A pull takes as much as is readable, up to batch_size.
        CHECK(sizes == std::vector<std::size_t>{10, 10, 5});

        // A single readable item is delivered at once; consume does not wait for a full batch.
        REQUIRE(producer.try_produce(25));
        const bq::batch<int> single = co_await consumer.consume();
        CHECK(items_of(single) == std::vector<int>{25});
    });
}

TEST_CASE("pull consumer: batches hold what was produced in per-partition order", "[consumer][memory]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};

    SECTION("round-robin topic, singles and spans, two consumers")
    {
        queue.add_topic(int_topic("numbers", 4, 8));
        auto producer = queue.producer<int>("numbers");
        auto consumers = queue.create_pull_consumers<int>(group("numbers", "g", false, 5), 2);
        const std::vector<int> values = range(0, 300);
        for (std::size_t at = 0; at < values.size();) {
            const std::size_t count = std::min<std::size_t>(at % 7 + 1, values.size() - at);
            if (count == 1) {
                REQUIRE(producer.try_produce(values[at]));
            } else {
                REQUIRE(producer.try_produce(std::span<const int>(values).subspan(at, count)));
            }
            at += count;
        }
        std::map<std::size_t, std::vector<int>> by_partition;
        run_coroutine(io, [&]() -> asio::awaitable<void> {
            std::size_t received = 0;
            for (int round = 0; received < values.size() && round < max_rounds; ++round) {
                for (auto& consumer : consumers) {
                    const std::optional<bq::batch<int>> delivered = consumer.try_consume();
                    if (!delivered) {
                        continue;
                    }
                    REQUIRE(!delivered->empty());
                    REQUIRE(delivered->size() <= 5);
                    const auto& owned = consumer.partitions();
                    REQUIRE(std::find(owned.begin(), owned.end(), delivered->partition()) != owned.end());
                    auto& sequence = by_partition[delivered->partition()];
                    sequence.insert(sequence.end(), delivered->begin(), delivered->end());
                    received += delivered->size();
                    co_await consumer.commit();
                }
            }
        });
        std::vector<int> all;
        for (const auto& [partition, sequence] : by_partition) {
            INFO("partition " << partition);
            CHECK(std::is_sorted(sequence.begin(), sequence.end()));
            all.insert(all.end(), sequence.begin(), sequence.end());
        }
        std::sort(all.begin(), all.end());
        CHECK(all == values);
        CHECK(by_partition.size() == 4);
    }

    SECTION("key-routed topic: every item arrives from its partition in input order")
    {
        queue.add_topic(keyed_topic("tagged", 3, 4));
        auto producer = queue.producer<tagged>("tagged");
        auto consumer = queue.create_pull_consumer<tagged>(group("tagged", "g", true, 3));
        std::vector<tagged> input;
        for (std::uint32_t seq = 0; seq < 90; ++seq) {
            input.push_back({(seq * 7) % 3, seq});
        }
        REQUIRE(producer.try_produce(std::span<const tagged>(input).first(40)));
        for (std::size_t at = 40; at < input.size(); ++at) {
            REQUIRE(producer.try_produce(input[at]));
        }
        std::map<std::uint32_t, std::vector<tagged>> by_partition;
        run_coroutine(io, [&]() -> asio::awaitable<void> {
            std::size_t received = 0;
            for (int round = 0; received < input.size() && round < max_rounds; ++round) {
                const bq::batch<tagged> delivered = co_await consumer.consume();
                for (const tagged& item : delivered) {
                    REQUIRE(item.partition == delivered.partition());
                    by_partition[item.partition].push_back(item);
                }
                received += delivered.size();
            }
        });
        for (std::uint32_t partition = 0; partition < 3; ++partition) {
            std::vector<tagged> expected;
            std::copy_if(input.begin(), input.end(), std::back_inserter(expected),
                         [&](const tagged& item) { return item.partition == partition; });
            INFO("partition " << partition);
            CHECK(by_partition[partition] == expected);
        }
    }
}

TEST_CASE("pull consumer: partitions are scanned as a ring so a busy partition cannot starve the others",
          "[consumer][memory]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(keyed_topic("tagged", 3));
    auto producer = queue.producer<tagged>("tagged");
    const bool auto_commit = GENERATE(true, false);
    INFO("auto_commit " << auto_commit);
    auto consumer = queue.create_pull_consumer<tagged>(group("tagged", "g", auto_commit, 10));

    // Takes one batch and returns its partition, committing it under manual commit.
    auto next_partition = [&]() -> asio::awaitable<std::size_t> {
        const bq::batch<tagged> delivered = co_await consumer.consume();
        const std::size_t partition = delivered.partition();
        if (!auto_commit) {
            co_await consumer.commit();
        }
        co_return partition;
    };

    SECTION("one busy partition and two with one item each: all three within the first rotation")
    {
        REQUIRE(producer.try_produce(std::span<const tagged>(tagged_range(0, 0, 1000))));
        REQUIRE(producer.try_produce(tagged{1, 0}));
        REQUIRE(producer.try_produce(tagged{2, 0}));
        run_coroutine(io, [&]() -> asio::awaitable<void> {
            std::set<std::size_t> first_rotation;
            for (int i = 0; i < 3; ++i) {
                first_rotation.insert(co_await next_partition());
            }
            CHECK(first_rotation == std::set<std::size_t>{0, 1, 2});
            // The rest comes from the busy partition; nothing was skipped or repeated.
            std::size_t remaining = 0;
            for (int round = 0; round < max_rounds; ++round) {
                const std::optional<bq::batch<tagged>> delivered = consumer.try_consume();
                if (!delivered) {
                    break;
                }
                CHECK(delivered->partition() == 0);
                remaining += delivered->size();
                if (!auto_commit) {
                    co_await consumer.commit();
                }
            }
            CHECK(remaining == 990);
        });
    }

    SECTION("every readable partition gets one pull per rotation, empty partitions are skipped")
    {
        for (std::uint32_t partition : {0U, 2U}) {
            REQUIRE(producer.try_produce(std::span<const tagged>(tagged_range(partition, 0, 100))));
        }
        run_coroutine(io, [&]() -> asio::awaitable<void> {
            std::vector<std::size_t> order;
            for (int i = 0; i < 6; ++i) {
                order.push_back(co_await next_partition());
            }
            // Partitions 0 and 2 alternate; partition 1 is empty and never delays them.
            for (std::size_t i = 1; i < order.size(); ++i) {
                CHECK(order[i] != order[i - 1]);
                CHECK(order[i] != 1);
            }
            // Data arriving at partition 1 joins the rotation at once: one pull each per rotation.
            REQUIRE(producer.try_produce(std::span<const tagged>(tagged_range(1, 0, 100))));
            std::vector<std::size_t> rotation;
            for (int i = 0; i < 6; ++i) {
                rotation.push_back(co_await next_partition());
            }
            const std::set<std::size_t> first(rotation.begin(), rotation.begin() + 3);
            CHECK(first == std::set<std::size_t>{0, 1, 2});
            for (std::size_t i = 3; i < rotation.size(); ++i) {
                CHECK(rotation[i] == rotation[i - 3]);
            }
        });
    }
}

TEST_CASE("pull consumer: auto-commit advances on pull so the next consume returns new items", "[consumer][memory]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("numbers", 1));
    auto producer = queue.producer<int>("numbers");
    auto consumer = queue.create_pull_consumer<int>(group("numbers", "g", true, 4));
    REQUIRE(producer.try_produce(std::span<const int>(range(0, 10))));

    run_coroutine(io, [&]() -> asio::awaitable<void> {
        std::vector<int> delivered;
        delivered = items_of(co_await consumer.consume());
        CHECK(delivered == range(0, 4));
        delivered = items_of(co_await consumer.consume());
        CHECK(delivered == range(4, 8));
        delivered = items_of(co_await consumer.consume());
        CHECK(delivered == range(8, 10));
    });
    // At most once: nothing that was delivered is delivered again.
    CHECK_FALSE(consumer.try_consume().has_value());
    REQUIRE(producer.try_produce(10));
    const std::optional<bq::batch<int>> last = consumer.try_consume();
    REQUIRE(last.has_value());
    CHECK(items_of(*last) == std::vector<int>{10});
}

TEST_CASE("pull consumer: an uncommitted batch is delivered again and commit() advances", "[consumer][memory]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};

    SECTION("one partition")
    {
        queue.add_topic(int_topic("numbers", 1));
        auto producer = queue.producer<int>("numbers");
        auto consumer = queue.create_pull_consumer<int>(group("numbers", "g", false, 4));
        REQUIRE(producer.try_produce(std::span<const int>(range(0, 10))));
        run_coroutine(io, [&]() -> asio::awaitable<void> {
            std::vector<int> delivered;
            delivered = items_of(co_await consumer.consume());
            CHECK(delivered == range(0, 4));
            delivered = items_of(co_await consumer.consume());
            CHECK(delivered == range(0, 4));
            co_await consumer.commit();
            delivered = items_of(co_await consumer.consume());
            CHECK(delivered == range(4, 8));
            delivered = items_of(co_await consumer.consume());
            CHECK(delivered == range(4, 8));
            co_await consumer.commit();
            delivered = items_of(co_await consumer.consume());
            CHECK(delivered == range(8, 10));
            co_await consumer.commit();
        });
        CHECK_FALSE(consumer.try_consume().has_value());
    }

    SECTION("several partitions: an uncommitted partition replays its batch on its next turn")
    {
        queue.add_topic(keyed_topic("tagged", 2));
        auto producer = queue.producer<tagged>("tagged");
        auto consumer = queue.create_pull_consumer<tagged>(group("tagged", "g", false, 4));
        REQUIRE(producer.try_produce(std::span<const tagged>(tagged_range(0, 0, 4))));
        REQUIRE(producer.try_produce(std::span<const tagged>(tagged_range(1, 0, 4))));
        run_coroutine(io, [&]() -> asio::awaitable<void> {
            const bq::batch<tagged> first = co_await consumer.consume();
            const std::vector<tagged> uncommitted = items_of(first);
            const std::size_t uncommitted_partition = first.partition();
            const bq::batch<tagged> second = co_await consumer.consume();
            CHECK(second.partition() != uncommitted_partition);
            co_await consumer.commit();  // commits the most recent batch only
            const bq::batch<tagged> replay = co_await consumer.consume();
            CHECK(replay.partition() == uncommitted_partition);
            CHECK(items_of(replay) == uncommitted);
            co_await consumer.commit();
        });
        CHECK_FALSE(consumer.try_consume().has_value());
    }
}

TEST_CASE("pull consumer: commit() under auto-commit fails with auto_commit_enabled", "[consumer][memory]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("numbers", 1));
    auto producer = queue.producer<int>("numbers");
    auto consumer = queue.create_pull_consumer<int>(group("numbers", "g", true, 4));
    REQUIRE(producer.try_produce(std::span<const int>(range(0, 8))));

    run_coroutine(io, [&]() -> asio::awaitable<void> {
        std::vector<int> delivered;
        boost::system::error_code ec;
        co_await consumer.commit(asio::redirect_error(asio::use_awaitable, ec));
        CHECK(ec == bq::errc::auto_commit_enabled);

        delivered = items_of(co_await consumer.consume());

        CHECK(delivered == range(0, 4));
        ec = {};
        co_await consumer.commit(asio::redirect_error(asio::use_awaitable, ec));
        CHECK(ec == bq::errc::auto_commit_enabled);

        // Under use_awaitable the failure is thrown as boost::system::system_error.
        bool thrown = false;
        try {
            co_await consumer.commit();
        } catch (const boost::system::system_error& failure) {
            thrown = true;
            CHECK(failure.code() == bq::errc::auto_commit_enabled);
        }
        CHECK(thrown);
        // The failed commit changed nothing: the next batch follows the auto-committed one.
        delivered = items_of(co_await consumer.consume());
        CHECK(delivered == range(4, 8));
    });
}

TEST_CASE("pull consumer: commit() with nothing pulled fails with nothing_to_commit", "[consumer][memory]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("numbers", 1));
    auto producer = queue.producer<int>("numbers");
    auto consumer = queue.create_pull_consumer<int>(group("numbers", "g", false, 4));

    run_coroutine(io, [&]() -> asio::awaitable<void> {
        std::vector<int> delivered;
        boost::system::error_code ec;
        co_await consumer.commit(asio::redirect_error(asio::use_awaitable, ec));
        CHECK(ec == bq::errc::nothing_to_commit);

        // An empty try_consume pulls nothing either.
        CHECK_FALSE(consumer.try_consume().has_value());
        ec = {};
        co_await consumer.commit(asio::redirect_error(asio::use_awaitable, ec));
        CHECK(ec == bq::errc::nothing_to_commit);

        REQUIRE(producer.try_produce(std::span<const int>(range(0, 6))));
        delivered = items_of(co_await consumer.consume());
        CHECK(delivered == range(0, 4));
        ec = {};
        co_await consumer.commit(asio::redirect_error(asio::use_awaitable, ec));
        CHECK_FALSE(ec);

        // Right after a commit there is nothing left to commit.
        co_await consumer.commit(asio::redirect_error(asio::use_awaitable, ec));
        CHECK(ec == bq::errc::nothing_to_commit);
        // ... and the failed commit did not move progress.
        delivered = items_of(co_await consumer.consume());
        CHECK(delivered == range(4, 6));
    });
}

TEST_CASE("pull consumer: consumer groups progress independently", "[consumer][memory]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("numbers", 3, 4));
    auto producer = queue.producer<int>("numbers");
    auto manual = queue.create_pull_consumers<int>(group("numbers", "manual", false, 5), 2);
    auto automatic = queue.create_pull_consumer<int>(group("numbers", "automatic", true, 7));
    REQUIRE(producer.try_produce(std::span<const int>(range(0, 60))));

    std::vector<int> by_manual;
    std::vector<int> by_automatic;
    run_coroutine(io, [&]() -> asio::awaitable<void> {
        // The manual group reads everything first and commits it.
        for (int round = 0; by_manual.size() < 60 && round < max_rounds; ++round) {
            for (auto& consumer : manual) {
                if (const auto delivered = consumer.try_consume()) {
                    by_manual.insert(by_manual.end(), delivered->begin(), delivered->end());
                    co_await consumer.commit();
                }
            }
        }
        // The other group still receives every item.
        for (int round = 0; by_automatic.size() < 60 && round < max_rounds; ++round) {
            const bq::batch<int> delivered = co_await automatic.consume();
            by_automatic.insert(by_automatic.end(), delivered.begin(), delivered.end());
        }
    });
    std::sort(by_manual.begin(), by_manual.end());
    std::sort(by_automatic.begin(), by_automatic.end());
    CHECK(by_manual == range(0, 60));
    CHECK(by_automatic == range(0, 60));
    for (auto& consumer : manual) {
        CHECK_FALSE(consumer.try_consume().has_value());
    }
    CHECK_FALSE(automatic.try_consume().has_value());
}

TEST_CASE("pull consumer: a consume while another is pending fails with operation_in_progress", "[consumer][memory]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("numbers", 2));
    auto producer = queue.producer<int>("numbers");
    auto consumer = queue.create_pull_consumer<int>(group("numbers", "g", false, 4));

    std::vector<int> first_delivery;
    boost::system::error_code second_consume;
    boost::system::error_code commit_while_pending;
    bool try_consume_rejected = false;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            first_delivery = items_of(co_await consumer.consume());  // waits: the topic is empty
            co_await consumer.commit();
        },
        rethrow);
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            co_await consumer.consume(asio::redirect_error(asio::use_awaitable, second_consume));
            co_await consumer.commit(asio::redirect_error(asio::use_awaitable, commit_while_pending));
            try {
                (void)consumer.try_consume();
            } catch (const bq::error& failure) {
                try_consume_rejected = failure.code() == bq::errc::operation_in_progress;
            }
            // The first consume is still pending and receives this item.
            REQUIRE(producer.try_produce(42));
        },
        rethrow);
    io.run_for(hang_guard);
    CHECK(second_consume == bq::errc::operation_in_progress);
    CHECK(commit_while_pending == bq::errc::operation_in_progress);
    CHECK(try_consume_rejected);
    CHECK(first_delivery == std::vector<int>{42});
}

TEST_CASE("pull consumer: try_consume returns nullopt when empty and never waits", "[consumer][memory]")
{
    // Nothing runs the io_context here: a waiting try_consume could not return at all.
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("numbers", 3));
    auto producer = queue.producer<int>("numbers");
    auto consumer = queue.create_pull_consumer<int>(group("numbers", "g", true, 10));

    CHECK_FALSE(consumer.try_consume().has_value());
    REQUIRE(producer.try_produce(7));
    const std::optional<bq::batch<int>> delivered = consumer.try_consume();
    REQUIRE(delivered.has_value());
    CHECK(items_of(*delivered) == std::vector<int>{7});
    CHECK_FALSE(consumer.try_consume().has_value());
    CHECK(io.poll() == 0);  // no work was queued to wait for data
}

TEST_CASE("pull consumer: a waiting consume resumes when any of its partitions receives data", "[consumer][memory]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(keyed_topic("tagged", 3));
    auto producer = queue.producer<tagged>("tagged");
    auto consumer = queue.create_pull_consumer<tagged>(group("tagged", "g", true, 10));
    const std::uint32_t target = GENERATE(0U, 1U, 2U);

    std::optional<std::vector<tagged>> delivered;
    std::size_t from_partition = 99;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            const bq::batch<tagged> received = co_await consumer.consume();
            delivered = items_of(received);
            from_partition = received.partition();
        },
        rethrow);
    REQUIRE(io.poll() > 0);
    REQUIRE_FALSE(delivered.has_value());  // suspended: every partition is empty

    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            co_await producer.produce(tagged{target, 5});
        },
        rethrow);
    io.run_for(hang_guard);
    REQUIRE(delivered.has_value());
    CHECK(*delivered == std::vector<tagged>{tagged{target, 5}});
    CHECK(from_partition == target);
}

TEST_CASE("pull consumer: closing completes a pending consume with operation_aborted", "[consumer][memory]")
{
    asio::io_context io;
    std::optional<bq::buffer_queue> queue;
    queue.emplace(io.get_executor());
    queue->add_topic(int_topic("numbers", 2));
    auto producer = queue->producer<int>("numbers");
    std::optional<bq::pull_consumer<int>> consumer = queue->create_pull_consumer<int>(group("numbers", "g", false, 4));

    boost::system::error_code result;
    bool resumed = false;
    asio::co_spawn(
        io,
        [&, state = &*consumer]() -> asio::awaitable<void> {
            co_await state->consume(asio::redirect_error(asio::use_awaitable, result));
            resumed = true;
        },
        rethrow);
    REQUIRE(io.poll() > 0);
    REQUIRE_FALSE(resumed);

    SECTION("close()")
    {
        consumer->close();
    }
    SECTION("destroying the handle")
    {
        consumer.reset();
    }
    SECTION("closing the queue")
    {
        queue->close();
    }
    SECTION("destroying the queue")
    {
        queue.reset();
    }

    io.run_for(hang_guard);  // returns once the pending consume completed
    CHECK(resumed);
    CHECK(result == asio::error::operation_aborted);
}

TEST_CASE("pull consumer: destroying a consumer whose wake-up was dropped leaves its partitions usable",
          "[consumer][memory]")
{
    // A consumer waits on two partitions; data on one of them wakes it, but the io_context that
    // would run the wake-up is destroyed first. The consumer must not stay registered with the
    // other partition after it is gone (ASan reports the use after free otherwise).
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(keyed_topic("tagged", 2));
    auto producer = queue.producer<tagged>("tagged");
    {
        auto consumer = queue.create_pull_consumer<tagged>(group("tagged", "g", true, 10));
        std::optional<asio::io_context> consumer_io;
        consumer_io.emplace();
        bool resumed = false;
        asio::co_spawn(
            *consumer_io,
            [&]() -> asio::awaitable<void> {
                (void)co_await consumer.consume();
                resumed = true;
            },
            asio::detached);
        REQUIRE(consumer_io->poll() > 0);
        REQUIRE(producer.try_produce(tagged{0, 1}));  // posts the wake-up to consumer_io
        consumer_io.reset();                          // ... which never runs it
        CHECK_FALSE(resumed);
    }
    // Data for the other partition notifies its waiters.
    REQUIRE(producer.try_produce(tagged{1, 1}));
    auto late = queue.create_pull_consumer<tagged>(group("tagged", "late", true, 10));
    std::size_t received = 0;
    for (int round = 0; round < max_rounds; ++round) {
        const auto delivered = late.try_consume();
        if (!delivered) {
            break;
        }
        received += delivered->size();
    }
    CHECK(received == 2);
}

TEST_CASE("pull consumer: consume after close fails with closed", "[consumer][memory]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("numbers", 1));
    auto producer = queue.producer<int>("numbers");
    auto consumer = queue.create_pull_consumer<int>(group("numbers", "g", false, 4));
    REQUIRE(producer.try_produce(std::span<const int>(range(0, 4))));

    SECTION("the consumer is closed")
    {
        consumer.close();
    }
    SECTION("the queue is closed")
    {
        queue.close();
    }

    run_coroutine(io, [&]() -> asio::awaitable<void> {
        boost::system::error_code ec;
        const bq::batch<int> delivered = co_await consumer.consume(asio::redirect_error(asio::use_awaitable, ec));
        CHECK(ec == bq::errc::closed);
        CHECK(delivered.empty());

        bool thrown = false;
        try {
            (void)co_await consumer.consume();
        } catch (const boost::system::system_error& failure) {
            thrown = true;
            CHECK(failure.code() == bq::errc::closed);
        }
        CHECK(thrown);

        ec = {};
        co_await consumer.commit(asio::redirect_error(asio::use_awaitable, ec));
        CHECK(ec == bq::errc::closed);
    });
    bool try_consume_rejected = false;
    try {
        (void)consumer.try_consume();
    } catch (const bq::error& failure) {
        try_consume_rejected = failure.code() == bq::errc::closed;
    }
    CHECK(try_consume_rejected);
}

TEST_CASE("pull consumer: a batch stays valid until the next consume also while segments are recycled",
          "[consumer][memory]")
{
    // Segments of 4 items; the holder's batches end at segment boundaries, so without the batch
    // keeping its segment alive, the holder's own commit would recycle it and the producer would
    // reuse it. Run under ASan to catch a use after recycle that leaves the old values in place.
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    bq::memory_topic_options<std::string> options;
    options.name = "strings";
    options.segment_size = 4;
    queue.add_topic(std::move(options));
    auto producer = queue.producer<std::string>("strings");
    const bool auto_commit = GENERATE(true, false);
    INFO("holder auto_commit " << auto_commit);
    auto holder = queue.create_pull_consumer<std::string>(group("strings", "holder", auto_commit, 4));
    auto racer = queue.create_pull_consumer<std::string>(group("strings", "racer", true, 3));

    int produced = 0;
    auto produce = [&](int count) {
        for (int i = 0; i < count; ++i) {
            REQUIRE(producer.try_produce(heap_string(produced++)));
        }
    };
    produce(16);
    run_coroutine(io, [&]() -> asio::awaitable<void> {
        int expected_next = 0;
        for (int round = 0; round < 40; ++round) {
            const bq::batch<std::string> held = co_await holder.consume();
            REQUIRE(held.size() == 4);
            if (!auto_commit) {
                co_await holder.commit();
            }
            // The racing group reads and commits everything while the producer keeps producing.
            for (int burst = 0; burst < 6; ++burst) {
                produce(5);
                for (int drained = 0; drained < max_rounds; ++drained) {
                    const std::optional<bq::batch<std::string>> raced = racer.try_consume();
                    if (!raced) {
                        break;
                    }
                    REQUIRE(!raced->empty());
                }
            }
            for (std::size_t i = 0; i < held.size(); ++i) {
                REQUIRE(held[i] == heap_string(expected_next + static_cast<int>(i)));
            }
            expected_next += 4;
        }
    });
}

TEST_CASE("pull consumer: consume and commit accept callback completion tokens", "[consumer][memory]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("numbers", 1));
    auto producer = queue.producer<int>("numbers");
    auto consumer = queue.create_pull_consumer<int>(group("numbers", "g", false, 4));

    std::vector<int> delivered;
    boost::system::error_code consume_error = asio::error::would_block;
    boost::system::error_code commit_error = asio::error::would_block;
    consumer.consume([&](boost::system::error_code ec, bq::batch<int> received) {
        consume_error = ec;
        delivered = items_of(received);
        consumer.commit([&](boost::system::error_code committed) { commit_error = committed; });
    });
    REQUIRE(producer.try_produce(std::span<const int>(range(0, 3))));
    io.run_for(hang_guard);
    CHECK_FALSE(consume_error);
    CHECK(delivered == range(0, 3));
    CHECK_FALSE(commit_error);
    CHECK_FALSE(consumer.try_consume().has_value());
}

TEST_CASE("pull consumer: a wake-up completes the consume in the handler that resumes it, never inside consume()",
          "[consumer][memory]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("numbers", 2));
    auto producer = queue.producer<int>("numbers");
    auto consumer = queue.create_pull_consumer<int>(group("numbers", "g", true, 10));

    std::vector<int> delivered;
    int completions = 0;
    auto record = [&](boost::system::error_code ec, bq::batch<int> received) {
        REQUIRE_FALSE(ec);
        delivered = items_of(received);
        ++completions;
    };

    // Ready data: the initiating call posts the completion.
    REQUIRE(producer.try_produce(1));
    consumer.consume(record);
    CHECK(completions == 0);
    REQUIRE(io.run_one() == 1);
    CHECK(completions == 1);
    CHECK(delivered == std::vector<int>{1});
    io.restart();  // it ran out of work

    // A waiting consume is not completed by the call that parks it either.
    consumer.consume(record);
    CHECK(io.poll() == 0);
    CHECK(completions == 1);

    // Woken by data produced outside the io_context, it completes in the one handler that resumes it.
    REQUIRE(producer.try_produce(2));
    CHECK(completions == 1);
    REQUIRE(io.run_one() == 1);
    CHECK(completions == 2);
    CHECK(delivered == std::vector<int>{2});
    CHECK(io.poll() == 0);
}

TEST_CASE("pull consumer: a handler that consumes again from its completion never nests", "[consumer][memory]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("numbers", 1));
    auto producer = queue.producer<int>("numbers");
    auto consumer = queue.create_pull_consumer<int>(group("numbers", "g", true, 1));

    struct chain {
        bq::pull_consumer<int>* consumer;
        std::vector<int>* delivered;
        int* depth;
        int* deepest;
        void operator()(boost::system::error_code ec, bq::batch<int> received) const
        {
            ++*depth;
            *deepest = std::max(*deepest, *depth);
            if (!ec) {
                delivered->insert(delivered->end(), received.begin(), received.end());
                consumer->consume(*this);
            }
            --*depth;
        }
    };
    std::vector<int> delivered;
    int depth = 0;
    int deepest = 0;
    consumer.consume(chain{&consumer, &delivered, &depth, &deepest});
    REQUIRE(io.poll() == 0);

    // Every wake-up completes inline in its handler and the handler's next consume either parks or
    // finds the rest of the burst; neither may complete inside that consume.
    constexpr int rounds = 2000;
    int produced = 0;
    for (int round = 0; round < rounds; ++round) {
        const int burst = round % 3 + 1;
        for (int item = 0; item < burst; ++item) {
            REQUIRE(producer.try_produce(produced++));
        }
        io.poll();
        REQUIRE(delivered.size() == static_cast<std::size_t>(produced));
    }
    CHECK(deepest == 1);
    CHECK(delivered == range(0, produced));
    consumer.close();
    io.poll();
    CHECK(depth == 0);
}

TEST_CASE("pull consumer: co_await consume() of ready batches resumes at once and yields to the io_context "
          "after at most 16 in a row",
          "[consumer][memory]")
{
    asio::io_context io(1);
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("numbers", 1));
    auto producer = queue.producer<int>("numbers");
    constexpr int total = 1700;
    for (int item = 0; item < total; ++item) {
        REQUIRE(producer.try_produce(item));
    }
    auto consumer = queue.create_pull_consumer<int>(group("numbers", "g", true, 1));

    // A handler that posts itself again until the consumer is done: it runs once per pass of the
    // io_context's queue, so its count is how often the consuming coroutine let other handlers run.
    bool done = false;
    int ticks = 0;
    std::function<void()> tick = [&] {
        if (!done) {
            ++ticks;
            asio::post(io, tick);
        }
    };
    std::vector<int> delivered;
    run_coroutine(io, [&]() -> asio::awaitable<void> {
        asio::post(io, tick);
        while (delivered.size() < static_cast<std::size_t>(total)) {
            bq::batch<int> received = co_await consumer.consume();
            delivered.insert(delivered.end(), received.begin(), received.end());
        }
        done = true;
    });
    CHECK(delivered == range(0, total));
    // Every consume through the executor (as a callback's is) would let the tick run 1,700 times; a
    // coroutine that never yielded would let it run once. One pass per 17 consumes: 100.
    CHECK(ticks >= total / 17 - 1);
    CHECK(ticks <= total / 17 + 2);
}

TEST_CASE("pull consumer: a woken callback consume completes on the executor bound to its handler",
          "[consumer][memory]")
{
    asio::io_context topic_io;
    asio::io_context handler_io;
    bq::buffer_queue queue{topic_io.get_executor()};
    queue.add_topic(int_topic("numbers", 1));
    auto producer = queue.producer<int>("numbers");
    auto consumer = queue.create_pull_consumer<int>(group("numbers", "g", true, 10));

    bool completed = false;
    bool on_handler_io = false;
    consumer.consume(asio::bind_executor(handler_io, [&](boost::system::error_code ec, bq::batch<int> received) {
        CHECK_FALSE(ec);
        CHECK(items_of(received) == std::vector<int>{7});
        completed = true;
        on_handler_io = handler_io.get_executor().running_in_this_thread();
    }));
    REQUIRE(handler_io.poll() == 0);

    REQUIRE(producer.try_produce(7));
    CHECK(topic_io.poll() == 0);  // nothing of the consume runs on the topic's executor
    CHECK_FALSE(completed);
    handler_io.run_for(hang_guard);
    CHECK(completed);
    CHECK(on_handler_io);
}

TEST_CASE("pull consumer: cancel() aborts a waiting consume and leaves the consumer usable",
          "[consumer][memory][cancellation]")
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("numbers", 2));
    auto producer = queue.producer<int>("numbers");
    auto consumer = queue.create_pull_consumer<int>(group("numbers", "g", false, 4));

    std::optional<boost::system::error_code> result;
    consumer.consume([&](boost::system::error_code error, bq::batch<int>) { result = error; });
    io.poll();
    REQUIRE_FALSE(result.has_value());

    consumer.cancel();
    CHECK_FALSE(result.has_value());  // completed through the executor, never inside cancel()
    io.restart();
    io.poll();
    REQUIRE(result.has_value());
    CHECK(*result == asio::error::operation_aborted);

    // A cancel with nothing pending changes nothing; the next consume waits and delivers once.
    consumer.cancel();
    std::vector<int> received;
    run_coroutine(io, [&]() -> asio::awaitable<void> {
        asio::post(io, [&] { REQUIRE(producer.try_produce(7)); });
        const bq::batch<int> delivered = co_await consumer.consume();
        received = items_of(delivered);
        co_await consumer.commit();
    });
    CHECK(received == std::vector<int>{7});
    CHECK_FALSE(consumer.try_consume().has_value());
}

TEST_CASE("pull consumer: co_await with use_awaitable on another executor type consumes, waits, commits and skips "
          "as the default token does",
          "[consumer][memory]")
{
    // The default token's awaited operations are compiled once in the library; any other
    // use_awaitable_t<Executor> compiles the same templates in the user's file.
    using executor = asio::io_context::executor_type;
    asio::io_context io(1);
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(int_topic("numbers", 1));
    auto producer = queue.producer<int>("numbers");
    for (int item = 0; item < 6; ++item) {
        REQUIRE(producer.try_produce(item));
    }
    auto consumer = queue.create_pull_consumer<int>(group("numbers", "g", false, 2));
    const asio::use_awaitable_t<executor> token;

    std::vector<int> delivered;
    std::optional<boost::system::error_code> skip_error;
    bool finished = false;
    std::exception_ptr failure;
    asio::co_spawn(
        io.get_executor(),
        [&]() -> asio::awaitable<void, executor> {
            while (delivered.size() < 6) {  // the first through the executor, the next two inline
                bq::batch<int> received = co_await consumer.consume(token);
                delivered.insert(delivered.end(), received.begin(), received.end());
                co_await consumer.commit(token);
            }
            asio::post(io, [&] { REQUIRE(producer.try_produce(6)); });  // wakes the consume below
            bq::batch<int> woken = co_await consumer.consume(token);
            delivered.insert(delivered.end(), woken.begin(), woken.end());
            try {
                co_await consumer.skip(token);
            } catch (const boost::system::system_error& thrown) {
                skip_error = thrown.code();
            }
        },
        [&](std::exception_ptr thrown) {
            failure = thrown;
            finished = true;
        });
    io.run_for(hang_guard);
    if (failure) {
        std::rethrow_exception(failure);
    }
    REQUIRE(finished);
    CHECK(delivered == range(0, 7));
    CHECK(skip_error == make_error_code(bq::errc::nothing_to_skip));
}

}  // namespace pull_consumer_test
