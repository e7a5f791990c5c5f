// Process-shared persistent topics (issue 27): queues in several processes (and several queues of
// one process, which hold the folder the same way) open one topic folder at once.
#include "bufferqueue/mmap/mmap_topic.hpp"

#include "bufferqueue/detail/type_name.hpp"
#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/file_hooks.hpp"
#include "bufferqueue/mmap/detail/segment_format.hpp"
#include "bufferqueue/mmap/detail/shared_topic_header.hpp"

#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/mmap/inspect/folder_reader.hpp"
#include "bufferqueue/mmap/inspect/folder_verifier.hpp"
#include "bufferqueue/mmap/inspect/group_editor.hpp"
#include "bufferqueue/push_consumer.hpp"

#include "catch.hpp"
#include "child_process.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace process_shared_topic_test {

namespace {

namespace bq = bufferqueue;
using bq::errc;
using bq::test::child_process;
using bq::test::error_from;
using bq::test::missing_from;
using bq::test::queue_runner;
using bq::test::run_until;
using bq::test::signal_pipe;
using bq::test::string_bytes_serializer;
using bq::test::temporary_directory;
using namespace std::chrono_literals;

bq::mmap_topic_options<std::string> shared_topic(const std::filesystem::path& directory, std::size_t partitions = 1,
                                                 bq::flush_strategy flush = bq::flush_strategy::batch)
{
    return {.name = "events",
            .partitions = partitions,
            .data_directory = directory,
            .segment_size = 4096,
            .flush = flush,
            .serializer = string_bytes_serializer{},
            .process_shared = true};
}

// Holds the first msync of the thread that called hold_this_thread() in the file hooks (installed
// while it lives) until release(); the destructor releases it too.
class first_msync_holder {
public:
    first_msync_holder()
        : hooks_({.before_operation =
                      [this](bq::detail::file_operation operation, const std::string&) {
                          std::unique_lock lock(mutex_);
                          if (operation == bq::detail::file_operation::msync &&
                              held_thread_ == std::this_thread::get_id() && !held_) {
                              held_ = true;
                              changed_.notify_all();
                              changed_.wait(lock, [&] { return released_; });
                          }
                          return 0;
                      },
                  .after_flush = {}})
    {
    }

    first_msync_holder(const first_msync_holder&) = delete;
    first_msync_holder& operator=(const first_msync_holder&) = delete;
    ~first_msync_holder() { release(); }

    void hold_this_thread()
    {
        const std::lock_guard lock(mutex_);
        held_thread_ = std::this_thread::get_id();
    }

    // True once that thread's msync is held, false after `limit`.
    bool wait_held(std::chrono::seconds limit)
    {
        std::unique_lock lock(mutex_);
        return changed_.wait_for(lock, limit, [&] { return held_; });
    }

    void release()
    {
        const std::lock_guard lock(mutex_);
        released_ = true;
        changed_.notify_all();
    }

private:
    std::mutex mutex_;
    std::condition_variable changed_;
    std::optional<std::thread::id> held_thread_;  // guarded by mutex_, as the flags
    bool held_ = false;
    bool released_ = false;
    bq::detail::scoped_file_hooks hooks_;  // declared last: removed first
};

bq::pull_consumer_options group(const std::string& name)
{
    return {.topic = "events", .group = name, .auto_commit = false, .batch_size = 64};
}

// "{source}-{number:06}": the producer and its sequence number.
std::string record(const std::string& source, std::size_t number)
{
    std::string digits = std::to_string(number);
    digits.insert(0, 6 - digits.size(), '0');
    return source + "-" + digits;
}

// Consumes (and commits) until `count` items came or `limit` passed; the items in delivery order.
// Takes every batch there is, unless `stop_at_count` (then it stops at the first batch that reaches
// `count`).
std::vector<std::string> consume_items(queue_runner& runner, bq::pull_consumer<std::string>& consumer,
                                       std::size_t count, std::chrono::milliseconds limit = 10s,
                                       bool stop_at_count = false)
{
    std::vector<std::string> items;
    run_until(
        runner.io,
        [&] {
            while (!(stop_at_count && items.size() >= count)) {
                auto delivered = consumer.try_consume();
                if (!delivered) {
                    break;
                }
                items.insert(items.end(), delivered->begin(), delivered->end());
                REQUIRE_FALSE(bq::test::commit_now(consumer, runner.io));
            }
            return items.size() >= count;
        },
        limit);
    return items;
}

// Each source's numbers in the order delivered.
std::map<std::string, std::vector<std::size_t>> by_source(const std::vector<std::string>& items)
{
    std::map<std::string, std::vector<std::size_t>> sources;
    for (const std::string& item : items) {
        const std::size_t dash = item.rfind('-');
        sources[item.substr(0, dash)].push_back(std::stoul(item.substr(dash + 1)));
    }
    return sources;
}

std::vector<std::size_t> numbers(std::size_t first, std::size_t count)
{
    std::vector<std::size_t> values;
    for (std::size_t value = first; value < first + count; ++value) {
        values.push_back(value);
    }
    return values;
}

TEST_CASE("process-shared topic: a second queue opens the folder, and what one produces the other consumes",
          "[mmap][process_shared]")
{
    temporary_directory directory;
    queue_runner writer;
    queue_runner reader;
    writer->add_topic(shared_topic(directory.path()));
    reader->add_topic(shared_topic(directory.path()));
    auto consumer = reader->create_pull_consumer<std::string>(group("g"));
    auto producer = writer->producer<std::string>("events");
    for (std::size_t number = 0; number < 300; ++number) {
        REQUIRE(producer.try_produce(record("w", number)));
    }
    const auto items = consume_items(reader, consumer, 300);
    CHECK(by_source(items)["w"] == numbers(0, 300));
}

TEST_CASE("process-shared topic: a consumer parked in consume() wakes when another queue appends",
          "[mmap][process_shared]")
{
    temporary_directory directory;
    queue_runner writer;
    queue_runner reader;
    writer->add_topic(shared_topic(directory.path(), 1, bq::flush_strategy::immediate));
    reader->add_topic(shared_topic(directory.path(), 1, bq::flush_strategy::immediate));
    auto consumer = reader->create_pull_consumer<std::string>(group("g"));
    std::optional<std::vector<std::string>> delivered;
    boost::asio::co_spawn(
        reader.io,
        [&]() -> boost::asio::awaitable<void> {
            auto batch = co_await consumer.consume();
            delivered.emplace(batch.begin(), batch.end());
        },
        boost::asio::detached);
    // Parked: nothing to read yet.
    CHECK_FALSE(run_until(
        reader.io, [&] { return delivered.has_value(); }, 300ms));
    bool accepted = false;
    std::thread producing([&] {
        auto producer = writer->producer<std::string>("events");
        accepted = producer.try_produce(record("w", 0));
    });
    producing.join();
    REQUIRE(accepted);
    REQUIRE(run_until(
        reader.io, [&] { return delivered.has_value(); }, 5s));
    CHECK(*delivered == std::vector<std::string>{record("w", 0)});
}

TEST_CASE("process-shared topic: two queues producing into one partition at once lose nothing and keep each "
          "producer's order, also after a reopen",
          "[mmap][process_shared]")
{
    temporary_directory directory;
    constexpr std::size_t per_producer = 3000;
    for (const auto flush : {bq::flush_strategy::batch, bq::flush_strategy::immediate}) {
        const std::size_t count = flush == bq::flush_strategy::batch ? per_producer : per_producer / 10;
        const std::string topic_folder = "run-" + std::to_string(static_cast<int>(flush));
        const auto folder = directory.path() / topic_folder;
        {
            queue_runner first;
            queue_runner second;
            first->add_topic(shared_topic(folder, 1, flush));
            second->add_topic(shared_topic(folder, 1, flush));
            // Each thread counts its accepted produce calls (Catch's assertions are for the main thread).
            auto produce = [&](queue_runner& runner, const std::string& source, std::size_t& accepted) {
                auto producer = runner->producer<std::string>("events");
                for (std::size_t number = 0; number < count; ++number) {
                    accepted += producer.try_produce(record(source, number)) ? 1 : 0;
                }
            };
            std::size_t accepted_a = 0;
            std::size_t accepted_b = 0;
            std::thread a([&] { produce(first, "a", accepted_a); });
            std::thread b([&] { produce(second, "b", accepted_b); });
            a.join();
            b.join();
            REQUIRE(accepted_a == count);
            REQUIRE(accepted_b == count);
            auto consumer = first->create_pull_consumer<std::string>(group("g"));
            const auto sources = by_source(consume_items(first, consumer, 2 * count));
            CHECK(sources.at("a") == numbers(0, count));
            CHECK(sources.at("b") == numbers(0, count));
        }
        // Nobody has it open: the next queue recovers it like any topic folder.
        queue_runner again;
        again->add_topic(shared_topic(folder, 1, flush));
        auto consumer = again->create_pull_consumer<std::string>(group("h"));
        const auto sources = by_source(consume_items(again, consumer, 2 * count));
        CHECK(sources.at("a") == numbers(0, count));
        CHECK(sources.at("b") == numbers(0, count));
    }
}

TEST_CASE("process-shared topic: a queue with different stored-data options is refused by name, and an "
          "exclusive queue cannot open a shared folder",
          "[mmap][process_shared]")
{
    temporary_directory directory;
    queue_runner first;
    first->add_topic(shared_topic(directory.path(), 2));

    queue_runner second;
    const auto mismatch = error_from([&] { second->add_topic(shared_topic(directory.path(), 3)); });
    REQUIRE(mismatch);
    CHECK(mismatch->code() == errc::invalid_argument);
    CHECK(missing_from(mismatch->what(), {"'partitions'", (directory.path() / "events").string()}).empty());

    auto exclusive = shared_topic(directory.path(), 2);
    exclusive.process_shared = false;
    const auto refused = error_from([&] { second->add_topic(exclusive); });
    REQUIRE(refused);
    CHECK(refused->code() == errc::io_error);

    // Retention defines what stays on disk: every process must agree on it too.
    auto retained = shared_topic(directory.path(), 2);
    retained.max_retained_consumed_segments = 1;
    const auto retention = error_from([&] { second->add_topic(retained); });
    REQUIRE(retention);
    CHECK(retention->code() == errc::invalid_argument);
    CHECK(missing_from(retention->what(), {"max_retained_consumed_segments", (directory.path() / "events").string()})
              .empty());
}

// Two queues on one folder, each with a consumer of group "g", and `records` records ("p-...")
// produced by the first.
struct one_group_in_two_queues {
    queue_runner first;
    queue_runner second;
    bq::pull_consumer<std::string> one;
    bq::pull_consumer<std::string> two;

    one_group_in_two_queues(const std::filesystem::path& directory, std::size_t partitions, std::size_t records)
        : one(consumer_of(first, directory, partitions)), two(consumer_of(second, directory, partitions))
    {
        auto producer = first->producer<std::string>("events");
        for (std::size_t number = 0; number < records; ++number) {
            REQUIRE(producer.try_produce(record("p", number)));
        }
    }

    static bq::pull_consumer<std::string> consumer_of(queue_runner& runner, const std::filesystem::path& directory,
                                                      std::size_t partitions)
    {
        runner->add_topic(shared_topic(directory, partitions));
        return runner->create_pull_consumer<std::string>(group("g"));
    }

    // Both consumers consume (and commit) what they are given, until `count` items came; the items.
    std::vector<std::string> consume(std::size_t count)
    {
        std::vector<std::string> items;
        run_until(
            first.io,
            [&] {
                second.io.poll();
                second.io.restart();
                for (auto* consumer : {&one, &two}) {
                    auto& runner = consumer == &one ? first : second;
                    while (auto delivered = consumer->try_consume()) {
                        items.insert(items.end(), delivered->begin(), delivered->end());
                        REQUIRE_FALSE(bq::test::commit_now(*consumer, runner.io));
                    }
                }
                return items.size() >= count;
            },
            10s);
        return items;
    }
};

TEST_CASE("process-shared topic: two queues consuming one group share the partitions and deliver each record once",
          "[mmap][process_shared]")
{
    temporary_directory directory;
    one_group_in_two_queues queues(directory.path(), 4, 400);
    auto delivered = by_source(queues.consume(400))["p"];
    std::sort(delivered.begin(), delivered.end());
    CHECK(delivered == numbers(0, 400));
}

// Takes what `consumer` has with try_consume alone, never waiting (each batch committed as it is
// returned: auto_commit), until a call returns nothing; the items in delivery order.
std::vector<std::string> take_without_waiting(bq::pull_consumer<std::string>& consumer)
{
    std::vector<std::string> items;
    while (auto delivered = consumer.try_consume()) {
        items.insert(items.end(), delivered->begin(), delivered->end());
    }
    return items;
}

bq::pull_consumer_options committing_group(const std::string& name)
{
    bq::pull_consumer_options options = group(name);
    options.auto_commit = true;
    return options;
}

TEST_CASE("process-shared topic: a consumer of a group no other queue has a member of owns every partition when "
          "create_pull_consumer returns, so try_consume at once returns what another queue wrote and closed",
          "[mmap][process_shared]")
{
    temporary_directory directory;
    {
        queue_runner writer;
        writer->add_topic(shared_topic(directory.path(), 4));
        auto producer = writer->producer<std::string>("events");
        for (std::size_t number = 0; number < 40; ++number) {
            REQUIRE(producer.try_produce(record("w", number)));
        }
    }
    // Rounds of a new queue and a new group each: the assignment raced the first try_consume.
    std::size_t rounds_without_records = 0;
    for (std::size_t round = 0; round < 20; ++round) {
        INFO("round " << round);
        queue_runner reader;
        reader->add_topic(shared_topic(directory.path(), 4));
        auto consumer = reader->create_pull_consumer<std::string>(committing_group("g" + std::to_string(round)));
        const std::vector<std::size_t> owned = consumer.partitions();
        auto items = by_source(take_without_waiting(consumer))["w"];
        rounds_without_records += items.empty() ? 1 : 0;
        CHECK(owned == numbers(0, 4));
        std::sort(items.begin(), items.end());
        CHECK(items == numbers(0, 40));
    }
    CHECK(rounds_without_records == 0);
}

TEST_CASE("process-shared topic: a partition lease that cannot be locked fails the consumer's creation with an "
          "io_error naming the lease file, and the group's next creation owns every partition",
          "[mmap][process_shared]")
{
    temporary_directory directory;
    queue_runner runner;
    runner->add_topic(shared_topic(directory.path(), 4));
    auto producer = runner->producer<std::string>("events");
    for (std::size_t number = 0; number < 40; ++number) {
        REQUIRE(producer.try_produce(record("p", number)));
    }
    {
        const bq::detail::scoped_file_hooks failing_lease(
            {.before_operation =
                 [](bq::detail::file_operation operation, const std::string& path) {
                     return operation == bq::detail::file_operation::lock && path.ends_with("partition-00002.lease")
                                ? EIO
                                : 0;
                 },
             .after_flush = {}});
        const auto failure =
            error_from([&] { static_cast<void>(runner->create_pull_consumer<std::string>(committing_group("g"))); });
        REQUIRE(failure);
        CHECK(failure->code() == errc::io_error);
        CHECK(missing_from(failure->what(), {"partition-00002.lease"}).empty());
    }
    auto consumer = runner->create_pull_consumer<std::string>(committing_group("g"));
    CHECK(consumer.partitions() == numbers(0, 4));
    auto items = by_source(take_without_waiting(consumer))["p"];
    std::sort(items.begin(), items.end());
    CHECK(items == numbers(0, 40));
}

TEST_CASE("process-shared topic: after the process that held the folder and a group's partitions was SIGKILLed, a "
          "new consumer of the group owns them when created and try_consume at once returns the records",
          "[mmap][process_shared][kill]")
{
    std::size_t rounds_without_records = 0;
    for (std::size_t round = 0; round < 20; ++round) {
        INFO("round " << round);
        temporary_directory directory;
        signal_pipe ready;
        child_process holder([&] {
            queue_runner runner;
            runner->add_topic(shared_topic(directory.path(), 4, bq::flush_strategy::immediate));
            auto producer = runner->producer<std::string>("events");
            for (std::size_t number = 0; number < 40; ++number) {
                if (!producer.try_produce(record("c", number))) {
                    return 1;
                }
            }
            // A member of "g" holding every partition's lease, consuming nothing.
            auto consumer = runner->create_pull_consumer<std::string>(group("g"));
            if (!run_until(
                    runner.io, [&] { return consumer.partitions().size() == 4; }, 10s)) {
                return 2;
            }
            ready.send();
            std::this_thread::sleep_for(1h);
            return 0;
        });
        REQUIRE(ready.receive_within(10s));
        holder.kill();
        REQUIRE(holder.wait() == 128 + SIGKILL);
        queue_runner reader;
        reader->add_topic(shared_topic(directory.path(), 4));
        auto consumer = reader->create_pull_consumer<std::string>(committing_group("g"));
        const std::vector<std::size_t> owned = consumer.partitions();
        auto items = by_source(take_without_waiting(consumer))["c"];
        rounds_without_records += items.empty() ? 1 : 0;
        CHECK(owned == numbers(0, 4));
        std::sort(items.begin(), items.end());
        CHECK(items == numbers(0, 40));
    }
    CHECK(rounds_without_records == 0);
}

TEST_CASE("process-shared topic: a consumer that joins a live member of its group in another queue gets its share "
          "within a few watcher periods, and a loop over partitions() waits for it as the docs show",
          "[mmap][process_shared]")
{
    temporary_directory directory;
    queue_runner first;
    queue_runner second;
    first->add_topic(shared_topic(directory.path(), 4));
    second->add_topic(shared_topic(directory.path(), 4));
    auto producer = first->producer<std::string>("events");
    for (std::size_t number = 0; number < 40; ++number) {
        REQUIRE(producer.try_produce(record("p", number)));
    }
    auto staying = first->create_pull_consumer<std::string>(committing_group("g"));
    REQUIRE(staying.partitions() == numbers(0, 4));  // alone in its group: everything, at once
    auto joining = second->create_pull_consumer<std::string>(committing_group("g"));
    // The loop of docs/consumer-model.md, "Waiting for the assignment", for the share of two members.
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (joining.partitions().size() < 2 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(50ms);
    }
    REQUIRE(joining.partitions().size() == 2);
    auto items = by_source(take_without_waiting(joining))["p"];
    CHECK(items.size() == 20);  // round-robin routing: ten records a partition
}

TEST_CASE("process-shared topic: producer processes SIGKILLed while appending leave no torn record, and every "
          "record they were told of is delivered once, in order",
          "[mmap][process_shared][kill]")
{
    temporary_directory directory;
    constexpr std::size_t children = 8;
    constexpr std::size_t report_every = 20;
    // Forked before this process opens the topic (and starts threads): each child waits for its start.
    std::vector<std::unique_ptr<signal_pipe>> starts;
    std::vector<std::unique_ptr<signal_pipe>> reports;
    std::vector<std::unique_ptr<child_process>> producers;
    for (std::size_t child = 0; child < children; ++child) {
        starts.push_back(std::make_unique<signal_pipe>());
        reports.push_back(std::make_unique<signal_pipe>());
    }
    for (std::size_t child = 0; child < children; ++child) {
        producers.push_back(std::make_unique<child_process>([&, child] {
            if (!starts[child]->receive()) {
                return 1;
            }
            queue_runner runner;
            runner->add_topic(shared_topic(directory.path(), 2));
            auto producer = runner->producer<std::string>("events");
            const std::string source = "c" + std::to_string(child);
            for (std::size_t number = 0;; ++number) {
                if (!producer.try_produce(record(source, number))) {
                    return 2;
                }
                if ((number + 1) % report_every == 0) {
                    reports[child]->send();  // `number + 1` records acknowledged
                }
            }
        }));
    }
    queue_runner parent;
    parent->add_topic(shared_topic(directory.path(), 2));
    auto producer = parent->producer<std::string>("events");
    std::vector<std::size_t> acknowledged(children, 0);
    std::size_t produced_here = 0;
    for (std::size_t child = 0; child < children; ++child) {
        starts[child]->send();
        for (std::size_t report = 0; report < 3 + child; ++report) {
            REQUIRE(reports[child]->receive_within(10s));
            acknowledged[child] += report_every;
        }
        producers[child]->kill();
        CHECK(producers[child]->wait() == 128 + SIGKILL);
        while (reports[child]->receive_within(0ms)) {
            acknowledged[child] += report_every;
        }
        for (std::size_t i = 0; i < 25; ++i) {
            REQUIRE(producer.try_produce(record("parent", produced_here++)));
        }
    }
    auto consumer = parent->create_pull_consumer<std::string>(group("g"));
    std::map<std::size_t, std::vector<std::string>> by_partition;
    run_until(
        parent.io,
        [&] {
            while (auto delivered = consumer.try_consume()) {
                auto& items = by_partition[delivered->partition()];
                items.insert(items.end(), delivered->begin(), delivered->end());
                REQUIRE_FALSE(bq::test::commit_now(consumer, parent.io));
            }
            return false;  // until nothing more comes
        },
        1s);
    // Per partition each source's records come in its order; together they are every record it
    // produced from its first on, with no gap.
    std::map<std::string, std::vector<std::size_t>> every;
    for (const auto& [partition, items] : by_partition) {
        for (auto& [source, delivered] : by_source(items)) {
            INFO("partition " << partition << ", source " << source);
            CHECK(std::is_sorted(delivered.begin(), delivered.end()));
            every[source].insert(every[source].end(), delivered.begin(), delivered.end());
        }
    }
    for (auto& [source, delivered] : every) {
        std::sort(delivered.begin(), delivered.end());
    }
    CHECK(every["parent"] == numbers(0, produced_here));
    for (std::size_t child = 0; child < children; ++child) {
        const auto& delivered = every["c" + std::to_string(child)];
        INFO("child " << child << " was told of " << acknowledged[child] << " records");
        CHECK(delivered.size() >= acknowledged[child]);
        CHECK(delivered == numbers(0, delivered.size()));
    }
}

TEST_CASE("process-shared topic: when a consumer process is SIGKILLed holding a batch, a consumer of its group "
          "in another process gets its partitions and resumes after its last commit",
          "[mmap][process_shared][kill]")
{
    temporary_directory directory;
    signal_pipe start;
    signal_pipe report;
    child_process consumer_process([&] {
        if (!start.receive()) {
            return 1;
        }
        queue_runner runner;
        runner->add_topic(shared_topic(directory.path(), 2));
        auto options = group("g");
        options.batch_size = 10;
        auto consumer = runner->create_pull_consumer<std::string>(options);
        std::size_t committed = 0;
        std::size_t batches = 0;
        bool held = false;  // run_until asks once more after it held: keep the answer
        run_until(
            runner.io,
            [&] {
                while (!held) {
                    auto delivered = consumer.try_consume();
                    if (!delivered) {
                        break;
                    }
                    if (batches++ == 5) {
                        held = true;  // holds this one, uncommitted
                    } else {
                        committed += delivered->size();
                        if (bq::test::commit_now(consumer, runner.io)) {
                            return true;  // reports 0: the parent's test fails
                        }
                    }
                }
                return held;
            },
            10s);
        report.send(static_cast<char>(held ? committed : 0));
        std::this_thread::sleep_for(1h);
        return 0;
    });
    queue_runner parent;
    parent->add_topic(shared_topic(directory.path(), 2));
    auto producer = parent->producer<std::string>("events");
    for (std::size_t number = 0; number < 200; ++number) {
        REQUIRE(producer.try_produce(record("p", number)));
    }
    // Joined before the other process: it hands that one a partition, and must take it back later
    // at the position the other process committed (read again from disk), not where it last saw it.
    auto consumer = parent->create_pull_consumer<std::string>(group("g"));
    start.send();
    const auto committed = report.receive_within(10s);
    REQUIRE(committed);
    REQUIRE(*committed > 0);
    consumer_process.kill();
    CHECK(consumer_process.wait() == 128 + SIGKILL);
    const std::size_t remaining = 200 - static_cast<std::size_t>(*committed);
    const auto items = consume_items(parent, consumer, remaining, 10s);
    // Everything not committed comes (the held batch again), nothing committed comes twice.
    auto delivered = by_source(items)["p"];
    CHECK(delivered.size() == remaining);
    std::sort(delivered.begin(), delivered.end());
    CHECK(std::adjacent_find(delivered.begin(), delivered.end()) == delivered.end());
}

// The committed position of `name` in `partition` of a statistics snapshot; nothing when the
// snapshot does not list the group.
std::optional<std::uint64_t> committed_in(const bq::topic_stats& stats, const std::string& name, std::size_t partition)
{
    for (const bq::group_stats& each : stats.groups) {
        if (each.name == name) {
            return each.partitions.at(partition).committed;
        }
    }
    return std::nullopt;
}

TEST_CASE("process-shared topic: statistics show what other queues appended and committed", "[mmap][process_shared]")
{
    temporary_directory directory;
    one_group_in_two_queues queues(directory.path(), 2, 100);
    // Each queue consumes (and commits) what its consumer was given.
    REQUIRE(queues.consume(100).size() == 100);
    queue_runner& first = queues.first;
    queue_runner& second = queues.second;
    // A group only the second queue knows.
    auto audit = second->create_pull_consumer<std::string>(group("audit"));
    REQUIRE(consume_items(second, audit, 100).size() == 100);
    for (queue_runner* runner : {&first, &second}) {
        const bq::topic_stats stats = (*runner)->stats<std::string>("events");
        CHECK(stats.produced == 100);
        for (std::size_t partition = 0; partition < 2; ++partition) {
            INFO("partition " << partition << (runner == &first ? " seen by the first queue" : " seen by the second"));
            const std::optional<std::uint64_t> end = stats.partitions[partition].end;
            CHECK(committed_in(stats, "g", partition) == end);
            CHECK(committed_in(stats, "audit", partition) == end);
        }
    }
}

TEST_CASE("process-shared topic: inspect reads and verifies a folder that queues hold open, and refuses group "
          "changes until the last one closed",
          "[mmap][process_shared][inspect]")
{
    temporary_directory directory;
    auto first = std::make_unique<queue_runner>();
    auto second = std::make_unique<queue_runner>();
    (*first)->add_topic(shared_topic(directory.path()));
    (*second)->add_topic(shared_topic(directory.path()));
    auto consumer = (*second)->create_pull_consumer<std::string>(group("g"));
    auto producer = (*first)->producer<std::string>("events");
    for (std::size_t number = 0; number < 300; ++number) {
        REQUIRE(producer.try_produce(record("p", number)));
    }
    REQUIRE(consume_items(*second, consumer, 120).size() >= 120);

    const bq::inspect::verify_report report = bq::inspect::verify_data_folder(directory.string());
    for (const auto& problem : report.problems) {
        UNSCOPED_INFO("problem: " << problem.file << ": " << problem.text);
    }
    CHECK(report.intact());
    CHECK(report.records == 300);
    const bq::inspect::partition_reader reader(directory.string(), "events", 0);
    CHECK_FALSE(reader.summary().problem);
    CHECK(reader.summary().end == 300);
    REQUIRE(reader.summary().groups.size() == 1);
    CHECK(reader.summary().groups[0].committed >= 120);
    CHECK_THROWS_WITH(bq::inspect::execute_delete(directory.string(), "events", "g"),
                      Catch::Contains("refusing to change topic 'events'"));
    first.reset();
    CHECK_THROWS_WITH(bq::inspect::execute_delete(directory.string(), "events", "g"),
                      Catch::Contains("refusing to change topic 'events'"));
    second.reset();
    bq::inspect::execute_delete(directory.string(), "events", "g");
    CHECK(bq::inspect::verify_data_folder(directory.string()).intact());
}

// The segment files of `partition_folder`.
std::size_t segment_files(const std::filesystem::path& partition_folder)
{
    std::size_t count = 0;
    for (const auto& entry : std::filesystem::directory_iterator(partition_folder)) {
        count += entry.path().extension() == ".log" ? 1 : 0;
    }
    return count;
}

bq::mmap_topic_options<std::string> retained_topic(const std::filesystem::path& directory)
{
    auto options = shared_topic(directory);
    options.max_retained_consumed_segments = 0;
    return options;
}

TEST_CASE("process-shared topic: retention deletes only what every group of every queue committed past, and "
          "every queue sees where the log starts",
          "[mmap][process_shared][retention]")
{
    temporary_directory directory;
    queue_runner first;
    queue_runner second;
    first->add_topic(retained_topic(directory.path()));
    second->add_topic(retained_topic(directory.path()));
    auto g = first->create_pull_consumer<std::string>(group("g"));
    auto h = second->create_pull_consumer<std::string>(group("h"));
    auto producer = first->producer<std::string>("events");
    for (std::size_t number = 0; number < 2000; ++number) {
        REQUIRE(producer.try_produce(record("p", number)));
    }
    const auto folder = directory.path() / "events" / "partition-00000";
    const std::size_t written = segment_files(folder);
    REQUIRE(written >= 5);

    // g, in the first queue, read and committed everything; h, which only the second queue opened,
    // nothing yet: h keeps every segment.
    REQUIRE(consume_items(first, g, 2000).size() == 2000);
    CHECK(segment_files(folder) == written);
    const auto earliest = [](queue_runner& runner) {
        return runner->stats<std::string>("events").partitions[0].earliest;
    };
    CHECK(earliest(first) == 0);

    // h commits about half: the second queue's retention deletes the segments below it.
    std::vector<std::string> items = consume_items(second, h, 1000, 10s, true);
    REQUIRE(items.size() >= 1000);
    const std::size_t after_half = segment_files(folder);
    CHECK(after_half < written);
    CHECK(after_half > 1);
    const std::uint64_t start = earliest(second);
    CHECK(start > 0);
    CHECK(start <= items.size());
    // The first queue learns it from the shared header (its watcher drops the deleted segments).
    CHECK(run_until(
        first.io, [&] { return earliest(first) == start; }, 5s));

    // h reads the rest: only the tail segment stays, and h got every record once, in order.
    const std::vector<std::string> rest = consume_items(second, h, 2000 - items.size());
    items.insert(items.end(), rest.begin(), rest.end());
    CHECK(by_source(items)["p"] == numbers(0, 2000));
    CHECK(segment_files(folder) == 1);
}

TEST_CASE("process-shared topic: a queue whose mapped segments another queue's retention deleted appends, reads "
          "and starts new groups where the log is retained",
          "[mmap][process_shared][retention]")
{
    temporary_directory directory;
    queue_runner first;
    queue_runner second;  // produces nothing and reads nothing until the first queue's retention ran
    first->add_topic(retained_topic(directory.path()));
    second->add_topic(retained_topic(directory.path()));
    auto g = first->create_pull_consumer<std::string>(group("g"));
    auto producer = first->producer<std::string>("events");
    for (std::size_t number = 0; number < 2000; ++number) {
        REQUIRE(producer.try_produce(record("p", number)));
    }
    REQUIRE(consume_items(first, g, 2000).size() == 2000);
    const auto folder = directory.path() / "events" / "partition-00000";
    CHECK(segment_files(folder) == 1);

    auto late = second->producer<std::string>("events");
    REQUIRE(late.try_produce(record("s", 0)));
    // A group new to both queues starts at the first retained record, in the tail segment.
    auto fresh = second->create_pull_consumer<std::string>(group("fresh"));
    const std::vector<std::string> retained = consume_items(second, fresh, 2);
    REQUIRE(retained.size() >= 2);
    CHECK(retained.back() == record("s", 0));
    const std::vector<std::size_t> kept = by_source(retained)["p"];
    REQUIRE_FALSE(kept.empty());
    CHECK(kept == numbers(kept.front(), 2000 - kept.front()));
    CHECK(kept.front() > 0);
    CHECK(second->stats<std::string>("events").partitions[0].earliest == kept.front());
    // And g, in the first queue, gets what the second appended.
    CHECK(consume_items(first, g, 1) == std::vector<std::string>{record("s", 0)});
}

TEST_CASE("process-shared topic: under immediate, an msync covered every record that several queues' produce "
          "calls were told was durable",
          "[mmap][process_shared][group_commit]")
{
    // Each queue coordinates its group commit with the others through the shared header, as
    // processes do: a record is acknowledged by the msync of whichever queue claimed it.
    std::mutex mutex;
    std::map<std::string, std::vector<std::pair<std::uint64_t, std::uint64_t>>> synced;  // file -> [from, to)
    bq::detail::scoped_file_hooks hooks(
        {.before_operation = {},
         .after_flush = [&](bq::detail::file_operation operation, const std::string& path, std::uint64_t offset,
                            std::uint64_t length) {
             if (operation == bq::detail::file_operation::msync) {
                 const std::lock_guard lock(mutex);
                 synced[std::filesystem::path(path).filename().string()].emplace_back(offset, offset + length);
             }
         }});
    temporary_directory directory;
    constexpr std::size_t queues = 3;
    constexpr std::size_t per_queue = 150;
    std::vector<std::unique_ptr<queue_runner>> runners;
    auto options = shared_topic(directory.path(), 1, bq::flush_strategy::immediate);
    options.segment_size = 1024 * 1024;
    for (std::size_t index = 0; index < queues; ++index) {
        runners.push_back(std::make_unique<queue_runner>());
        (*runners.back())->add_topic(options);
    }
    std::vector<std::thread> producing;
    std::vector<std::size_t> acknowledged(queues, 0);
    for (std::size_t index = 0; index < queues; ++index) {
        producing.emplace_back([&, index] {
            auto producer = (*runners[index])->producer<std::string>("events");
            for (std::size_t number = 0; number < per_queue; ++number) {
                // Records of 1.5 pages: an msync that stops short of one leaves some of its bytes out.
                if (!producer.try_produce(record("q" + std::to_string(index), number) + std::string(6000, '.'))) {
                    return;
                }
                ++acknowledged[index];
            }
        });
    }
    for (std::thread& each : producing) {
        each.join();
    }
    CHECK(acknowledged == std::vector<std::size_t>(queues, per_queue));
    // Every record's bytes lie in ranges that msyncs reported (they are page-aligned and may overlap).
    const bq::inspect::partition_reader reader(directory.string(), "events", 0);
    std::size_t records = 0;
    std::size_t uncovered = 0;
    reader.read_records(0, queues * per_queue, [&](const bq::inspect::record_entry& entry) {
        ++records;
        const std::lock_guard lock(mutex);
        auto& ranges = synced[entry.segment_file];
        std::sort(ranges.begin(), ranges.end());
        std::uint64_t covered = entry.position;  // covered from the record's start up to here
        for (const auto& [from, to] : ranges) {
            if (from <= covered && to > covered) {
                covered = to;
            }
        }
        if (covered < entry.position + entry.size) {
            ++uncovered;
            UNSCOPED_INFO("record " << entry.item << " at " << entry.segment_file << ":" << entry.position
                                    << " was never msynced past byte " << covered);
        }
    });
    CHECK(records == queues * per_queue);
    CHECK(uncovered == 0);
}

TEST_CASE("process-shared topic: a segment stays mapped while its queue's leader msyncs it, also when another "
          "queue flushed that leader's record and its retention deleted the segment",
          "[mmap][process_shared][retention]")
{
    // The file hooks hold the first queue's leader in its msync. Meanwhile the second queue takes
    // the stale claim over, msyncs and publishes the first queue's record with its own, its
    // consumer commits past both, and its retention deletes the segment - which the first queue's
    // watcher then drops, while the held msync still has to run on it.
    first_msync_holder holder;
    temporary_directory directory;
    auto options = retained_topic(directory.path());
    options.flush = bq::flush_strategy::immediate;
    queue_runner first;
    queue_runner second;
    first->add_topic(options);
    second->add_topic(options);
    auto consumer = second->create_pull_consumer<std::string>(group("g"));

    bool first_acknowledged = false;
    std::thread first_producing([&] {
        holder.hold_this_thread();
        auto producer = first->producer<std::string>("events");
        first_acknowledged = producer.try_produce(record("a", 0));
    });
    REQUIRE(holder.wait_held(10s));
    // Enough records to fill several segments, in batches (one msync each).
    auto producer = second->producer<std::string>("events");
    for (std::size_t batch = 0; batch < 10; ++batch) {
        std::vector<std::string> records;
        for (std::size_t number = batch * 50; number < (batch + 1) * 50; ++number) {
            records.push_back(record("b", number));
        }
        REQUIRE(producer.try_produce(std::span<const std::string>(records)));
    }
    const std::vector<std::string> items = consume_items(second, consumer, 501);
    CHECK(by_source(items)["a"] == numbers(0, 1));
    CHECK(by_source(items)["b"] == numbers(0, 500));
    CHECK(segment_files(directory.path() / "events" / "partition-00000") == 1);
    // The first queue's watcher dropped the deleted segments (its view of the log's start moved).
    CHECK(run_until(
        first.io, [&] { return first->stats<std::string>("events").partitions[0].earliest > 0; }, 5s));
    holder.release();
    first_producing.join();
    CHECK(first_acknowledged);
}

TEST_CASE("process-shared topic: under batch, a queue msyncs without the shared append lock, so another queue "
          "appends meanwhile",
          "[mmap][process_shared]")
{
    // The file hooks hold the first queue's batch flush in its msync; the second queue's produce
    // must complete meanwhile (it waited for the whole msync while the lock was held across it).
    first_msync_holder holder;
    temporary_directory directory;
    auto options = shared_topic(directory.path());
    options.segment_size = 64 * 1024;
    options.flush_batch_size = 10;
    queue_runner first;
    queue_runner second;
    first->add_topic(options);
    second->add_topic(options);

    std::size_t first_acknowledged = 0;
    std::thread first_producing([&] {
        holder.hold_this_thread();
        auto producer = first->producer<std::string>("events");
        for (std::size_t number = 0; number < 10; ++number) {
            first_acknowledged += producer.try_produce(record("a", number)) ? 1 : 0;
        }
    });
    REQUIRE(holder.wait_held(10s));
    // The tenth record's flush is held in its msync.
    auto producer = second->producer<std::string>("events");
    std::atomic<bool> second_acknowledged = false;
    std::thread second_producing([&] { second_acknowledged = producer.try_produce(record("b", 0)); });
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!second_acknowledged && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(1ms);
    }
    CHECK(second_acknowledged);
    holder.release();
    second_producing.join();
    first_producing.join();
    CHECK(first_acknowledged == 10);
    auto consumer = second->create_pull_consumer<std::string>(group("g"));
    const std::vector<std::string> items = consume_items(second, consumer, 11);
    CHECK(by_source(items)["a"] == numbers(0, 10));
    CHECK(by_source(items)["b"] == numbers(0, 1));
}

TEST_CASE("process-shared topic: a record that a process SIGKILLed holding the append lock wrote whole but "
          "never stored as appended is zeroed by the next holder, and never delivered",
          "[mmap][process_shared][kill]")
{
    // The child takes partition 0's append lock as a writer does, writes a complete record (its
    // checksum valid) at the tail, stores its pending end and dies before it stores the new tail.
    // Nothing but the next holder's repair keeps that record from recovery, which would take it.
    temporary_directory directory;
    const auto options = shared_topic(directory.path());
    const std::string topic_folder = (directory.path() / "events").string();
    const signal_pipe start;
    child_process killed([&] {
        if (!start.receive()) {
            return 1;
        }
        namespace detail = bq::detail;
        const detail::shared_topic_header header(
            "events", topic_folder,
            {.partitions = 1,
             .segment_size = options.segment_size,
             .max_retained_consumed_segments = options.max_retained_consumed_segments,
             .serializer_name = std::string(detail::type_name<string_bytes_serializer>())},
            false);
        auto lock = header.append_lock(0);
        lock.lock();
        detail::shared_log_slot slot = header.log_slot(0);
        detail::shared_log_state state = slot.load();
        const auto file =
            detail::open_file(topic_folder + "/partition-00000/" + detail::segment_file_name(state.tail_segment),
                              detail::open_mode::read_write);
        const detail::mapped_region region = detail::map_file(file, options.segment_size);
        const std::string payload = record("x", 0) + std::string(300, '.');
        state.pending_end = state.tail_position + detail::record_size(payload.size());
        slot.store(state);
        detail::encode_record(region.bytes().subspan(state.tail_position),
                              std::as_bytes(std::span(payload.data(), payload.size())));
        ::raise(SIGKILL);
        return 2;
    });
    {
        queue_runner runner;
        runner->add_topic(options);
        auto producer = runner->producer<std::string>("events");
        for (std::size_t number = 0; number < 3; ++number) {
            REQUIRE(producer.try_produce(record("p", number)));
        }
        start.send();
        CHECK(killed.wait() == 128 + SIGKILL);
        // The queue closes here: its last flush takes the append lock and repairs.
    }
    const bq::inspect::partition_reader reader(directory.string(), "events", 0);
    std::vector<std::size_t> stored;
    reader.read_records(0, 10, [&](const bq::inspect::record_entry& entry) { stored.push_back(entry.item); });
    CHECK(stored == std::vector<std::size_t>{0, 1, 2});
    // Opened again (recovered as a folder nobody has open), it delivers the three records only.
    queue_runner reopened;
    reopened->add_topic(options);
    auto consumer = reopened->create_pull_consumer<std::string>(group("g"));
    CHECK(consume_items(reopened, consumer, 4, 1s) ==
          std::vector<std::string>{record("p", 0), record("p", 1), record("p", 2)});
}

TEST_CASE("process-shared topic: a queue that closes while its consumer holds a batch of a revoked partition "
          "lets the partition go to the consumer of another queue, which reads it whole",
          "[mmap][process_shared]")
{
    // The first queue's consumer holds a batch of partition 1 when the second queue's consumer joins:
    // partition 1 is revoked there but stays in use (and leased) until the batch goes. The first
    // queue closes before the batch goes, and the batch goes after its topic closed (under ASan: a
    // release that reached the closed topic's unmapped shared header would be reported here).
    temporary_directory directory;
    queue_runner first;
    first->add_topic(shared_topic(directory.path(), 2));
    auto consumer = first->create_pull_consumer<std::string>(group("g"));
    auto producer = first->producer<std::string>("events");
    for (std::size_t number = 0; number < 16; ++number) {
        REQUIRE(producer.try_produce(record("p", number)));
    }
    std::optional<bq::batch<std::string>> held;
    REQUIRE(run_until(
        first.io,
        [&] {
            while (!held) {
                auto delivered = consumer.try_consume();
                if (!delivered) {
                    break;
                }
                if (delivered->partition() == 1) {
                    held = std::move(delivered);
                } else {
                    REQUIRE_FALSE(bq::test::commit_now(consumer, first.io));
                }
            }
            return held.has_value();
        },
        10s));
    queue_runner second;
    second->add_topic(shared_topic(directory.path(), 2));
    auto other = second->create_pull_consumer<std::string>(group("g"));
    // Ranked second, the new consumer is given partition 1, which the first queue holds: revoked there.
    run_until(
        first.io, [] { return false; }, 600ms);
    CHECK(other.try_consume() == std::nullopt);  // not its own until the batch goes
    first->close();
    held.reset();
    // The partition's lease was let go with the closed queue: the second queue reads partition 1.
    std::vector<std::string> items;
    run_until(
        second.io,
        [&] {
            while (auto delivered = other.try_consume()) {
                items.insert(items.end(), delivered->begin(), delivered->end());
                REQUIRE_FALSE(bq::test::commit_now(other, second.io));
            }
            return items.size() >= 8;
        },
        10s);
    CHECK(items.size() == 8);
}

TEST_CASE("process-shared topic: push consumers of one group in two queues, the second joining while the first "
          "works, handle what a third queue produces, each committed record once",
          "[mmap][process_shared][push]")
{
    temporary_directory directory;
    queue_runner producing;
    queue_runner first;
    queue_runner second;
    producing->add_topic(shared_topic(directory.path(), 4));
    first->add_topic(shared_topic(directory.path(), 4));
    second->add_topic(shared_topic(directory.path(), 4));
    std::mutex mutex;
    std::vector<std::string> handled;  // committed by some handler; guarded by mutex
    const auto handled_count = [&] {
        const std::lock_guard lock(mutex);
        return handled.size();
    };
    const auto add_pushers = [&](queue_runner& runner) {
        // Manual commit after the work, as a service would: a commit the re-share refuses
        // (partition_revoked) fails the handler, and the batch goes to the partition's new owner.
        runner->add_push_consumer(
            bq::push_subscription{.topic = "events", .group = "pushers", .batch_size = 16, .concurrency = 2},
            [&](bq::batch<std::string> items, bq::committer& committer) -> boost::asio::awaitable<void> {
                std::vector<std::string> got(items.begin(), items.end());
                co_await committer.commit();
                const std::lock_guard lock(mutex);
                handled.insert(handled.end(), got.begin(), got.end());
            });
        runner->start();
    };
    add_pushers(first);
    auto producer = producing->producer<std::string>("events");
    for (std::size_t number = 0; number < 400; ++number) {
        REQUIRE(producer.try_produce(record("p", number)));
    }
    REQUIRE(run_until(
        first.io, [&] { return handled_count() >= 64; }, 10s));
    add_pushers(second);
    // The statistics of the producing queue, which never consumed, show the group's commits.
    const auto lag = [&] {
        for (const bq::group_stats& group : producing->stats<std::string>("events").groups) {
            if (group.name == "pushers") {
                return group.lag;
            }
        }
        return std::uint64_t{400};
    };
    // A handler records its batch after the commit completed: the lag may reach 0 just before.
    const auto done = [&] { return handled_count() >= 400 && lag() == 0; };
    std::thread second_running([&] { run_until(second.io, done, 20s); });
    CHECK(run_until(first.io, done, 20s));
    second_running.join();
    const std::lock_guard lock(mutex);
    std::vector<std::size_t> numbers_handled = by_source(handled)["p"];
    std::sort(numbers_handled.begin(), numbers_handled.end());
    CHECK(numbers_handled == numbers(0, 400));
}

TEST_CASE("process-shared topic: a push consumer whose batch's partition moved to another queue while its handler "
          "ran lets the batch go to the new owner instead of retrying it in place",
          "[mmap][process_shared][push]")
{
    // Two partitions, one push loop per queue. The first queue's loop owns both until the second
    // joins; its handler holds its first batch of partition 1 until the second queue's loop joined
    // and the partition was revoked, then commits - which fails with partition_revoked. Retried in
    // place, that batch failed for ever and the loop never pulled again: neither partition moved on.
    temporary_directory directory;
    queue_runner producing;
    queue_runner first;
    queue_runner second;
    for (queue_runner* runner : {&producing, &first, &second}) {
        (*runner)->add_topic(shared_topic(directory.path(), 2));
    }
    std::mutex mutex;
    std::vector<std::string> handled;  // committed; guarded by mutex
    std::atomic<bool> holding = false;
    std::atomic<bool> held_once = false;
    std::optional<std::chrono::steady_clock::time_point> second_joined;  // guarded by mutex
    std::atomic<std::size_t> revoked_commits = 0;
    const auto handler = [&](bool hold_first_batch_of_partition_1) {
        return [&, hold_first_batch_of_partition_1](bq::batch<std::string> items,
                                                    bq::committer& committer) -> boost::asio::awaitable<void> {
            if (hold_first_batch_of_partition_1 && items.partition() == 1 && !held_once.exchange(true)) {
                holding = true;
                boost::asio::steady_timer wait(co_await boost::asio::this_coro::executor);
                for (;;) {
                    {
                        const std::lock_guard lock(mutex);
                        if (second_joined && std::chrono::steady_clock::now() - *second_joined > 1s) {
                            break;  // long enough for the leases to move partition 1 (a 200 ms period)
                        }
                    }
                    wait.expires_after(10ms);
                    co_await wait.async_wait(boost::asio::use_awaitable);
                }
            }
            std::vector<std::string> got(items.begin(), items.end());
            try {
                co_await committer.commit();
            } catch (const boost::system::system_error& failure) {
                revoked_commits += failure.code() == errc::partition_revoked ? 1 : 0;
                throw;
            }
            const std::lock_guard lock(mutex);
            handled.insert(handled.end(), got.begin(), got.end());
        };
    };
    const bq::push_subscription subscription{.topic = "events", .group = "pushers", .batch_size = 8};
    first->add_push_consumer(subscription, handler(true));
    first->start();
    auto producer = producing->producer<std::string>("events");
    for (std::size_t number = 0; number < 100; ++number) {
        REQUIRE(producer.try_produce(record("p", number)));
    }
    REQUIRE(run_until(
        first.io, [&] { return holding.load(); }, 10s));
    second->add_push_consumer(subscription, handler(false));
    second->start();
    {
        const std::lock_guard lock(mutex);
        second_joined = std::chrono::steady_clock::now();
    }
    const auto done = [&] {
        const std::lock_guard lock(mutex);
        return handled.size() >= 100;
    };
    std::thread second_running([&] { run_until(second.io, done, 20s); });
    CHECK(run_until(first.io, done, 20s));
    second_running.join();
    CHECK(revoked_commits >= 1);  // the held batch's commit was refused: the case this is about
    const std::lock_guard lock(mutex);
    std::vector<std::size_t> numbers_handled = by_source(handled)["p"];
    std::sort(numbers_handled.begin(), numbers_handled.end());
    CHECK(numbers_handled == numbers(0, 100));
}

}  // namespace

}  // namespace process_shared_topic_test
