#include "bufferqueue/mmap/mmap_topic.hpp"

#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/mmap/detail/file.hpp"

#include "catch.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/io_context.hpp>

#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace mmap_disk_full_test {

namespace {

using bufferqueue::test::string_bytes_serializer;
using bufferqueue::test::temporary_directory;

namespace bq = bufferqueue;
namespace fs = std::filesystem;
using bq::errc;
using bq::detail::file_operation;

// ---- helpers ------------------------------------------------------------------------------------

bq::mmap_topic_options<std::string> string_topic(const fs::path& directory, std::uint64_t segment_size,
                                                 const std::string& name = "events")
{
    return {.name = name,
            .partitions = 1,
            .data_directory = directory,
            .segment_size = segment_size,
            .serializer = string_bytes_serializer{}};
}

std::string numbered(std::size_t index, std::size_t width = 8)
{
    std::string text = std::to_string(index);
    text.insert(0, width - std::min(width, text.size()), '0');
    return text;
}

std::vector<std::string> numbered_range(std::size_t first, std::size_t count)
{
    std::vector<std::string> items;
    for (std::size_t i = first; i < first + count; ++i) {
        items.push_back(numbered(i));
    }
    return items;
}

// The shared queue_runner, with the consumers it drains through.
struct queue_runner : bufferqueue::test::queue_runner {
    bq::buffer_queue& reopen()
    {
        consumers.clear();
        return bufferqueue::test::queue_runner::reopen();
    }

    boost::system::error_code commit(bq::pull_consumer<std::string>& consumer)
    {
        return bufferqueue::test::commit_now(consumer, io);
    }

    boost::system::error_code produce(const std::string& topic, const std::string& item)
    {
        auto producer = queue->producer<std::string>(topic);
        return bufferqueue::test::produce_now(producer, item, io);
    }

    // Consumes and commits everything the group can read now (the group is created on first use).
    std::vector<std::string> drain(const std::string& topic, const std::string& group)
    {
        auto found = consumers.find(topic + "/" + group);
        if (found == consumers.end()) {
            found = consumers
                        .emplace(topic + "/" + group,
                                 queue->create_pull_consumer<std::string>({.topic = topic, .group = group}))
                        .first;
        }
        std::vector<std::string> items;
        while (auto delivered = found->second.try_consume()) {
            items.insert(items.end(), delivered->begin(), delivered->end());
            REQUIRE_FALSE(commit(found->second));
        }
        return items;
    }

    std::map<std::string, bq::pull_consumer<std::string>> consumers;
};

std::uint64_t checkpoint(const fs::path& path)
{
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in);
    const std::vector<unsigned char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    REQUIRE(bytes.size() == 16);  // checkpoint format version 2: value, version, CRC-32C
    std::uint64_t value = 0;
    for (int i = 7; i >= 0; --i) {
        value = (value << 8) | bytes[static_cast<std::size_t>(i)];
    }
    return value;
}

std::vector<std::string> temporary_leftovers(const fs::path& root)
{
    std::vector<std::string> found;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
        if (entry.path().filename().string().ends_with(".tmp")) {
            found.push_back(entry.path().string());
        }
    }
    return found;
}

// Fails one kind of file operation on paths containing `path_part` with `error_number` while armed.
class fault_injector {
public:
    fault_injector(file_operation operation, std::string path_part, int error_number)
        : state_(std::make_shared<state>()),
          hooks_(bq::detail::file_hooks{.before_operation =
                                            [state = state_, operation, path_part = std::move(path_part),
                                             error_number](file_operation seen, const std::string& path) {
                                                if (seen == operation && state->armed.load() &&
                                                    path.find(path_part) != std::string::npos) {
                                                    ++state->injected;
                                                    return error_number;
                                                }
                                                return 0;
                                            },
                                        .after_flush = {}})
    {
    }

    void arm() { state_->armed = true; }
    void disarm() { state_->armed = false; }
    int injected() const { return state_->injected.load(); }

private:
    struct state {
        std::atomic<bool> armed{false};
        std::atomic<int> injected{0};
    };
    std::shared_ptr<state> state_;
    bq::detail::scoped_file_hooks hooks_;
};

constexpr std::uint64_t small_segment = 256;  // 13 records of 8-byte payloads per segment

// ---- a real full disk ---------------------------------------------------------------------------

// Exit codes of the full-disk child process.
enum child_status : int {
    child_passed = 0,
    child_skipped = 77,
};

[[noreturn]] void child_fail(int code, const std::string& message)
{
    std::fprintf(stderr, "full-disk child: %s\n", message.c_str());
    std::fflush(stderr);
    ::_exit(code);
}

// Runs in a forked child: mounts a 2 MiB tmpfs in a private mount namespace, fills it through a
// topic and checks what was acknowledged. Reports through its exit status.
[[noreturn]] void run_full_disk_child(const fs::path& mount_point)
{
    if (::unshare(CLONE_NEWNS) != 0) {
        const int error = errno;
        child_fail(error == EPERM || error == EINVAL || error == ENOSYS ? child_skipped : 10,
                   std::string("unshare(CLONE_NEWNS): ") + std::strerror(error));
    }
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
        // EINVAL: the root is not a mount point, as in a chroot into a plain folder (debootstrap).
        const int error = errno;
        child_fail(error == EPERM || error == EACCES || error == EINVAL ? child_skipped : 11,
                   std::string("making mounts private: ") + std::strerror(error) +
                       (error == EINVAL ? " (the root is not a mount point: a chroot into a plain folder?)" : ""));
    }
    if (::mount("bufferqueue-test", mount_point.c_str(), "tmpfs", 0, "size=2m") != 0) {
        const int error = errno;
        child_fail(error == EPERM || error == EACCES ? child_skipped : 12,
                   std::string("mounting a tmpfs: ") + std::strerror(error));
    }
    try {
        // Room that can be given back later.
        {
            std::ofstream filler(mount_point / "filler", std::ios::binary);
            const std::string block(64 * 1024, 'f');
            for (int i = 0; i < 4; ++i) {
                filler.write(block.data(), static_cast<std::streamsize>(block.size()));
            }
            if (!filler) {
                child_fail(13, "cannot write the filler file");
            }
        }
        const auto options = string_topic(mount_point, 64 * 1024);
        const auto record = [](std::size_t index) { return numbered(index) + std::string(992, 'r'); };
        std::vector<std::string> acknowledged;
        {
            boost::asio::io_context io;
            bq::buffer_queue queue(io.get_executor());
            queue.add_topic(options);
            auto producer = queue.producer<std::string>("events");
            auto reader =
                queue.create_pull_consumer<std::string>({.topic = "events", .group = "g", .batch_size = 100000});
            bool failed = false;
            for (std::size_t i = 0; i < 10000 && !failed; ++i) {
                try {
                    producer.try_produce(record(i));
                    acknowledged.push_back(record(i));
                } catch (const bq::error& failure) {
                    if (failure.code() != errc::io_error) {
                        child_fail(14, std::string("produce failed with another error: ") + failure.what());
                    }
                    failed = true;
                }
            }
            if (!failed) {
                child_fail(15, "the disk never filled up");
            }
            try {
                producer.try_produce(record(acknowledged.size()));
                child_fail(16, "a produce on a full disk succeeded");
            } catch (const bq::error& failure) {
                if (failure.code() != errc::io_error) {
                    child_fail(16, std::string("produce failed with another error: ") + failure.what());
                }
            }
            const auto delivered = reader.try_consume();
            if (!delivered || std::vector<std::string>(delivered->begin(), delivered->end()) != acknowledged) {
                child_fail(17, "the readable records are not exactly the acknowledged ones (" +
                                   std::to_string(delivered ? delivered->size() : 0) + " read, " +
                                   std::to_string(acknowledged.size()) + " acknowledged)");
            }
        }
        {
            // Reopened on the full disk: everything acknowledged is readable.
            boost::asio::io_context io;
            bq::buffer_queue queue(io.get_executor());
            queue.add_topic(options);
            auto reader =
                queue.create_pull_consumer<std::string>({.topic = "events", .group = "g", .batch_size = 100000});
            const auto delivered = reader.try_consume();
            if (!delivered || std::vector<std::string>(delivered->begin(), delivered->end()) != acknowledged) {
                child_fail(18, "after reopening, the readable records are not exactly the acknowledged ones (" +
                                   std::to_string(delivered ? delivered->size() : 0) + " read, " +
                                   std::to_string(acknowledged.size()) + " acknowledged)");
            }
            // With room again, producing and committing work.
            fs::remove(mount_point / "filler");
            auto producer = queue.producer<std::string>("events");
            producer.try_produce(std::string("after"));
            acknowledged.push_back("after");
            const auto all = reader.try_consume();
            if (!all || std::vector<std::string>(all->begin(), all->end()) != acknowledged) {
                child_fail(19, "a record produced after freeing space is not readable");
            }
            boost::system::error_code committed = errc::invalid_argument;
            reader.commit([&](boost::system::error_code error) { committed = error; });
            io.run();
            if (committed) {
                child_fail(20, "commit after freeing space failed: " + committed.message());
            }
        }
        boost::asio::io_context io;
        bq::buffer_queue queue(io.get_executor());
        queue.add_topic(options);
        auto reader = queue.create_pull_consumer<std::string>({.topic = "events", .group = "g"});
        if (reader.try_consume()) {
            child_fail(21, "the committed group reads records again after a reopen");
        }
    } catch (const std::exception& failure) {
        child_fail(22, std::string("unexpected exception: ") + failure.what());
    }
    ::_exit(child_passed);
}

TEST_CASE("mmap disk: a full disk makes produce fail with io_error, never SIGBUS, and loses nothing acknowledged",
          "[mmap][disk]")
{
    temporary_directory directory;
    const fs::path mount_point = directory.path() / "tmpfs";
    fs::create_directory(mount_point);
    std::fflush(nullptr);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        run_full_disk_child(mount_point);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    if (WIFSIGNALED(status)) {
        FAIL("the full-disk child was killed by signal " << WTERMSIG(status) << " (" << ::strsignal(WTERMSIG(status))
                                                         << ")");
    }
    REQUIRE(WIFEXITED(status));
    if (WEXITSTATUS(status) == child_skipped) {
        WARN("full-disk test skipped: a tmpfs cannot be mounted in a private mount namespace here (not "
             "permitted, or the root is not a mount point; the child's reason is above)");
        return;
    }
    CHECK(WEXITSTATUS(status) == child_passed);
}

// ---- injected faults: produce -------------------------------------------------------------------

TEST_CASE("mmap disk: a failed segment preallocation fails produce with io_error and stores nothing", "[mmap][disk]")
{
    temporary_directory directory;
    queue_runner runner;
    runner->add_topic(string_topic(directory.path(), small_segment));
    runner->add_topic(string_topic(directory.path(), small_segment, "other"));
    fault_injector fault(file_operation::preallocate, "/events/", ENOSPC);
    auto producer = runner->producer<std::string>("events");
    REQUIRE(producer.try_produce(numbered_range(0, 13)));

    fault.arm();
    try {
        producer.try_produce(numbered(13));  // needs segment 1
        FAIL("produce succeeded without disk space");
    } catch (const bq::error& failure) {
        CHECK(failure.code() == errc::io_error);
    }
    CHECK(runner.produce("events", numbered(13)) == errc::io_error);
    CHECK(fault.injected() >= 2);
    CHECK(runner.drain("events", "g") == numbered_range(0, 13));
    CHECK(temporary_leftovers(directory.path()) == std::vector<std::string>{});

    // Other topics keep working.
    CHECK_FALSE(runner.produce("other", "unaffected"));
    CHECK(runner.drain("other", "g") == std::vector<std::string>{"unaffected"});

    fault.disarm();
    CHECK_FALSE(runner.produce("events", numbered(13)));
    CHECK(runner.drain("events", "g") == std::vector<std::string>{numbered(13)});
    CHECK(runner.drain("events", "g2") == numbered_range(0, 14));
    runner.reopen().add_topic(string_topic(directory.path(), small_segment));
    CHECK(runner.drain("events", "fresh") == numbered_range(0, 14));
}

TEST_CASE("mmap disk: a topic whose rollover failed reopens and reads while the disk is still full", "[mmap][disk]")
{
    temporary_directory directory;
    queue_runner runner;
    runner->add_topic(string_topic(directory.path(), small_segment));
    fault_injector fault(file_operation::preallocate, "/events/", ENOSPC);
    {
        auto producer = runner->producer<std::string>("events");
        REQUIRE(producer.try_produce(numbered_range(0, 13)));
        fault.arm();
        CHECK_THROWS_AS(producer.try_produce(numbered(13)), bq::error);
    }
    runner.reopen().add_topic(string_topic(directory.path(), small_segment));
    CHECK(runner.drain("events", "g") == numbered_range(0, 13));
    CHECK(runner.produce("events", numbered(13)) == errc::io_error);
    fault.disarm();
    CHECK_FALSE(runner.produce("events", numbered(13)));
    runner.reopen().add_topic(string_topic(directory.path(), small_segment));
    CHECK(runner.drain("events", "fresh") == numbered_range(0, 14));
}

TEST_CASE("mmap disk: a failed reservation inside a large segment fails produce and stores nothing", "[mmap][disk]")
{
    temporary_directory directory;
    queue_runner runner;
    constexpr std::uint64_t segment_size = 8 * 1024 * 1024;  // blocks are reserved 4 MiB at a time
    runner->add_topic(string_topic(directory.path(), segment_size));
    fault_injector fault(file_operation::preallocate, "/events/", ENOSPC);
    fault.arm();
    auto producer = runner->producer<std::string>("events");
    const auto record = [](std::size_t index) { return numbered(index) + std::string(100000 - 8, 'p'); };
    // (4 MiB - 40) / 100008 bytes per record: 41 records fit in the first reserved chunk.
    std::size_t acknowledged = 0;
    for (; acknowledged < 60; ++acknowledged) {
        try {
            producer.try_produce(record(acknowledged));
        } catch (const bq::error& failure) {
            CHECK(failure.code() == errc::io_error);
            break;
        }
    }
    CHECK(acknowledged == 41);
    auto consumer = runner->create_pull_consumer<std::string>({.topic = "events", .group = "g", .batch_size = 1000});
    const auto delivered = consumer.try_consume();
    REQUIRE(delivered);
    CHECK(delivered->size() == acknowledged);
    CHECK(delivered->back() == record(acknowledged - 1));

    fault.disarm();
    REQUIRE(producer.try_produce(record(acknowledged)));
    runner.reopen().add_topic(string_topic(directory.path(), segment_size));
    const auto all = runner.drain("events", "fresh");
    REQUIRE(all.size() == acknowledged + 1);
    for (std::size_t i = 0; i < all.size(); ++i) {
        CHECK(all[i] == record(i));
    }
}

TEST_CASE("mmap disk: a failed flush fails produce with io_error and keeps every acknowledged record", "[mmap][disk]")
{
    const int error_number = GENERATE(EIO, ENOSPC);
    temporary_directory directory;
    queue_runner runner;
    runner->add_topic(string_topic(directory.path(), 4096));
    fault_injector fault(file_operation::msync, "/events/", error_number);
    auto producer = runner->producer<std::string>("events");
    REQUIRE(producer.try_produce(numbered(0)));
    fault.arm();
    CHECK(runner.produce("events", numbered(1)) == errc::io_error);
    fault.disarm();
    CHECK_FALSE(runner.produce("events", numbered(2)));
    runner.reopen().add_topic(string_topic(directory.path(), 4096));
    const auto all = runner.drain("events", "g");
    // The failed call's record reached the page cache and may be stored (the producer was told it
    // failed, so at worst it is stored twice if retried); acknowledged records are all there, in order.
    const bool with_failed = all == std::vector<std::string>{numbered(0), numbered(1), numbered(2)};
    const bool without_failed = all == std::vector<std::string>{numbered(0), numbered(2)};
    CHECK((with_failed || without_failed));
}

TEST_CASE("mmap disk: a failed segment creation at open leaves nothing that blocks the next open", "[mmap][disk]")
{
    const file_operation operation =
        GENERATE(file_operation::preallocate, file_operation::fsync, file_operation::rename, file_operation::write);
    temporary_directory directory;
    {
        fault_injector fault(operation, ".log", ENOSPC);
        fault.arm();
        queue_runner runner;
        try {
            runner->add_topic(string_topic(directory.path(), 4096));
            FAIL("the topic opened");
        } catch (const bq::error& failure) {
            CHECK(failure.code() == errc::io_error);
        }
        CHECK(temporary_leftovers(directory.path()) == std::vector<std::string>{});
    }
    queue_runner runner;
    runner->add_topic(string_topic(directory.path(), 4096));
    CHECK_FALSE(runner.produce("events", "works"));
    CHECK(runner.drain("events", "g") == std::vector<std::string>{"works"});
}

TEST_CASE("mmap disk: a failed producer.offset hint does not fail a produce whose records are stored", "[mmap][disk]")
{
    temporary_directory directory;
    queue_runner runner;
    auto options = string_topic(directory.path(), small_segment);
    options.flush_batch_size = 2;
    runner->add_topic(options);
    auto producer = runner->producer<std::string>("events");
    const fs::path producer_offset = directory.path() / "events" / "partition-00000" / "producer.offset";
    auto consumer = runner->create_pull_consumer<std::string>({.topic = "events", .group = "g"});
    {
        fault_injector fault(file_operation::rename, producer_offset.string(), EIO);
        fault.arm();
        for (std::size_t i = 0; i < 20; ++i) {  // crosses a rollover
            CHECK_FALSE(runner.produce("events", numbered(i)));
        }
        // The rollover's hint (after record 13), then a retry at each of the 7 flushes after it.
        CHECK(fault.injected() >= 8);
        CHECK_FALSE(fs::exists(producer_offset));
        // A commit must persist producer.offset, so it reports the failure.
        REQUIRE(consumer.try_consume());
        CHECK(runner.commit(consumer) == errc::io_error);
    }
    CHECK_FALSE(runner.commit(consumer));
    CHECK(checkpoint(producer_offset) == small_segment + 40 + 7 * 16);
    runner.reopen().add_topic(options);
    CHECK(runner.drain("events", "fresh") == numbered_range(0, 20));
}

// ---- injected faults: commit and groups ---------------------------------------------------------

TEST_CASE("mmap disk: a failed checkpoint write fails commit with io_error and keeps the previous checkpoint",
          "[mmap][disk]")
{
    const file_operation operation =
        GENERATE(file_operation::write, file_operation::fsync, file_operation::rename, file_operation::open);
    temporary_directory directory;
    queue_runner runner;
    runner->add_topic(string_topic(directory.path(), 4096));
    runner->add_topic(string_topic(directory.path(), 4096, "other"));
    const fs::path offset_file = directory.path() / "events" / "partition-00000" / "offsets" / "g" / "consumer.offset";
    auto producer = runner->producer<std::string>("events");
    REQUIRE(producer.try_produce(numbered_range(0, 4)));
    auto consumer = runner->create_pull_consumer<std::string>({.topic = "events", .group = "g", .batch_size = 2});
    REQUIRE(consumer.try_consume());
    REQUIRE_FALSE(runner.commit(consumer));
    const std::uint64_t committed = checkpoint(offset_file);
    REQUIRE(committed == 40 + 2 * 16);

    const auto second = consumer.try_consume();
    REQUIRE(second);
    REQUIRE(std::vector<std::string>(second->begin(), second->end()) == numbered_range(2, 2));
    {
        fault_injector fault(operation, "/events/partition-00000/offsets/g/consumer.offset", EIO);
        fault.arm();
        CHECK(runner.commit(consumer) == errc::io_error);
        CHECK(fault.injected() == 1);
        CHECK(checkpoint(offset_file) == committed);
        CHECK(temporary_leftovers(directory.path()) == std::vector<std::string>{});
        // Other topics and groups keep working meanwhile.
        CHECK_FALSE(runner.produce("other", "unaffected"));
        CHECK(runner.drain("other", "g") == std::vector<std::string>{"unaffected"});
        CHECK(runner.drain("events", "h") == numbered_range(0, 4));
    }
    REQUIRE_FALSE(runner.commit(consumer));
    CHECK(checkpoint(offset_file) == 40 + 4 * 16);
    runner.reopen().add_topic(string_topic(directory.path(), 4096));
    CHECK(runner.drain("events", "g").empty());
}

TEST_CASE("mmap disk: a failed flush fails commit with io_error before the checkpoint moves", "[mmap][disk]")
{
    temporary_directory directory;
    queue_runner runner;
    auto options = string_topic(directory.path(), 4096);
    options.flush = bq::flush_strategy::batch;
    options.flush_batch_size = 1000;
    runner->add_topic(options);
    const fs::path folder = directory.path() / "events" / "partition-00000";
    auto producer = runner->producer<std::string>("events");
    REQUIRE(producer.try_produce(numbered_range(0, 3)));
    auto consumer = runner->create_pull_consumer<std::string>({.topic = "events", .group = "g"});
    REQUIRE(consumer.try_consume());
    {
        fault_injector fault(file_operation::msync, "/events/", EIO);
        fault.arm();
        CHECK(runner.commit(consumer) == errc::io_error);
        CHECK(checkpoint(folder / "offsets" / "g" / "consumer.offset") == 40);
        CHECK_FALSE(fs::exists(folder / "producer.offset"));
    }
    REQUIRE_FALSE(runner.commit(consumer));
    CHECK(checkpoint(folder / "offsets" / "g" / "consumer.offset") == 40 + 3 * 16);
    CHECK(checkpoint(folder / "producer.offset") >= 40 + 3 * 16);
}

TEST_CASE("mmap disk: an auto-commit that cannot persist its offset hands out nothing", "[mmap][disk]")
{
    temporary_directory directory;
    queue_runner runner;
    runner->add_topic(string_topic(directory.path(), 4096));
    auto producer = runner->producer<std::string>("events");
    REQUIRE(producer.try_produce(numbered_range(0, 3)));
    auto consumer = runner->create_pull_consumer<std::string>(
        {.topic = "events", .group = "auto", .auto_commit = true, .batch_size = 2});
    {
        fault_injector fault(file_operation::rename, "/offsets/auto/consumer.offset", EIO);
        fault.arm();
        try {
            consumer.try_consume();
            FAIL("a batch was handed out although its offset was not persisted");
        } catch (const bq::error& failure) {
            CHECK(failure.code() == errc::io_error);
        }
    }
    const auto delivered = consumer.try_consume();
    REQUIRE(delivered);
    CHECK(std::vector<std::string>(delivered->begin(), delivered->end()) == numbered_range(0, 2));
}

TEST_CASE("mmap disk: a failed group creation leaves nothing that blocks the next open", "[mmap][disk]")
{
    const file_operation operation =
        GENERATE(file_operation::rename, file_operation::fsync, file_operation::make_directory);
    temporary_directory directory;
    queue_runner runner;
    runner->add_topic(string_topic(directory.path(), 4096));
    REQUIRE_FALSE(runner.produce("events", "kept"));
    {
        fault_injector fault(operation, "/offsets/new", EIO);
        fault.arm();
        try {
            runner->create_pull_consumer<std::string>({.topic = "events", .group = "new"});
            FAIL("the group was created");
        } catch (const bq::error& failure) {
            CHECK(failure.code() == errc::io_error);
        }
    }
    // The next open removes what the failure left behind, and the group can be created.
    runner.reopen().add_topic(string_topic(directory.path(), 4096));
    CHECK(temporary_leftovers(directory.path()) == std::vector<std::string>{});
    CHECK(runner.drain("events", "new") == std::vector<std::string>{"kept"});
    {
        fault_injector fault(operation, "/offsets/again", EIO);
        fault.arm();
        CHECK_THROWS_AS(runner->create_pull_consumer<std::string>({.topic = "events", .group = "again"}), bq::error);
    }
    // The same process can create it once the fault is gone.
    CHECK(runner.drain("events", "again") == std::vector<std::string>{"kept"});
}

}  // namespace

}  // namespace mmap_disk_full_test
