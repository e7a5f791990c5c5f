// Fault sweep: EIO or ENOSPC injected through the file layer's seam into the k-th call of each
// operation (fsync, msync, rename, posix_fallocate, directory fsync, write, ftruncate, mmap, open)
// of a produce/consume/commit workload with segment rollovers and retention, for every k the
// workload reaches. Every call either succeeds or reports io_error; nothing acknowledged is lost,
// nothing is stored twice, committed progress never goes backwards, a memory topic of the same queue
// keeps working, and after the fault the topic reopens consistently and accepts records again.
#include "bufferqueue/mmap/mmap_topic.hpp"

#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/memory/memory_topic.hpp"
#include "bufferqueue/mmap/detail/file.hpp"

#include "catch.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/io_context.hpp>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace mmap_fault_sweep_test {

namespace {

using bufferqueue::test::commit_now;
using bufferqueue::test::memory_backed_temporary_path;
using bufferqueue::test::segment_indices;
using bufferqueue::test::string_bytes_serializer;
using bufferqueue::test::temporary_directory;

namespace bq = bufferqueue;
namespace detail = bufferqueue::detail;
using detail::file_operation;

constexpr std::size_t items_per_run = 60;

std::string item(std::size_t index)
{
    std::string text = std::to_string(index);
    return "item-" + std::string(4 - text.size(), '0') + text + std::string(index % 24, '.');
}

std::size_t index_of(const std::string& text)
{
    return std::stoul(text.substr(5, 4));
}

bq::mmap_topic_options<std::string> topic_options(const temporary_directory& directory)
{
    return {.name = "events",
            .partitions = 1,
            .data_directory = directory.path(),
            .segment_size = 512,
            .max_retained_consumed_segments = 1,
            .flush = bq::flush_strategy::immediate,
            .flush_batch_size = 3,
            .serializer = string_bytes_serializer{}};
}

// Fails the `target`-th call (counting from 1) of `operation` on the topic's files with `error_number`;
// counts the calls.
struct injector {
    injector(file_operation failing, int error, std::size_t call)
        : operation(failing), error_number(error), target(call)
    {
    }

    file_operation operation;
    int error_number;
    std::size_t target;
    std::mutex mutex;
    std::size_t calls = 0;
    std::size_t injected = 0;

    detail::file_hooks hooks()
    {
        return {.before_operation =
                    [this](file_operation seen, const std::string& path) {
                        std::lock_guard lock(mutex);
                        if (seen != operation || path.find("/events") == std::string::npos) {
                            return 0;
                        }
                        if (++calls == target) {
                            ++injected;
                            return error_number;
                        }
                        return 0;
                    },
                .after_flush = {}};
    }
};

struct run_result {
    std::size_t calls = 0;
    std::size_t injected = 0;
    std::size_t failed_calls = 0;
};

// The workload: produce items one call at a time, consuming and committing every few items.
run_result run_with_fault(file_operation operation, int error_number, std::size_t target)
{
    const temporary_directory directory("bufferqueue-fault-sweep", memory_backed_temporary_path());
    injector faults(operation, error_number, target);
    std::set<std::size_t> acknowledged;
    std::set<std::size_t> attempted;
    std::size_t committed = 0;  // items the group's acknowledged commits cover
    run_result result;
    boost::asio::io_context io;
    {
        const detail::scoped_file_hooks hooks(faults.hooks());
        std::unique_ptr<bq::buffer_queue> queue;
        try {
            queue = std::make_unique<bq::buffer_queue>(io.get_executor());
            queue->add_topic(topic_options(directory));
        } catch (const bq::error& failure) {
            // Opening itself hit the fault: reported as io_error, and the next open works.
            CHECK(failure.code() == bq::errc::io_error);
            ++result.failed_calls;
            queue = std::make_unique<bq::buffer_queue>(io.get_executor());
            queue->add_topic(topic_options(directory));
        }
        queue->add_topic(bq::memory_topic_options<std::string>{.name = "memory"});
        auto producer = queue->producer<std::string>("events");
        auto memory = queue->producer<std::string>("memory");
        std::optional<bq::pull_consumer<std::string>> consumer;
        std::size_t delivered = 0;
        for (std::size_t i = 0; i < items_per_run; ++i) {
            attempted.insert(i);
            try {
                const bool stored = producer.try_produce(item(i));  // outside REQUIRE, which catches
                CHECK(stored);
                acknowledged.insert(i);
            } catch (const bq::error& failure) {
                CHECK(failure.code() == bq::errc::io_error);
                CHECK(std::string(failure.what()).find("events") != std::string::npos);
                ++result.failed_calls;
            }
            // Other topics are unaffected.
            REQUIRE(memory.try_produce(item(i)));
            if (i % 7 == 6) {
                try {
                    if (!consumer) {
                        consumer.emplace(queue->create_pull_consumer<std::string>(
                            {.topic = "events", .group = "g", .batch_size = 5}));
                    }
                    while (auto batch = consumer->try_consume()) {
                        // Delivered in order from the group's committed position (a batch whose
                        // commit failed is delivered again).
                        CHECK(index_of((*batch)[0]) >= committed);
                        for (const std::string& each : *batch) {
                            CHECK(index_of(each) >= delivered);
                            delivered = index_of(each) + 1;
                        }
                        const boost::system::error_code error = commit_now(*consumer, io);
                        if (error) {
                            CHECK(error == bq::errc::io_error);
                            ++result.failed_calls;
                            delivered = committed;
                            break;
                        }
                        committed = delivered;
                    }
                } catch (const bq::error& failure) {
                    CHECK(failure.code() == bq::errc::io_error);
                    ++result.failed_calls;
                }
            }
        }
        result.calls = faults.calls;
        result.injected = faults.injected;
    }
    // Reopened without faults: every acknowledged item is there once, in order, nothing that was not
    // attempted; the group resumes at or after its last acknowledged commit; new records are accepted.
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(topic_options(directory));
    auto fresh = queue.create_pull_consumer<std::string>({.topic = "events", .group = "fresh", .batch_size = 1000});
    auto resumed = queue.create_pull_consumer<std::string>({.topic = "events", .group = "g", .batch_size = 1000});
    std::vector<std::size_t> stored;
    if (auto batch = fresh.try_consume()) {
        for (const std::string& each : *batch) {
            CHECK(each == item(index_of(each)));
            stored.push_back(index_of(each));
        }
    }
    for (std::size_t i = 1; i < stored.size(); ++i) {
        CHECK(stored[i] > stored[i - 1]);
    }
    const std::set<std::size_t> stored_set(stored.begin(), stored.end());
    for (const std::size_t each : acknowledged) {
        if (each >= (stored.empty() ? 0 : stored.front())) {
            CHECK(stored_set.count(each) == 1);
        }
    }
    for (const std::size_t each : stored) {
        CHECK(attempted.count(each) == 1);
    }
    if (auto batch = resumed.try_consume()) {
        CHECK(index_of((*batch)[0]) >= committed);
    }
    auto producer = queue.producer<std::string>("events");
    REQUIRE(producer.try_produce(item(items_per_run)));
    return result;
}

}  // namespace

TEST_CASE("mmap fault sweep: an I/O error at any call of any file operation is reported and loses nothing "
          "acknowledged",
          "[mmap][fault]")
{
    const file_operation operations[] = {file_operation::fsync,
                                         file_operation::msync,
                                         file_operation::rename,
                                         file_operation::preallocate,
                                         file_operation::fsync_directory,
                                         file_operation::write,
                                         file_operation::truncate,
                                         file_operation::map,
                                         file_operation::open,
                                         file_operation::remove,
                                         file_operation::status};
    std::size_t faults = 0;
    std::size_t failed_calls = 0;
    for (const file_operation operation : operations) {
        for (const int error_number : {EIO, ENOSPC}) {
            // A first run without a fault counts the calls of this operation.
            const std::size_t calls = run_with_fault(operation, error_number, 0).calls;
            REQUIRE(calls > 0);
            for (std::size_t target = 1; target <= calls; ++target) {
                INFO(detail::operation_name(operation) << " call " << target << " of " << calls << " fails with "
                                                       << (error_number == EIO ? "EIO" : "ENOSPC"));
                const run_result result = run_with_fault(operation, error_number, target);
                CHECK(result.injected == 1);
                faults += result.injected;
                failed_calls += result.failed_calls;
            }
        }
    }
    CHECK(faults > 100);
    WARN("fault sweep: " << faults << " faults injected, " << failed_calls << " calls reported io_error");
}

namespace {

// 256-byte segments of 13 records of 8-byte items; retention keeps no consumed segment.
bq::mmap_topic_options<std::string> retention_topic(const temporary_directory& directory)
{
    return {.name = "events",
            .partitions = 1,
            .data_directory = directory.path(),
            .segment_size = 256,
            .max_retained_consumed_segments = 0,
            .serializer = string_bytes_serializer{}};
}

std::vector<std::string> eight_byte_items(std::size_t count)
{
    std::vector<std::string> items;
    for (std::size_t i = 0; i < count; ++i) {
        const std::string text = std::to_string(i);
        items.push_back("item" + std::string(4 - text.size(), '0') + text);
    }
    return items;
}

// Every deletion of a segment file fails with EIO.
detail::file_hooks segment_deletion_fails()
{
    return {.before_operation =
                [](file_operation operation, const std::string& path) {
                    return operation == file_operation::remove && path.ends_with(".log") ? EIO : 0;
                },
            .after_flush = {}};
}

}  // namespace

TEST_CASE("mmap fault: a commit whose retention cannot delete a segment succeeds, and the deletion is retried",
          "[mmap][fault][retention]")
{
    const temporary_directory directory("bufferqueue-retention-fault", memory_backed_temporary_path());
    const auto folder = directory.path() / "events" / "partition-00000";
    const std::vector<std::string> items = eight_byte_items(40);  // segments 0 to 3
    boost::asio::io_context io;
    {
        bq::buffer_queue queue(io.get_executor());
        queue.add_topic(retention_topic(directory));
        auto producer = queue.producer<std::string>("events");
        auto consumer = queue.create_pull_consumer<std::string>({.topic = "events", .group = "g", .batch_size = 100});
        REQUIRE(producer.try_produce(std::span<const std::string>(items)));
        REQUIRE(consumer.try_consume()->size() == items.size());
        const auto failures = [&] { return queue.stats<std::string>("events").partitions.at(0).maintenance_failures; };
        CHECK(failures() == 0);
        {
            const detail::scoped_file_hooks hooks(segment_deletion_fails());
            // The checkpoint is stored before retention runs: the commit stands, so it succeeds.
            CHECK_FALSE(commit_now(consumer, io));
            CHECK(segment_indices(folder) == std::vector<std::uint64_t>{0, 1, 2, 3});
            CHECK_FALSE(consumer.try_consume());
            // ... and the failure is visible in the statistics.
            CHECK(failures() == 1);
        }
        // The next commit retries the deletion.
        REQUIRE(producer.try_produce(std::string("item0040")));
        REQUIRE(consumer.try_consume()->size() == 1);
        CHECK_FALSE(commit_now(consumer, io));
        CHECK(segment_indices(folder) == std::vector<std::uint64_t>{3});
        CHECK(failures() == 1);  // monotonic: the retry succeeded
    }
    // The group resumes after everything it committed.
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(retention_topic(directory));
    auto resumed = queue.create_pull_consumer<std::string>({.topic = "events", .group = "g"});
    CHECK_FALSE(resumed.try_consume());
}

TEST_CASE("mmap fault: under auto commit a retention failure loses no item", "[mmap][fault][retention]")
{
    const temporary_directory directory("bufferqueue-retention-fault", memory_backed_temporary_path());
    const std::vector<std::string> items = eight_byte_items(40);
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(retention_topic(directory));
    auto producer = queue.producer<std::string>("events");
    auto consumer = queue.create_pull_consumer<std::string>(
        {.topic = "events", .group = "g", .auto_commit = true, .batch_size = 5});
    REQUIRE(producer.try_produce(std::span<const std::string>(items)));
    const detail::scoped_file_hooks hooks(segment_deletion_fails());
    std::vector<std::string> delivered;
    std::size_t failures = 0;
    for (std::size_t attempt = 0; attempt < 2 * items.size(); ++attempt) {
        try {
            const auto batch = consumer.try_consume();
            if (!batch) {
                break;
            }
            delivered.insert(delivered.end(), batch->begin(), batch->end());
        } catch (const bq::error& failure) {
            INFO(failure.what());
            ++failures;
        }
    }
    CHECK(failures == 0);
    CHECK(delivered == items);
}

}  // namespace mmap_fault_sweep_test
