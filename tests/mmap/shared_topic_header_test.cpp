// The pieces process-shared topics coordinate with (issue 27): the shared hold on a topic folder,
// the shared header with its option check, its robust append locks and its wake-up event - each
// with real processes where they span them.
#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/shared_topic_header.hpp"
#include "bufferqueue/mmap/detail/shared_topic_watcher.hpp"

#include "catch.hpp"
#include "child_process.hpp"
#include "test_support.hpp"

#include "bufferqueue/error.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace shared_topic_header_test {

namespace {

using bufferqueue::errc;
using bufferqueue::test::child_process;
using bufferqueue::test::error_from;
using bufferqueue::test::missing_from;
using bufferqueue::test::signal_pipe;
using bufferqueue::test::temporary_directory;
namespace detail = bufferqueue::detail;

detail::shared_topic_options orders_options()
{
    return {.partitions = 3,
            .segment_size = 4096,
            .max_retained_consumed_segments = 2,
            .serializer_name = "bufferqueue::json_serializer<order>"};
}

std::vector<char> file_bytes(const std::string& path)
{
    std::ifstream file(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("a process-shared folder is first for its first queue only, and again once every queue left it",
          "[mmap][shared]")
{
    const temporary_directory folder;
    {
        detail::shared_directory_lock first(folder.string());
        CHECK(first.first());
        first.finish_opening();
        detail::shared_directory_lock second(folder.string());
        CHECK_FALSE(second.first());
        second.finish_opening();
    }
    const detail::shared_directory_lock again(folder.string());
    CHECK(again.first());
}

TEST_CASE("a process-shared hold and an exclusive queue refuse each other with a clear error", "[mmap][shared]")
{
    const temporary_directory folder;
    {
        detail::shared_directory_lock shared(folder.string());
        shared.finish_opening();
        const auto refused = error_from([&] { detail::directory_lock exclusive(folder.string()); });
        REQUIRE(refused);
        CHECK(refused->code() == errc::io_error);
        CHECK(missing_from(refused->what(), {folder.string(), "already open by another queue"}) == "");
    }
    const detail::directory_lock exclusive(folder.string());
    const auto refused = error_from([&] { detail::shared_directory_lock shared(folder.string()); });
    REQUIRE(refused);
    CHECK(refused->code() == errc::io_error);
    CHECK(missing_from(refused->what(), {folder.string(), "process-shared", "not process-shared"}) == "");
}

TEST_CASE("a second process opening a process-shared folder waits until the first finished opening", "[mmap][shared]")
{
    const temporary_directory folder;
    const std::string marker = folder.file("first-finished");
    const signal_pipe first_opening;
    const signal_pipe started;
    // Forked before the first queue locks: a child forked later would share its lock's open file
    // description, and with it the lock.
    child_process second([&] {
        if (!first_opening.receive()) {
            return 2;
        }
        started.send();
        const detail::shared_directory_lock lock(folder.string());
        // The first queue writes the marker just before it lets others open.
        return !lock.first() && std::filesystem::exists(marker) ? 0 : 1;
    });
    detail::shared_directory_lock first(folder.string());
    REQUIRE(first_opening.send());
    REQUIRE(started.receive());
    // Gives the second process time to get past the open lock if it did not wait for it.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::ofstream(marker) << "done";
    first.finish_opening();
    CHECK(second.wait() == 0);
}

TEST_CASE("a queue opening a process-shared topic with other options is refused, naming the option and the "
          "folder, and changes nothing",
          "[mmap][shared]")
{
    const temporary_directory folder;
    const detail::shared_topic_header made("orders", folder.string(), orders_options(), true);
    const std::vector<char> before = file_bytes(made.path());
    REQUIRE(before.size() == detail::shared_header_layout::file_size(3));

    struct differing {
        const char* option;
        detail::shared_topic_options options;
        const char* here;
        const char* there;
    };
    auto options = orders_options();
    std::vector<differing> cases;
    options.partitions = 4;
    cases.push_back({"partitions", options, "is 4 here", "with 3"});
    options = orders_options();
    options.segment_size = 8192;
    cases.push_back({"segment_size", options, "is 8192 here", "with 4096"});
    options = orders_options();
    options.max_retained_consumed_segments.reset();
    cases.push_back({"max_retained_consumed_segments", options, "is none (never deletes) here", "with 2"});
    options = orders_options();
    options.serializer_name = "bufferqueue::msgpack_serializer<order>";
    cases.push_back({"serializer", options, "is bufferqueue::msgpack_serializer<order> here",
                     "with bufferqueue::json_serializer<order>"});
    for (const differing& mismatch : cases) {
        INFO(mismatch.option);
        const auto refused =
            error_from([&] { detail::shared_topic_header("orders", folder.string(), mismatch.options, false); });
        REQUIRE(refused);
        CHECK(refused->code() == errc::invalid_argument);
        CHECK(missing_from(refused->what(), {"'orders'", std::string("option '") + mismatch.option + "'", mismatch.here,
                                             mismatch.there, folder.string()}) == "");
    }
    CHECK(file_bytes(made.path()) == before);
    CHECK_NOTHROW(detail::shared_topic_header("orders", folder.string(), orders_options(), false));
}

TEST_CASE("a file in place of the shared header is refused as corrupt, naming it", "[mmap][shared]")
{
    const temporary_directory folder;
    const std::string path = folder.file("shared.header");
    std::ofstream(path) << std::string(300, 'x');
    const auto refused =
        error_from([&] { detail::shared_topic_header("orders", folder.string(), orders_options(), false); });
    REQUIRE(refused);
    CHECK(refused->code() == errc::corrupt_data);
    CHECK(missing_from(refused->what(), {path, "not a version 2 shared header"}) == "");
}

TEST_CASE("a version 1 shared header, which a process of an older bufferqueue has open, is refused with a clear "
          "error and changed by nobody but a first opener",
          "[mmap][shared]")
{
    const temporary_directory folder;
    std::string path;
    {
        const detail::shared_topic_header made("orders", folder.string(), orders_options(), true);
        path = made.path();
    }
    std::vector<char> bytes = file_bytes(path);
    REQUIRE(bytes.size() > 12);
    const std::uint32_t old_version = 1;
    std::memcpy(bytes.data() + 8, &old_version, sizeof old_version);
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));

    const auto refused =
        error_from([&] { detail::shared_topic_header("orders", folder.string(), orders_options(), false); });
    REQUIRE(refused);
    CHECK(refused->code() == errc::invalid_argument);
    CHECK(missing_from(refused->what(), {path, "version 1 shared header", "older bufferqueue", "version 2",
                                         "Close the older processes"}) == "");
    CHECK(file_bytes(path) == bytes);
    // Once no process has the topic open, the first opener makes it anew, at this version.
    CHECK_NOTHROW(detail::shared_topic_header("orders", folder.string(), orders_options(), true));
    CHECK_NOTHROW(detail::shared_topic_header("orders", folder.string(), orders_options(), false));
}

TEST_CASE("the append lock of a process killed while holding it passes to the next process, which is told",
          "[mmap][shared]")
{
    const temporary_directory folder;
    const detail::shared_topic_header header("orders", folder.string(), orders_options(), true);
    const signal_pipe locked;
    child_process holder([&] {
        const detail::shared_topic_header mapped("orders", folder.string(), orders_options(), false);
        auto lock = mapped.append_lock(1);
        lock.lock();
        locked.send();
        while (true) {
            ::pause();
        }
        return 0;
    });
    REQUIRE(locked.receive());
    holder.kill(SIGKILL);
    CHECK(holder.wait() == 128 + SIGKILL);

    auto lock = header.append_lock(1);
    CHECK(lock.lock());  // the holder died holding it
    lock.unlock();
    CHECK_FALSE(lock.lock());  // repaired: an ordinary lock again
    lock.unlock();
    auto other = header.append_lock(0);
    CHECK_FALSE(other.lock());
    other.unlock();
}

TEST_CASE("an append lock keeps two processes out of each other's critical sections", "[mmap][shared]")
{
    const temporary_directory folder;
    const detail::shared_topic_header header("orders", folder.string(), orders_options(), true);
    const std::string log_path = folder.file("log");
    // Each process appends "a" then "b" under the lock, many times; interleaving would show "aa" or "bb".
    const auto writer = [&] {
        const detail::shared_topic_header mapped("orders", folder.string(), orders_options(), false);
        auto lock = mapped.append_lock(0);
        for (int round = 0; round < 300; ++round) {
            lock.lock();
            std::ofstream(log_path, std::ios::app) << 'a';
            std::ofstream(log_path, std::ios::app) << 'b';
            lock.unlock();
        }
        return 0;
    };
    child_process first(writer);
    child_process second(writer);
    CHECK(first.wait() == 0);
    CHECK(second.wait() == 0);
    std::string expected;
    for (int round = 0; round < 600; ++round) {
        expected += "ab";
    }
    const std::vector<char> written = file_bytes(log_path);
    CHECK(std::string(written.begin(), written.end()) == expected);
}

TEST_CASE("a process-shared event wakes a waiter in another process, and a wait for a sequence already passed "
          "returns at once",
          "[mmap][shared]")
{
    const temporary_directory folder;
    const detail::shared_topic_header header("orders", folder.string(), orders_options(), true);
    auto event = header.wakeups().event();
    const std::uint32_t seen = event.sequence();
    const signal_pipe waiting;
    child_process waiter([&] {
        const detail::shared_topic_header mapped("orders", folder.string(), orders_options(), false);
        auto shared_event = mapped.wakeups().event();
        waiting.send();
        // Ten seconds stand for "never": a missed wake-up fails the test instead of hanging it.
        return shared_event.wait(seen, std::chrono::seconds(10)) ? 0 : 1;
    });
    REQUIRE(waiting.receive());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // most likely asleep in the futex by now
    event.notify();
    CHECK(waiter.wait() == 0);
    CHECK(event.sequence() == seen + 1);
    CHECK(event.wait(seen, std::chrono::seconds(10)));
    CHECK_FALSE(event.wait(event.sequence(), std::chrono::milliseconds(1)));
}

TEST_CASE("a process's watcher hears another process's notification and calls back", "[mmap][shared]")
{
    const temporary_directory folder;
    const detail::shared_topic_header header("orders", folder.string(), orders_options(), true);
    const signal_pipe go;
    // Forked before the watcher's thread starts.
    child_process notifier([&] {
        if (!go.receive()) {
            return 2;
        }
        const detail::shared_topic_header mapped("orders", folder.string(), orders_options(), false);
        mapped.wakeups().event().notify();
        return 0;
    });
    std::mutex mutex;
    std::condition_variable called;
    int calls = 0;
    {
        // A period of an hour: only a notification can call back within the test's wait.
        const detail::shared_topic_watcher watcher(
            header.wakeups(), std::chrono::hours(1),
            [&] {
                const std::lock_guard lock(mutex);
                ++calls;
                called.notify_all();
            },
            [] {});
        REQUIRE(go.send());
        CHECK(notifier.wait() == 0);
        std::unique_lock lock(mutex);
        // Ten seconds stand for "never": a missed wake-up fails the test instead of hanging it.
        CHECK(called.wait_for(lock, std::chrono::seconds(10), [&] { return calls >= 1; }));
    }
    const std::lock_guard lock(mutex);
    CHECK(calls >= 1);
}

TEST_CASE("a watcher calls back once per period when nothing is notified, and stops promptly", "[mmap][shared]")
{
    const temporary_directory folder;
    const detail::shared_topic_header header("orders", folder.string(), orders_options(), true);
    std::atomic<int> calls{0};
    std::atomic<int> membership_calls{0};
    {
        const detail::shared_topic_watcher watcher(
            header.wakeups(), std::chrono::milliseconds(5), [&] { calls.fetch_add(1); },
            [&] { membership_calls.fetch_add(1); });
        while (calls.load() < 3 || membership_calls.load() < 3) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    }
    const int after_stop = calls.load();
    const int membership_after_stop = membership_calls.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    CHECK(calls.load() == after_stop);  // the thread ended with the watcher
    CHECK(membership_calls.load() == membership_after_stop);
}

// Issue 52: an append wakes the watchers to publish it, but re-shares no group (that lists the lease
// folder and try-locks every member file); a membership change, in any process, does both.
TEST_CASE("a watcher re-shares the groups after a membership notification, not after an append's", "[mmap][shared]")
{
    const temporary_directory folder;
    const detail::shared_topic_header header("orders", folder.string(), orders_options(), true);
    std::atomic<int> appends{0};
    std::atomic<int> memberships{0};
    const auto heard = [](const std::atomic<int>& calls, int at_least) {
        // Ten seconds stand for "never": a missed wake-up fails the test instead of hanging it.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (calls.load() < at_least && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return calls.load() >= at_least;
    };
    const signal_pipe go;
    // Forked before the watcher's thread starts.
    child_process member([&] {
        if (!go.receive()) {
            return 2;
        }
        const detail::shared_topic_header mapped("orders", folder.string(), orders_options(), false);
        mapped.wakeups().notify_membership();
        return 0;
    });
    {
        // A period of an hour: only a notification can call back within the test.
        const detail::shared_topic_watcher watcher(
            header.wakeups(), std::chrono::hours(1), [&] { appends.fetch_add(1); }, [&] { memberships.fetch_add(1); });
        for (int append = 1; append <= 20; ++append) {
            header.wakeups().event().notify();  // what a writer does after it published for a waiting consumer
            REQUIRE(heard(appends, append));
        }
        CHECK(memberships.load() == 0);

        REQUIRE(go.send());
        CHECK(member.wait() == 0);
        CHECK(heard(memberships, 1));
        CHECK(appends.load() >= 21);  // a membership change publishes appends too
    }
}

// Issue 52: the membership's period is the bound on how long a member that died unnoticed keeps its
// partitions; appends that keep the watcher awake must not postpone it.
TEST_CASE("a watcher re-shares the groups once per period even while appends keep waking it", "[mmap][shared]")
{
    const temporary_directory folder;
    const detail::shared_topic_header header("orders", folder.string(), orders_options(), true);
    std::atomic<int> memberships{0};
    std::atomic<bool> stop{false};
    const auto started = std::chrono::steady_clock::now();
    std::chrono::steady_clock::duration third_after{};
    {
        const detail::shared_topic_watcher watcher(
            header.wakeups(), std::chrono::milliseconds(20), [] {}, [&] { memberships.fetch_add(1); });
        std::thread appender([&] {
            while (!stop.load()) {
                header.wakeups().event().notify();
                std::this_thread::sleep_for(std::chrono::microseconds(200));
            }
        });
        // Ten seconds stand for "never".
        while (memberships.load() < 3 && std::chrono::steady_clock::now() - started < std::chrono::seconds(10)) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        third_after = std::chrono::steady_clock::now() - started;
        stop.store(true);
        appender.join();
    }
    CHECK(memberships.load() >= 3);
    CHECK(third_after < std::chrono::seconds(2));  // three periods of 20 ms, not "never"
}

}  // namespace shared_topic_header_test
