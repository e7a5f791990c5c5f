// Group commit of a persistent partition under flush_strategy::immediate: produces that append while
// an msync is in flight share the next one, each completes only once a flush covered its own record,
// a failed msync fails exactly the produces whose records it covered, and close settles the waiting
// ones. The file layer's hooks hold the first msync of the log until the test releases it.
#include "bufferqueue/mmap/detail/mmap_partition.hpp"

#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/segment_format.hpp"

#include "catch.hpp"
#include "test_support.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace mmap_group_commit_test {

namespace {

using bufferqueue::test::memory_backed_temporary_path;
using bufferqueue::test::string_bytes_serializer;
using bufferqueue::test::temporary_directory;

namespace bq = bufferqueue;
namespace detail = bufferqueue::detail;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

using partition_type = detail::mmap_partition<std::string>;

partition_type::settings settings(const fs::path& folder)
{
    return {.topic = "events",
            .partition = 0,
            .folder = folder.string(),
            .segment_size = 64 * 1024,
            .flush = bq::flush_strategy::immediate,
            .serializer = string_bytes_serializer{}};
}

bool is_log(const std::string& path)
{
    return path.size() > 4 && path.compare(path.size() - 4, 4, ".log") == 0;
}

// Holds msync number `held` of the log (counting from 1) until `release()`, and fails msync number
// `failing` with EIO (0: none). Counts the log's completed msyncs.
class msync_gate {
public:
    explicit msync_gate(int held, int failing = 0)
        : held_(held), failing_(failing),
          hooks_(detail::file_hooks{
              .before_operation =
                  [this](detail::file_operation operation, const std::string& path) {
                      return operation == detail::file_operation::msync && is_log(path) ? before_msync() : 0;
                  },
              .after_flush =
                  [this](detail::file_operation operation, const std::string& path, std::uint64_t, std::uint64_t) {
                      if (operation == detail::file_operation::msync && is_log(path)) {
                          const std::lock_guard lock(mutex_);
                          ++completed_;
                      }
                  }})
    {
    }

    ~msync_gate() { release(); }

    msync_gate(const msync_gate&) = delete;
    msync_gate& operator=(const msync_gate&) = delete;

    // Waits until the held msync started; false after 5 s.
    bool wait_until_held()
    {
        std::unique_lock lock(mutex_);
        return changed_.wait_for(lock, 5s, [&] { return holding_; });
    }

    void release()
    {
        const std::lock_guard lock(mutex_);
        released_ = true;
        changed_.notify_all();
    }

    int started() const
    {
        const std::lock_guard lock(mutex_);
        return started_;
    }

    int completed() const
    {
        const std::lock_guard lock(mutex_);
        return completed_;
    }

private:
    int before_msync()
    {
        std::unique_lock lock(mutex_);
        const int number = ++started_;
        if (number == held_) {
            holding_ = true;
            changed_.notify_all();
            changed_.wait(lock, [&] { return released_; });
        }
        return number == failing_ ? EIO : 0;
    }

    const int held_;
    const int failing_;
    mutable std::mutex mutex_;
    std::condition_variable changed_;
    int started_ = 0;    // guarded by mutex_
    int completed_ = 0;  // guarded by mutex_
    bool holding_ = false;
    bool released_ = false;
    detail::scoped_file_hooks hooks_;
};

// What a produce on its own thread saw: its error (none when it was acknowledged) and how many
// msyncs of the log had completed when it returned.
struct produce_outcome {
    std::error_code error;
    int completed_msyncs = 0;
};

std::future<produce_outcome> produce_async(partition_type& partition, const msync_gate& gate, std::string item)
{
    return std::async(std::launch::async, [&partition, &gate, item = std::move(item)] {
        produce_outcome outcome;
        std::size_t appended = 0;
        try {
            partition.append(bq::item_source<std::string>{.base = &item, .count = 1}, appended);
        } catch (const bq::error& failure) {
            outcome.error = failure.code();
        }
        outcome.completed_msyncs = gate.completed();
        return outcome;
    });
}

// The records written into the segment files in `folder`, durable or not, as the file system shows
// them (the page cache the partition's mappings write into): read, not mapped, and scanned.
std::uint64_t written_records(const fs::path& folder)
{
    std::uint64_t records = 0;
    for (const fs::directory_entry& entry : fs::directory_iterator(folder)) {
        if (!is_log(entry.path().string())) {
            continue;
        }
        std::ifstream file(entry.path(), std::ios::binary);
        const std::vector<char> bytes{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
        records += detail::scan_segment(std::as_bytes(std::span(bytes)), detail::segment_header_size).record_count;
    }
    return records;
}

// Waits (bounded) until the partition in `folder` wrote `count` records, durable or not: the
// appends ran.
bool wait_for_items(const fs::path& folder, std::uint64_t count)
{
    for (int attempt = 0; attempt < 5000 && written_records(folder) < count; ++attempt) {
        std::this_thread::sleep_for(1ms);
    }
    return written_records(folder) >= count;
}

std::vector<std::string> read_all(const fs::path& folder)
{
    partition_type partition(settings(folder));
    partition_type::cursor& cursor = partition.open_cursor("check");
    const bq::pull_result<std::string> pulled = partition.pull(cursor, 1000);
    return {pulled.items.begin(), pulled.items.end()};
}

bool contains(const std::vector<std::string>& items, const std::string& item)
{
    return std::find(items.begin(), items.end(), item) != items.end();
}

}  // namespace

TEST_CASE("mmap group commit: a produce that appends during an msync completes only after a later msync",
          "[mmap][concurrency][group-commit]")
{
    temporary_directory directory("bufferqueue-group-commit", memory_backed_temporary_path());
    msync_gate gate(1);
    partition_type partition(settings(directory.path()));

    auto first = produce_async(partition, gate, "first");
    REQUIRE(gate.wait_until_held());
    auto second = produce_async(partition, gate, "second");
    REQUIRE(wait_for_items(directory.path(), 2));

    // Neither record is durable yet: the msync that would cover "first" is held, and "second" was
    // appended after that msync took its range.
    CHECK(first.wait_for(50ms) == std::future_status::timeout);
    CHECK(second.wait_for(1ms) == std::future_status::timeout);
    gate.release();

    const produce_outcome first_outcome = first.get();
    const produce_outcome second_outcome = second.get();
    CHECK_FALSE(first_outcome.error);
    CHECK(first_outcome.completed_msyncs >= 1);
    CHECK_FALSE(second_outcome.error);
    CHECK(second_outcome.completed_msyncs == 2);
}

TEST_CASE("mmap group commit: the records appended while an msync is in flight go out together in the next one",
          "[mmap][concurrency][group-commit]")
{
    temporary_directory directory("bufferqueue-group-commit", memory_backed_temporary_path());
    {
        msync_gate gate(1);
        partition_type partition(settings(directory.path()));
        auto leader = produce_async(partition, gate, "leader");
        REQUIRE(gate.wait_until_held());
        std::vector<std::future<produce_outcome>> followers;
        for (int index = 0; index < 3; ++index) {
            followers.push_back(produce_async(partition, gate, "follower-" + std::to_string(index)));
        }
        REQUIRE(wait_for_items(directory.path(), 4));
        gate.release();

        CHECK_FALSE(leader.get().error);
        for (auto& follower : followers) {
            const produce_outcome outcome = follower.get();
            CHECK_FALSE(outcome.error);
            CHECK(outcome.completed_msyncs == 2);
        }
        CHECK(gate.started() == 2);  // one msync per record would be 4
    }
    const std::vector<std::string> items = read_all(directory.path());
    CHECK(items.size() == 4);
    CHECK(contains(items, "leader"));
    CHECK(contains(items, "follower-2"));
}

TEST_CASE("mmap group commit: a failed msync fails every produce whose record it covered, and no other",
          "[mmap][concurrency][group-commit][fault]")
{
    temporary_directory directory("bufferqueue-group-commit", memory_backed_temporary_path());
    {
        msync_gate gate(1, 2);  // the first msync is held and succeeds, the second (the group) fails
        partition_type partition(settings(directory.path()));
        auto leader = produce_async(partition, gate, "leader");
        REQUIRE(gate.wait_until_held());
        std::vector<std::future<produce_outcome>> group;
        for (int index = 0; index < 3; ++index) {
            group.push_back(produce_async(partition, gate, "grouped-" + std::to_string(index)));
        }
        REQUIRE(wait_for_items(directory.path(), 4));
        gate.release();

        CHECK_FALSE(leader.get().error);
        for (auto& member : group) {
            CHECK(member.get().error == bq::errc::io_error);
        }
        CHECK(gate.started() == 2);

        // The next flush succeeds again and acknowledges its own record.
        CHECK_FALSE(produce_async(partition, gate, "after").get().error);
        CHECK(gate.started() == 3);
    }
    const std::vector<std::string> items = read_all(directory.path());
    CHECK(contains(items, "leader"));
    CHECK(contains(items, "after"));
}

TEST_CASE("mmap group commit: closing a partition while produces wait for a flush completes them",
          "[mmap][concurrency][group-commit]")
{
    temporary_directory directory("bufferqueue-group-commit", memory_backed_temporary_path());
    {
        msync_gate gate(1);
        partition_type partition(settings(directory.path()));
        auto leader = produce_async(partition, gate, "leader");
        REQUIRE(gate.wait_until_held());
        auto waiting = produce_async(partition, gate, "waiting");
        REQUIRE(wait_for_items(directory.path(), 2));
        auto closing = std::async(std::launch::async, [&] { partition.close(); });
        CHECK(closing.wait_for(20ms) == std::future_status::timeout);  // waits for the msync in flight
        gate.release();
        closing.get();
        CHECK_FALSE(leader.get().error);
        const produce_outcome outcome = waiting.get();
        CHECK_FALSE(outcome.error);
        CHECK(outcome.completed_msyncs == 2);
    }
    const std::vector<std::string> items = read_all(directory.path());
    CHECK(items == std::vector<std::string>{"leader", "waiting"});
}

TEST_CASE("mmap group commit: concurrent producers get every acknowledged record stored once, in per-thread order",
          "[mmap][concurrency][group-commit]")
{
    temporary_directory directory("bufferqueue-group-commit", memory_backed_temporary_path());
    constexpr int threads = 4;
    constexpr int per_thread = 40;
    {
        partition_type partition(settings(directory.path()));
        std::vector<std::thread> producers;
        std::vector<int> failures(threads, 0);
        for (int thread = 0; thread < threads; ++thread) {
            producers.emplace_back([&, thread] {
                for (int index = 0; index < per_thread; ++index) {
                    const std::string item = std::to_string(thread) + ":" + std::to_string(index);
                    std::size_t appended = 0;
                    try {
                        partition.append(bq::item_source<std::string>{.base = &item, .count = 1}, appended);
                    } catch (const bq::error&) {
                        ++failures[static_cast<std::size_t>(thread)];
                    }
                }
            });
        }
        for (std::thread& producer : producers) {
            producer.join();
        }
        CHECK(failures == std::vector<int>(threads, 0));
    }
    const std::vector<std::string> items = read_all(directory.path());
    REQUIRE(items.size() == threads * per_thread);
    std::vector<int> next(threads, 0);
    for (const std::string& item : items) {
        const auto colon = item.find(':');
        const int thread = std::stoi(item.substr(0, colon));
        CHECK(std::stoi(item.substr(colon + 1)) == next[static_cast<std::size_t>(thread)]++);
    }
}

TEST_CASE("mmap group commit: a record becomes readable only once the msync that covers it succeeded",
          "[mmap][concurrency][group-commit]")
{
    // Seen failing with records published before their msync: the consumer read "first" while the
    // msync that was to make it durable was still held (a power loss then would have taken back a
    // record a consumer had seen, and whose producer could still be told it failed).
    temporary_directory directory("bufferqueue-group-commit", memory_backed_temporary_path());
    msync_gate gate(1, 2);  // the first msync is held; the second fails
    partition_type partition(settings(directory.path()));
    partition_type::cursor& cursor = partition.open_cursor("reader");

    auto first = produce_async(partition, gate, "first");
    REQUIRE(gate.wait_until_held());
    REQUIRE(wait_for_items(directory.path(), 1));
    CHECK_FALSE(partition.has_data(cursor));
    CHECK(partition.end_items() == 0);
    CHECK(partition.pull(cursor, 10).items.empty());
    gate.release();
    CHECK_FALSE(first.get().error);
    CHECK(partition.end_items() == 1);
    REQUIRE(partition.has_data(cursor));
    const bq::pull_result<std::string> pulled = partition.pull(cursor, 10);
    REQUIRE(pulled.items.size() == 1);
    CHECK(pulled.items[0] == "first");
    partition.commit(cursor, pulled.next_offset);  // flushes nothing: "first" is durable
    partition.release_batch(cursor);
    CHECK(gate.started() == 1);

    // A record whose msync failed is not readable either (its producer was told it failed).
    auto second = produce_async(partition, gate, "second");
    CHECK(second.get().error == bq::errc::io_error);
    CHECK_FALSE(partition.has_data(cursor));
    CHECK(partition.end_items() == 1);
}

}  // namespace mmap_group_commit_test
