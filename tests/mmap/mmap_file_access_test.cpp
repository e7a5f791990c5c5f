// Who may read and change a persistent topic's data (issue 51 item 4): the folders and files a topic
// creates are owner-only unless `mmap_topic_options::access` lets a group in, and a process-shared
// topic refuses a shared header that belongs to another user.
#include "bufferqueue/mmap/mmap_topic.hpp"

#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/file_hooks.hpp"
#include "bufferqueue/mmap/detail/shared_topic_header.hpp"
#include "bufferqueue/mmap/inspect/group_editor.hpp"

#include "catch.hpp"
#include "child_process.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace mmap_file_access_test {

namespace {

namespace bq = bufferqueue;
namespace fs = std::filesystem;
using bq::errc;
using bq::test::error_from;
using bq::test::missing_from;
using bq::test::queue_runner;
using bq::test::run_until;
using bq::test::string_bytes_serializer;
using bq::test::temporary_directory;
using namespace std::chrono_literals;

// Sets the process's umask while it lives (the tests run one at a time).
class scoped_umask {
public:
    explicit scoped_umask(mode_t mask) : previous_(::umask(mask)) {}
    ~scoped_umask() { ::umask(previous_); }
    scoped_umask(const scoped_umask&) = delete;
    scoped_umask& operator=(const scoped_umask&) = delete;

private:
    mode_t previous_;
};

// The permission bits of `path` (not following a symbolic link).
unsigned permissions_of(const fs::path& path)
{
    struct stat status {};
    REQUIRE(::lstat(path.c_str(), &status) == 0);
    return static_cast<unsigned>(status.st_mode & 07777);
}

std::string file_bytes(const fs::path& path)
{
    std::ifstream file(path, std::ios::binary);
    REQUIRE(file);
    return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

// The bytes of the shared header at `path` but for the words a queue that has the topic open changes
// while it runs (docs/mmap-format.md, "Shared header"): the wake-up sequence and its waiter count,
// which its watcher moves whenever it sleeps, and each partition slot's append lock. Zeroed, so that
// two reads compare what a refused open could have written.
std::string header_bytes_but_live_words(const fs::path& path)
{
    using layout = bq::detail::shared_header_layout;
    std::string bytes = file_bytes(path);
    REQUIRE(bytes.size() >= layout::header_size);
    std::fill_n(bytes.begin() + layout::wake_offset, bq::detail::shared_wakeups::storage_size, '\0');
    for (std::size_t slot = layout::header_size; slot + layout::slot_size <= bytes.size(); slot += layout::slot_size) {
        std::fill_n(bytes.begin() + static_cast<std::ptrdiff_t>(slot), 64, '\0');
    }
    return bytes;
}

std::string octal(unsigned mode)
{
    char text[8];
    std::snprintf(text, sizeof text, "%04o", mode);
    return text;
}

// Every folder and file under `root`, and `root` itself, whose permission bits are not
// `folder_mode` (folders) or `file_mode` (files), as "path: mode"; the relative paths of every file
// seen go to `seen`.
std::vector<std::string> wrong_modes(const fs::path& root, unsigned folder_mode, unsigned file_mode,
                                     std::set<std::string>& seen)
{
    std::vector<std::string> wrong;
    const auto check = [&](const fs::path& path, bool folder) {
        const unsigned mode = permissions_of(path);
        const unsigned expected = folder ? folder_mode : file_mode;
        if (mode != expected) {
            wrong.push_back(path.string() + ": " + octal(mode) + ", expected " + octal(expected));
        }
    };
    check(root, true);
    for (const fs::directory_entry& entry : fs::recursive_directory_iterator(root)) {
        check(entry.path(), entry.is_directory());
        if (!entry.is_directory()) {
            seen.insert(fs::relative(entry.path(), root).string());
        }
    }
    return wrong;
}

bq::mmap_topic_options<std::string> topic_options(const fs::path& data_directory, bool process_shared)
{
    return {.name = "events",
            .partitions = 2,
            .data_directory = data_directory,
            .segment_size = 4096,
            .max_retained_consumed_segments = 0,
            .flush = bq::flush_strategy::batch,
            .flush_batch_size = 10,
            .serializer = string_bytes_serializer{},
            .process_shared = process_shared};
}

// Produces `count` records "{source}-{n}" into a topic of `options` opened on `runner`, and consumes
// (committing) until `expected` records of group "g" came; how many came.
std::size_t produce_and_consume(queue_runner& runner, const bq::mmap_topic_options<std::string>& options,
                                const std::string& source, std::size_t count, std::size_t expected)
{
    runner->add_topic(options);
    auto consumer = runner->create_pull_consumer<std::string>(
        {.topic = "events", .group = "g", .auto_commit = false, .batch_size = 64});
    auto producer = runner->producer<std::string>("events");
    for (std::size_t number = 0; number < count; ++number) {
        if (!producer.try_produce(source + "-" + std::to_string(number))) {
            return 0;
        }
    }
    std::size_t consumed = 0;
    run_until(
        runner.io,
        [&] {
            while (auto delivered = consumer.try_consume()) {
                consumed += delivered->size();
                if (bq::test::commit_now(consumer, runner.io)) {
                    return true;
                }
            }
            return consumed >= expected;
        },
        10s);
    return consumed;
}

// Produces enough records to roll segments over, consumes and commits them all (retention then
// deletes segments and writes earliest.offset), so every kind of file a topic makes exists.
void fill_topic(queue_runner& runner, const bq::mmap_topic_options<std::string>& options)
{
    runner->add_topic(options);
    auto consumer = runner->create_pull_consumer<std::string>(
        {.topic = "events", .group = "g", .auto_commit = false, .batch_size = 64});
    auto producer = runner->producer<std::string>("events");
    constexpr std::size_t count = 400;
    for (std::size_t number = 0; number < count; ++number) {
        REQUIRE(producer.try_produce("record-" + std::to_string(number) + std::string(40, 'x')));
    }
    std::size_t consumed = 0;
    REQUIRE(run_until(
        runner.io,
        [&] {
            while (auto delivered = consumer.try_consume()) {
                consumed += delivered->size();
                REQUIRE_FALSE(bq::test::commit_now(consumer, runner.io));
            }
            return consumed == count;
        },
        10s));
}

// The files every topic of `topic_options` holds once `fill_topic` ran (relative to the data folder).
std::vector<std::string> expected_files(bool process_shared)
{
    std::vector<std::string> files = {
        "events/.lock",
        "events/partition-00000/producer.offset",
        "events/partition-00000/earliest.offset",
        "events/partition-00000/earliest.items",
        "events/partition-00000/flush.mark",
        "events/partition-00000/offsets/g/consumer.offset",
        "events/partition-00001/offsets/g/consumer.offset",
    };
    if (process_shared) {
        files.insert(files.end(), {"events/shared.header", "events/.open.lock", "events/groups/g/member-00000.lock",
                                   "events/groups/g/partition-00000.lease"});
    }
    return files;
}

void check_topic_modes(const fs::path& data_directory, bool process_shared, unsigned folder_mode, unsigned file_mode)
{
    std::set<std::string> seen;
    const std::vector<std::string> wrong = wrong_modes(data_directory, folder_mode, file_mode, seen);
    for (const std::string& each : wrong) {
        UNSCOPED_INFO(each);
    }
    CHECK(wrong.empty());
    for (const std::string& file : expected_files(process_shared)) {
        INFO(file);
        CHECK(seen.count(file) == 1);
    }
    bool segment = false;
    for (const std::string& file : seen) {
        segment = segment || file.ends_with(".log");
    }
    CHECK(segment);
}

TEST_CASE("file layer: what it creates gets the permissions of its file_access less the umask, what exists keeps "
          "its mode, and ownership_of reports both",
          "[file][file_access]")
{
    namespace detail = bq::detail;
    const scoped_umask mask(022);
    temporary_directory directory;
    struct expectation {
        bq::file_access access;
        unsigned folder;
        unsigned file;
    };
    // umask 022 takes group_write's write bit for the group.
    for (const expectation& each :
         {expectation{bq::file_access::owner, 0700, 0600}, expectation{bq::file_access::group_read, 0750, 0640},
          expectation{bq::file_access::group_write, 0750, 0640}}) {
        const std::string base = directory.file("access-" + std::to_string(static_cast<int>(each.access)));
        INFO(base);
        CHECK(detail::make_directories(base + "/a/b", each.access));
        for (const std::string& folder : {base, base + "/a", base + "/a/b"}) {
            CHECK(octal(permissions_of(folder)) == octal(each.folder));
        }
        const detail::unique_fd created =
            detail::open_file(base + "/created", detail::open_mode::create_new, each.access);
        REQUIRE(detail::try_lock_file(base + "/member.lock", each.access));
        const detail::directory_lock exclusive(base + "/a", each.access);
        const detail::shared_directory_lock shared(base + "/a/b", each.access);
        detail::write_checkpoint(base + "/consumer.offset", 40, each.access);
        detail::write_item_position(base + "/earliest.items", {.offset = 40, .items = 1}, each.access);
        for (const std::string& file :
             {base + "/created", base + "/member.lock", base + "/a/.lock", base + "/a/b/.lock",
              base + "/a/b/.open.lock", base + "/consumer.offset", base + "/earliest.items"}) {
            INFO(file);
            CHECK(octal(permissions_of(file)) == octal(each.file));
        }
        const detail::file_ownership owner = detail::ownership_of(created);
        CHECK(owner.user == detail::effective_user());
        CHECK(owner.user == ::geteuid());
        CHECK(owner.group == ::getegid());
        CHECK(octal(owner.permissions) == octal(each.file));
        CHECK(octal(detail::ownership_of(base + "/a").permissions) == octal(each.folder));
        CHECK(detail::access_granted_by(detail::ownership_of(base).permissions) ==
              (each.access == bq::file_access::owner ? bq::file_access::owner : bq::file_access::group_read));
    }
    CHECK(detail::access_granted_by(0770) == bq::file_access::group_write);
    CHECK(detail::access_granted_by(0707) == bq::file_access::owner);

    // An existing file or folder keeps its mode, whatever the access.
    const std::string existing = directory.file("existing");
    REQUIRE(::close(::open(existing.c_str(), O_CREAT | O_WRONLY, 0644)) == 0);
    REQUIRE(::chmod(existing.c_str(), 0644) == 0);
    detail::open_file(existing, detail::open_mode::create_or_open, bq::file_access::owner);
    CHECK(octal(permissions_of(existing)) == "0644");
    REQUIRE(::chmod(directory.string().c_str(), 0755) == 0);
    CHECK_FALSE(detail::make_directories(directory.string(), bq::file_access::owner));
    CHECK(octal(permissions_of(directory.path())) == "0755");

    // A failing fstat or stat is an I/O error naming the path.
    const detail::scoped_file_hooks hooks(
        {.before_operation =
             [](detail::file_operation operation, const std::string& path) {
                 return operation == detail::file_operation::status && path.ends_with("existing") ? EIO : 0;
             },
         .after_flush = {}});
    const detail::unique_fd file = detail::open_file(existing, detail::open_mode::read_only);
    for (const auto& failure :
         {error_from([&] { detail::ownership_of(file); }), error_from([&] { detail::ownership_of(existing); })}) {
        REQUIRE(failure);
        CHECK(failure->code() == errc::io_error);
        CHECK(missing_from(failure->what(), {existing, "owner"}).empty());
    }
}

TEST_CASE("mmap topic: with umask 022, a new topic's folders and files are readable by their owner only",
          "[mmap][file_access]")
{
    const bool process_shared = GENERATE(false, true);
    INFO("process_shared = " << process_shared);
    const scoped_umask mask(022);
    temporary_directory directory;
    const fs::path data_directory = directory.path() / "data";  // made by the topic too
    {
        queue_runner runner;
        fill_topic(runner, topic_options(data_directory, process_shared));
        check_topic_modes(data_directory, process_shared, 0700, 0600);
    }
    check_topic_modes(data_directory, process_shared, 0700, 0600);
}

TEST_CASE("mmap topic: file_access::group_read gives the group read access and file_access::group_write write "
          "access, never other users any",
          "[mmap][file_access]")
{
    const bool process_shared = GENERATE(false, true);
    INFO("process_shared = " << process_shared);
    temporary_directory directory;
    const fs::path data_directory = directory.path() / "data";
    auto options = topic_options(data_directory, process_shared);
    SECTION("group_read, umask 022: folders 0750, files 0640")
    {
        const scoped_umask mask(022);
        options.access = bq::file_access::group_read;
        queue_runner runner;
        fill_topic(runner, options);
        check_topic_modes(data_directory, process_shared, 0750, 0640);
    }
    SECTION("group_write, umask 007: folders 0770, files 0660")
    {
        const scoped_umask mask(007);
        options.access = bq::file_access::group_write;
        queue_runner runner;
        fill_topic(runner, options);
        check_topic_modes(data_directory, process_shared, 0770, 0660);
    }
    SECTION("group_write, umask 022: the umask still takes the group's write bit")
    {
        const scoped_umask mask(022);
        options.access = bq::file_access::group_write;
        queue_runner runner;
        fill_topic(runner, options);
        check_topic_modes(data_directory, process_shared, 0750, 0640);
    }
}

TEST_CASE("mmap topic: a topic folder that already exists keeps its mode, while what the topic creates in it is "
          "owner-only",
          "[mmap][file_access]")
{
    const scoped_umask mask(022);
    temporary_directory directory;
    const fs::path topic_folder = directory.path() / "events";
    fs::create_directory(topic_folder);
    fs::permissions(topic_folder, static_cast<fs::perms>(0755));
    queue_runner runner;
    fill_topic(runner, topic_options(directory.path(), false));
    CHECK(octal(permissions_of(topic_folder)) == "0755");
    CHECK(octal(permissions_of(topic_folder / "partition-00000")) == "0700");
    CHECK(octal(permissions_of(topic_folder / ".lock")) == "0600");
    CHECK(octal(permissions_of(topic_folder / "partition-00000" / "producer.offset")) == "0600");
}

TEST_CASE("bufferqueue-inspect reset-offsets keeps an owner-only topic's checkpoints owner-only",
          "[mmap][file_access][inspect]")
{
    const scoped_umask mask(022);
    temporary_directory directory;
    {
        queue_runner runner;
        fill_topic(runner, topic_options(directory.path(), false));
    }
    bq::inspect::execute_reset(directory.string(), "events", "g", bq::inspect::reset_target::earliest);
    const fs::path checkpoint = directory.path() / "events" / "partition-00000" / "offsets" / "g" / "consumer.offset";
    CHECK(octal(permissions_of(checkpoint)) == "0600");
}

TEST_CASE("bufferqueue-inspect reset-offsets gives the checkpoints it writes the group access of the topic folder",
          "[mmap][file_access][inspect]")
{
    const scoped_umask mask(022);
    temporary_directory directory;
    {
        queue_runner runner;
        auto options = topic_options(directory.path(), false);
        options.access = bq::file_access::group_read;
        fill_topic(runner, options);
    }
    bq::inspect::execute_reset(directory.string(), "events", "g", bq::inspect::reset_target::earliest);
    const fs::path checkpoint = directory.path() / "events" / "partition-00000" / "offsets" / "g" / "consumer.offset";
    CHECK(octal(permissions_of(checkpoint)) == "0640");
}

// True when this process may give files away (chown to another user).
bool can_chown()
{
    if (::geteuid() == 0) {
        return true;
    }
    WARN("skipped: giving shared.header to uid 65534 (chown) needs root; run the tests as root to cover it");
    return false;
}

void give_away(const fs::path& path)
{
    REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
}

TEST_CASE("process-shared mmap topic: a shared header that belongs to another user is refused, naming the file, "
          "its owner and the option that allows it",
          "[mmap][process_shared][file_access]")
{
    if (!can_chown()) {
        return;
    }
    temporary_directory directory;
    const fs::path header = directory.path() / "events" / "shared.header";
    const auto options_with = [&](bq::file_access access) {
        auto options = topic_options(directory.path(), true);
        options.access = access;
        return options;
    };
    // Refused with owner and group_read access, before anything in the header changed (but the
    // words that another queue with the topic open moves meanwhile: its watcher's waiter count
    // changed between two reads in 1 of 40 runs).
    const auto refused = [&] {
        const std::string before = header_bytes_but_live_words(header);
        for (const auto access : {bq::file_access::owner, bq::file_access::group_read}) {
            queue_runner runner;
            const auto failure = error_from([&] { runner->add_topic(options_with(access)); });
            REQUIRE(failure);
            CHECK(failure->code() == errc::invalid_argument);
            CHECK(missing_from(failure->what(), {header.string(), "65534", "'access'", "file_access::group_write"})
                      .empty());
        }
        CHECK(header_bytes_but_live_words(header) == before);
    };
    SECTION("when no other queue has the folder open")
    {
        {
            queue_runner first;
            first->add_topic(topic_options(directory.path(), true));
        }
        give_away(header);
        refused();
        queue_runner runner;
        CHECK_NOTHROW(runner->add_topic(options_with(bq::file_access::group_write)));
    }
    SECTION("while another queue has it open")
    {
        queue_runner first;
        first->add_topic(topic_options(directory.path(), true));
        give_away(header);
        refused();
        queue_runner runner;
        CHECK_NOTHROW(runner->add_topic(options_with(bq::file_access::group_write)));
    }
}

TEST_CASE("process-shared mmap topic with file_access::group_write: a process of another user of the folder's group "
          "reads and appends to the topic",
          "[mmap][process_shared][file_access]")
{
    if (!can_chown()) {
        return;
    }
    constexpr unsigned other_user = 65534;  // nobody, in group 65534 (nogroup) here
    const scoped_umask mask(007);
    temporary_directory directory;
    fs::permissions(directory.path(), static_cast<fs::perms>(0711));  // the other user passes through
    const fs::path data_directory = directory.path() / "data";
    fs::create_directory(data_directory);
    REQUIRE(::chown(data_directory.c_str(), 0, other_user) == 0);
    REQUIRE(::chmod(data_directory.c_str(), 02770) == 0);  // what is made in it gets the group
    auto options = topic_options(data_directory, true);
    options.access = bq::file_access::group_write;
    options.max_retained_consumed_segments.reset();  // group "h" below reads from the start
    {
        queue_runner runner;
        CHECK(produce_and_consume(runner, options, "root", 100, 100) == 100);
    }
    // Before any thread of this test runs: the child drops root and opens the folder first (it
    // recovers it, writing into this user's files through the group), reads what was produced
    // after the group's commit (nothing) and appends.
    bq::test::child_process other([&] {
        if (::setgroups(0, nullptr) != 0 || ::setgid(other_user) != 0 || ::setuid(other_user) != 0 ||
            ::geteuid() != other_user) {
            return 10;
        }
        queue_runner runner;
        return produce_and_consume(runner, options, "nobody", 50, 50) == 50 ? 0 : 11;
    });
    REQUIRE(other.wait() == 0);
    struct stat status {};
    REQUIRE(::stat((data_directory / "events" / "shared.header").c_str(), &status) == 0);
    CHECK(status.st_uid == 0U);  // still this user's: the other one reused it
    queue_runner runner;
    runner->add_topic(options);
    auto consumer = runner->create_pull_consumer<std::string>(
        {.topic = "events", .group = "h", .auto_commit = false, .batch_size = 500});
    std::set<std::string> items;
    run_until(
        runner.io,
        [&] {
            while (auto delivered = consumer.try_consume()) {
                items.insert(delivered->begin(), delivered->end());
                REQUIRE_FALSE(bq::test::commit_now(consumer, runner.io));
            }
            return items.size() >= 150;
        },
        10s);
    CHECK(items.size() == 150);
    CHECK(items.count("nobody-49") == 1);
    CHECK(items.count("root-0") == 1);
}

}  // namespace

}  // namespace mmap_file_access_test
