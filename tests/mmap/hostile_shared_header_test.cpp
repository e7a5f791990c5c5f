// A damaged or hostile shared header of a process-shared topic (issue 51, item 5): every value a
// process reads from `{topic}/shared.header` that another process wrote is checked before it is
// used - an error naming the file, the field and its value, never a crash, a hang past the
// documented bound or a write outside the folder.
#include "bufferqueue/mmap/mmap_topic.hpp"

#include "bufferqueue/detail/type_name.hpp"
#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/mmap_segment_file.hpp"
#include "bufferqueue/mmap/detail/segment_format.hpp"
#include "bufferqueue/mmap/detail/shared_append.hpp"
#include "bufferqueue/mmap/detail/shared_topic_header.hpp"
#include "bufferqueue/mmap/inspect/folder_verifier.hpp"

#include "bufferqueue/buffer_queue.hpp"

#include "catch.hpp"
#include "child_process.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace hostile_shared_header_test {

namespace {

namespace bq = bufferqueue;
namespace detail = bufferqueue::detail;
using bq::errc;
using bq::test::child_process;
using bq::test::error_from;
using bq::test::missing_from;
using bq::test::queue_runner;
using bq::test::signal_pipe;
using bq::test::string_bytes_serializer;
using bq::test::temporary_directory;
using namespace std::chrono_literals;

// The first of `expected` that `text` does not contain, or "".
std::string missing_any(std::string_view text, const std::vector<std::string>& expected)
{
    for (const std::string& each : expected) {
        if (const std::string missing = missing_from(text, {each}); !missing.empty()) {
            return missing;
        }
    }
    return "";
}

detail::shared_topic_options orders_options()
{
    return {.partitions = 3,
            .segment_size = 4096,
            .max_retained_consumed_segments = 2,
            .serializer_name = "bufferqueue::json_serializer<order>"};
}

// Writes `bytes` at `offset` of the file at `path` (the rest stays).
void patch(const std::string& path, std::size_t offset, const std::vector<char>& bytes)
{
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(offset));
    file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <class Integer>
std::vector<char> bytes_of(Integer value)
{
    std::vector<char> bytes(sizeof value);
    std::memcpy(bytes.data(), &value, sizeof value);
    return bytes;
}

// A damage to a freshly made header of orders_options(), and what the refusal must say.
struct damage {
    const char* what;
    std::function<void(const std::string& path)> apply;
    std::vector<std::string> named;  // besides the file's path
};

std::vector<damage> header_damages()
{
    constexpr std::size_t slot_1 = 256 + 256;
    return {
        {"random bytes in place of the magic",
         [](const std::string& path) {
             patch(path, 0, {'\x13', '\x37', 'x'});
         },
         {"magic", "13 37 78"}},
        {"a wrong version",
         [](const std::string& path) { patch(path, 8, bytes_of<std::uint32_t>(3)); },
         {"format version is 3"}},
        {"a state word that never became 1",
         [](const std::string& path) { patch(path, 12, bytes_of<std::uint32_t>(0)); },
         {"state is 0"}},
        {"a wrong header size",
         [](const std::string& path) { patch(path, 16, bytes_of<std::uint32_t>(512)); },
         {"header size is 512"}},
        {"a wrong slot size",
         [](const std::string& path) { patch(path, 20, bytes_of<std::uint32_t>(64)); },
         {"partition slot size is 64"}},
        {"no partitions",
         [](const std::string& path) { patch(path, 24, bytes_of<std::uint64_t>(0)); },
         {"partition count is 0"}},
        {"more partitions than the file holds slots for",
         [](const std::string& path) { patch(path, 24, bytes_of<std::uint64_t>(std::uint64_t{1} << 62)); },
         {"partition count is 4611686018427387904", "hold 3 partition slots"}},
        {"an impossible segment size",
         [](const std::string& path) { patch(path, 32, bytes_of<std::uint64_t>(7)); },
         {"segment size is 7"}},
        {"a serializer name longer than its field",
         [](const std::string& path) { patch(path, 60, bytes_of<std::uint32_t>(100000)); },
         {"serializer name length is 100000"}},
        {"bytes after the serializer name",
         [](const std::string& path) { patch(path, 250, {'!'}); },
         {"byte 250 is 33"}},
        {"an append lock that is no robust process-shared mutex",
         [](const std::string& path) { patch(path, slot_1 + 16, bytes_of<std::int32_t>(0x7fff)); },
         {"append lock of partition 1", "kind is 32767"}},
        {"bytes after an append lock's mutex",
         [](const std::string& path) { patch(path, slot_1 + 60, {'\x01'}); },
         {"append lock of partition 1", "byte 60"}},
        {"bytes in a slot's reserved part",
         [](const std::string& path) { patch(path, slot_1 + 250, {'\x01'}); },
         {"byte 250 of the slot of partition 1"}},
        {"a file cut short of its slots",
         [](const std::string& path) { std::filesystem::resize_file(path, 256 + 256 + 100); },
         {"partition count is 3", "hold 1 partition slots"}},
    };
}

bq::mmap_topic_options<std::string> shared_topic(const std::filesystem::path& directory)
{
    return {.name = "events",
            .partitions = 1,
            .data_directory = directory,
            .segment_size = 4096,
            .flush = bq::flush_strategy::batch,
            .serializer = string_bytes_serializer{},
            .process_shared = true};
}

// The shared header of shared_topic(directory), mapped as a later opener maps it.
detail::shared_topic_header map_events_header(const std::filesystem::path& directory)
{
    return {"events",
            (directory / "events").string(),
            {.partitions = 1,
             .segment_size = 4096,
             .max_retained_consumed_segments = std::nullopt,
             .serializer_name = std::string(detail::type_name<string_bytes_serializer>())},
            false};
}

// Stores partition 0's shared log state as a writer does, under its append lock (the holder's
// writer may hold it to adopt the state).
void store_under_lock(const detail::shared_topic_header& header, const detail::shared_log_state& state,
                      detail::log_position retained)
{
    auto lock = header.append_lock(0);
    lock.lock();
    detail::shared_log_slot slot = header.log_slot(0);
    slot.store(state);
    slot.store_retained_from(retained);
    lock.unlock();
}

// A change to partition 0's shared log state (and its retained-from position), and what the
// refusal must name.
struct slot_damage {
    const char* what;
    std::function<void(detail::shared_log_state& state, detail::log_position& retained)> apply;
    std::vector<std::string> named;
};

std::vector<slot_damage> slot_damages()
{
    using state_t = detail::shared_log_state;
    using position_t = detail::log_position;
    return {
        {"a tail position past the segment's end",
         [](state_t& state, position_t&) { state.tail_position = 5000; },
         {"tail position is 5000"}},
        {"a tail position inside the segment header",
         [](state_t& state, position_t&) { state.tail_position = 8; },
         {"tail position is 8"}},
        {"a tail position with no room for a segment-end marker",
         [](state_t& state, position_t&) { state.tail_position = 4096; },
         {"tail position is 4096"}},
        {"a tail segment whose offsets overflow",
         [](state_t& state, position_t&) { state.tail_segment = std::numeric_limits<std::uint64_t>::max(); },
         {"tail segment index is 18446744073709551615"}},
        {"a segment-end flag that is neither 0 nor 1",
         [](state_t& state, position_t&) { state.tail_ended = 2; },
         {"segment-end flag is 2"}},
        {"a pending end past the segment's end",
         [](state_t& state, position_t&) { state.pending_end = 1 << 20; },
         {"pending end is 1048576"}},
        {"a pending end before the tail position",
         [](state_t& state, position_t&) { state.pending_end = 40; },
         {"pending end is 40"}},
        {"more records in the tail than appended",
         [](state_t& state, position_t&) { state.tail_first_item = state.items + 1; },
         {"first item is 4"}},
        {"a published end past the tail",
         [](state_t& state, position_t&) { state.published_end = 1 << 30; },
         {"published end is 1073741824"}},
        {"more records published than appended",
         [](state_t& state, position_t&) { state.published_items = state.items + 5; },
         {"records before the published end is 8"}},
        {"a flushed end past the tail segment",
         [](state_t& state, position_t&) { state.flushed_end = 8192; },
         {"flushed end is 8192"}},
        {"a retained-from offset past the tail",
         [](state_t&, position_t& retained) { retained.offset = 1 << 30; },
         {"retained-from offset is 1073741824"}},
    };
}
}  // namespace

TEST_CASE("a shared header with a damaged field is refused as corrupt data naming the file, the field and its value",
          "[mmap][shared]")
{
    for (const damage& each : header_damages()) {
        INFO(each.what);
        const temporary_directory folder;
        const std::string path = folder.file("shared.header");
        {
            const detail::shared_topic_header made("orders", folder.string(), orders_options(), true);
        }
        each.apply(path);
        const auto started = std::chrono::steady_clock::now();
        const auto refused =
            error_from([&] { detail::shared_topic_header("orders", folder.string(), orders_options(), false); });
        CHECK(std::chrono::steady_clock::now() - started < 1s);  // a state that is not 1 is not waited for
        REQUIRE(refused);
        CHECK(refused->code() == errc::corrupt_data);
        std::vector<std::string> named = each.named;
        named.push_back(path);
        CHECK(missing_any(refused->what(), named) == "");
    }
}

TEST_CASE("a shared header of random bytes, or with random bytes in its partition slots, is refused as corrupt "
          "data naming the file",
          "[mmap][shared]")
{
    std::mt19937_64 random(51);
    for (int round = 0; round < 200; ++round) {
        INFO("round " << round);
        const temporary_directory folder;
        const std::string path = folder.file("shared.header");
        const bool valid_header = round % 2 == 1;
        if (valid_header) {
            const detail::shared_topic_header made("orders", folder.string(), orders_options(), true);
        }
        std::vector<char> bytes(valid_header ? 3 * 256 : 64 + random() % 2048);
        for (char& byte : bytes) {
            byte = static_cast<char>(random());
        }
        if (valid_header) {
            // From some byte of slot 0 on: at least the append locks of partitions 1 and 2 are random.
            patch(path, 256 + static_cast<std::size_t>(random() % 256), bytes);
        } else {
            std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        }
        const auto refused =
            error_from([&] { detail::shared_topic_header("orders", folder.string(), orders_options(), false); });
        REQUIRE(refused);
        CHECK(refused->code() == errc::corrupt_data);
        CHECK(missing_from(refused->what(), {path}) == "");
    }
}

TEST_CASE("an append lock held by a live process that never lets go fails the wait after its bound, naming the file "
          "and the partition",
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
    // The waiter is a process of its own: a wait without a bound fails the test instead of hanging it.
    const signal_pipe result;
    child_process waiter([&] {
        auto lock = header.append_lock(1);
        const auto started = std::chrono::steady_clock::now();
        const auto refused = error_from([&] { lock.lock(300ms); });
        const auto waited = std::chrono::steady_clock::now() - started;
        const bool named = refused && refused->code() == errc::timed_out &&
                           missing_from(refused->what(), {header.path(), "partition 1", "300 ms"}).empty();
        result.send(named && waited >= 300ms && waited < 3s ? 'y' : 'n');
        return 0;
    });
    const std::optional<char> answer = result.receive_within(10s);
    REQUIRE(answer.has_value());  // no answer: the wait had no bound
    CHECK(*answer == 'y');
    CHECK(waiter.wait() == 0);
    holder.kill(SIGKILL);
    CHECK(holder.wait() == 128 + SIGKILL);
    // The holder died: the lock passes on, within the bound.
    auto lock = header.append_lock(1);
    CHECK(lock.lock(5s));
    lock.unlock();
}

TEST_CASE("a queue opening a process-shared topic whose shared log state no writer stores is refused as corrupt "
          "data naming the file, the partition, the field and its value",
          "[mmap][process_shared]")
{
    temporary_directory directory;
    const signal_pipe ready;
    const signal_pipe stop;
    // Another process holds the folder (forked before this one starts threads): the queues below are
    // later openers, which adopt the slot's state instead of recovering it.
    child_process holder([&] {
        queue_runner runner;
        runner->add_topic(shared_topic(directory.path()));
        auto producer = runner->producer<std::string>("events");
        for (const char* item : {"a", "b", "c"}) {
            if (!producer.try_produce(item)) {
                return 1;
            }
        }
        ready.send();
        stop.receive();
        return 0;
    });
    REQUIRE(ready.receive());
    const detail::shared_topic_header header = map_events_header(directory.path());
    detail::shared_log_slot slot = header.log_slot(0);
    const detail::shared_log_state intact = slot.load();
    const detail::log_position intact_retained = slot.retained_from();
    REQUIRE(intact.items == 3);
    for (const slot_damage& each : slot_damages()) {
        INFO(each.what);
        detail::shared_log_state state = intact;
        detail::log_position retained = intact_retained;
        each.apply(state, retained);
        store_under_lock(header, state, retained);
        {
            queue_runner opener;
            const auto refused = error_from([&] {
                opener->add_topic(shared_topic(directory.path()));
                // Reached only when the open took the state: an append would write where it says.
                auto producer = opener->producer<std::string>("events");
                (void)producer.try_produce("d");
            });
            REQUIRE(refused);
            CHECK(refused->code() == errc::corrupt_data);
            std::vector<std::string> named = each.named;
            named.insert(named.end(), {header.path(), "partition 0"});
            CHECK(missing_any(refused->what(), named) == "");
        }
        store_under_lock(header, intact, intact_retained);
    }
    // Intact again: a later opener appends and the holder's records are there.
    {
        queue_runner opener;
        opener->add_topic(shared_topic(directory.path()));
        auto producer = opener->producer<std::string>("events");
        CHECK(producer.try_produce("d"));
    }
    CHECK(slot.load().items == 4);
    stop.send();
    CHECK(holder.wait() == 0);
}

TEST_CASE("the repair after a writer died holding the append lock refuses a slot no writer stores and changes no "
          "file",
          "[mmap][shared]")
{
    const temporary_directory folder;
    const std::string partition_folder = folder.file("partition-00000");
    std::filesystem::create_directories(partition_folder);
    const detail::mmap_partition_files files{
        .description = "topic 'orders' partition 0", .folder = partition_folder, .segment_size = 4096};
    const auto first = detail::create_mmap_segment(files, 0, 4096, 0);
    const auto second = detail::create_mmap_segment(files, 1, 4096, 0);
    const std::vector<std::byte> first_header(first->region.bytes().begin(),
                                              first->region.bytes().begin() + detail::segment_header_size);
    auto options = orders_options();
    options.partitions = 1;
    const detail::shared_topic_header header("orders", folder.string(), options, true);
    detail::shared_log_slot slot = header.log_slot(0);

    struct repair_case {
        const char* what;
        detail::shared_log_state state;
        const char* named;
    };
    const std::vector<repair_case> cases = {
        // Its successor, segment 0 after the index wraps, would be removed as a rollover's leftover.
        {"a tail segment whose successor's index wraps to 0",
         {.tail_segment = std::numeric_limits<std::uint64_t>::max(), .tail_position = 40, .pending_end = 40},
         "tail segment index is 18446744073709551615"},
        // The bytes between it and the pending end would be zeroed: the segment's header.
        {"a tail position inside the segment header",
         {.tail_segment = 1, .tail_position = 0, .pending_end = 40},
         "tail position is 0"},
    };
    for (const repair_case& each : cases) {
        INFO(each.what);
        slot.store(each.state);
        const auto refused = error_from([&] { detail::repair_shared_tail(files, slot, header.path()); });
        REQUIRE(refused);
        CHECK(refused->code() == errc::corrupt_data);
        CHECK(missing_from(refused->what(), {header.path(), "partition 0", each.named}) == "");
        CHECK(std::filesystem::exists(files.segment_path(0)));
        CHECK(std::filesystem::exists(files.segment_path(1)));
        const auto reopened = detail::open_mmap_segment(files, 1, detail::map_access::read_only);
        CHECK(detail::validate_segment_header(reopened->region.bytes(), 1, 4096) == std::nullopt);
    }
    CHECK(std::equal(first_header.begin(), first_header.end(), first->region.bytes().begin()));
}

TEST_CASE("a tail position past the segment's end, read without the lock, is no written end", "[mmap][shared]")
{
    const temporary_directory folder;
    const detail::shared_topic_header header("orders", folder.string(), orders_options(), true);
    detail::shared_log_slot slot = header.log_slot(0);
    slot.store({.tail_segment = 2, .tail_position = 1000});
    CHECK(slot.written_end_in(2, 4096) == 2 * 4096 + 1000);
    slot.store({.tail_segment = 2, .tail_position = std::uint64_t{1} << 40});
    CHECK(slot.written_end_in(2, 4096) == std::nullopt);
}

TEST_CASE("inspect: verify reports a damaged shared header of a process-shared topic by file, field and value",
          "[inspect][mmap][process_shared]")
{
    temporary_directory directory;
    {
        queue_runner runner;
        runner->add_topic(shared_topic(directory.path()));
        auto producer = runner->producer<std::string>("events");
        REQUIRE(producer.try_produce("a"));
    }
    CHECK(bq::inspect::verify_data_folder(directory.string()).intact());
    const std::string path = (directory.path() / "events" / "shared.header").string();
    patch(path, 8, bytes_of<std::uint32_t>(7));
    const bq::inspect::verify_report report = bq::inspect::verify_data_folder(directory.string());
    REQUIRE(report.problems.size() == 1);
    CHECK(report.problems[0].file == path);
    CHECK(missing_from(report.problems[0].text, {"format version is 7"}) == "");
    // Random bytes, a file of none, one cut short: each reported, none crashes the check.
    for (const std::size_t size : {std::size_t{0}, std::size_t{100}, std::size_t{700}}) {
        INFO(size << " random bytes");
        std::vector<char> bytes(size, '\xa5');
        std::ofstream(path, std::ios::binary | std::ios::trunc)
            .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        const bq::inspect::verify_report random = bq::inspect::verify_data_folder(directory.string());
        REQUIRE(random.problems.size() == 1);
        CHECK(random.problems[0].file == path);
    }
}

}  // namespace hostile_shared_header_test
