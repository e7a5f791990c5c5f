#include "bufferqueue/mmap/detail/file.hpp"

#include "catch.hpp"
#include "test_support.hpp"

#include "bufferqueue/error.hpp"
#include "bufferqueue/mmap/detail/crc32c.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace file_test {

namespace {

using bufferqueue::test::error_from;
using bufferqueue::test::missing_from;
using bufferqueue::test::temporary_directory;

namespace detail = bufferqueue::detail;
using bufferqueue::errc;

void write_raw_file(const std::string& path, const std::vector<unsigned char>& bytes)
{
    std::ofstream stream(path, std::ios::binary | std::ios::trunc);
    stream.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<unsigned char> read_raw_file(const std::string& path)
{
    std::ifstream stream(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(stream), std::istreambuf_iterator<char>()};
}

std::span<const std::byte> as_bytes(std::string_view text)
{
    return std::as_bytes(std::span<const char>(text.data(), text.size()));
}

// Hooks that inject `error_number` into every `operation` on a path containing `path_part`.
detail::file_hooks inject(detail::file_operation operation, const std::string& path_part, int error_number)
{
    detail::file_hooks hooks;
    hooks.before_operation = [=](detail::file_operation seen, const std::string& path) {
        return seen == operation && path.find(path_part) != std::string::npos ? error_number : 0;
    };
    return hooks;
}

struct flushed_range {
    detail::file_operation operation;
    std::string path;
    std::uint64_t offset;
    std::uint64_t length;
};

// Records what the after_flush hook reports.
class flush_recorder {
public:
    detail::file_hooks hooks()
    {
        detail::file_hooks hooks;
        hooks.after_flush = [this](detail::file_operation operation, const std::string& path, std::uint64_t offset,
                                   std::uint64_t length) {
            const std::lock_guard lock(mutex_);
            ranges_.push_back({operation, path, offset, length});
        };
        return hooks;
    }

    std::vector<flushed_range> ranges()
    {
        const std::lock_guard lock(mutex_);
        return ranges_;
    }

private:
    std::mutex mutex_;
    std::vector<flushed_range> ranges_;
};

bool descriptor_is_open(int descriptor)
{
    return ::fcntl(descriptor, F_GETFD) != -1;
}

}  // namespace

// ---- opening, sizing, reading and writing ---------------------------------------------------

TEST_CASE("file: opening a missing file names the path and the OS error", "[file]")
{
    const temporary_directory directory;
    const std::string path = directory.file("missing.log");
    const auto failure = error_from([&] { detail::open_file(path, detail::open_mode::read_write); });
    REQUIRE(failure);
    CHECK(failure->code() == errc::io_error);
    CHECK(missing_from(failure->what(), {path, "No such file or directory"}) == "");
    CHECK_FALSE(detail::try_open_file(path, detail::open_mode::read_only).has_value());
}

TEST_CASE("file: create_new refuses an existing file and create_or_truncate empties it", "[file]")
{
    const temporary_directory directory;
    const std::string path = directory.file("data");
    write_raw_file(path, {1, 2, 3});
    const auto failure = error_from([&] { detail::open_file(path, detail::open_mode::create_new); });
    REQUIRE(failure);
    CHECK(missing_from(failure->what(), {path, "File exists"}) == "");
    const detail::unique_fd file = detail::open_file(path, detail::open_mode::create_or_truncate);
    CHECK(detail::file_size(file) == 0);
}

TEST_CASE("file: unique_fd closes its descriptor when destroyed and hands it over when moved", "[file]")
{
    const temporary_directory directory;
    int descriptor = -1;
    {
        detail::unique_fd first = detail::open_file(directory.file("a"), detail::open_mode::create_or_open);
        descriptor = first.get();
        REQUIRE(descriptor_is_open(descriptor));
        detail::unique_fd second = std::move(first);
        CHECK_FALSE(first);
        CHECK(second.get() == descriptor);
        CHECK(second.path() == directory.file("a"));
        CHECK(descriptor_is_open(descriptor));
    }
    CHECK_FALSE(descriptor_is_open(descriptor));

    detail::unique_fd closed_early = detail::open_file(directory.file("b"), detail::open_mode::create_or_open);
    descriptor = closed_early.get();
    closed_early.close();
    CHECK_FALSE(closed_early);
    CHECK_FALSE(descriptor_is_open(descriptor));
}

TEST_CASE("file: truncate_file and preallocate set the size that file_size reports", "[file]")
{
    const temporary_directory directory;
    const detail::unique_fd file = detail::open_file(directory.file("segment"), detail::open_mode::create_new);
    CHECK(detail::file_size(file) == 0);
    detail::truncate_file(file, 8192);
    CHECK(detail::file_size(file) == 8192);
    detail::preallocate(file, 0, 4096);
    CHECK(detail::file_size(file) == 8192);
    detail::preallocate(file, 8192, 4096);
    CHECK(detail::file_size(file) == 12288);
    detail::preallocate(file, 20000, 0);
    CHECK(detail::file_size(file) == 12288);
    detail::truncate_file(file, 100);
    CHECK(detail::file_size(file) == 100);
}

TEST_CASE("file: write_at and read_at round-trip bytes and read_at stops at the end of the file", "[file]")
{
    const temporary_directory directory;
    const detail::unique_fd file = detail::open_file(directory.file("data"), detail::open_mode::create_new);
    detail::write_at(file, 3, as_bytes("hello"));
    std::array<std::byte, 16> buffer{};
    REQUIRE(detail::read_at(file, 0, buffer) == 8);
    CHECK(buffer[0] == std::byte{0});
    CHECK(buffer[3] == std::byte{'h'});
    CHECK(buffer[7] == std::byte{'o'});
    CHECK(detail::read_at(file, 100, buffer) == 0);
}

// ---- mapping and flushing -------------------------------------------------------------------

TEST_CASE("file: a mapped region writes through to the file", "[file]")
{
    const temporary_directory directory;
    const std::string path = directory.file("segment");
    detail::unique_fd file = detail::open_file(path, detail::open_mode::create_new);
    detail::truncate_file(file, 3 * detail::page_size());
    detail::mapped_region region = detail::map_file(file, 3 * detail::page_size());
    file.close();  // the mapping outlives the descriptor
    REQUIRE(region.size() == 3 * detail::page_size());
    CHECK(region.path() == path);
    region.bytes()[detail::page_size() + 1] = std::byte{0x5A};
    region.flush(detail::page_size(), 2);

    detail::mapped_region moved = std::move(region);
    CHECK(region.data() == nullptr);
    CHECK(moved.bytes()[detail::page_size() + 1] == std::byte{0x5A});
    moved.unmap();
    CHECK(moved.size() == 0);

    const std::vector<unsigned char> contents = read_raw_file(path);
    REQUIRE(contents.size() == 3 * detail::page_size());
    CHECK(contents[detail::page_size() + 1] == 0x5A);
}

TEST_CASE("file: a read-only mapping reads a file opened read-only", "[file]")
{
    const temporary_directory directory;
    const std::string path = directory.file("segment");
    {
        detail::unique_fd file = detail::open_file(path, detail::open_mode::create_new);
        const std::vector<std::byte> bytes(64, std::byte{0x33});
        detail::write_at(file, 0, bytes);
    }
    const detail::unique_fd file = detail::open_file(path, detail::open_mode::read_only);
    // A read-write mapping of a descriptor opened read-only is refused by the OS (EACCES).
    const auto writable = error_from([&] { detail::map_file(file, 64); });
    REQUIRE(writable);
    CHECK(writable->code() == errc::io_error);
    const detail::mapped_region region = detail::map_file(file, 64, detail::map_access::read_only);
    REQUIRE(region.size() == 64);
    CHECK(region.bytes()[63] == std::byte{0x33});
}

TEST_CASE("file: map_file rejects a zero length and flush rejects a range outside the mapping", "[file]")
{
    const temporary_directory directory;
    const detail::unique_fd file = detail::open_file(directory.file("segment"), detail::open_mode::create_new);
    detail::truncate_file(file, 4096);
    const auto zero = error_from([&] { detail::map_file(file, 0); });
    REQUIRE(zero);
    CHECK(zero->code() == errc::invalid_argument);

    const detail::mapped_region region = detail::map_file(file, 4096);
    const auto outside = error_from([&] { region.flush(4000, 97); });
    REQUIRE(outside);
    CHECK(outside->code() == errc::invalid_argument);
    CHECK(missing_from(outside->what(), {file.path()}) == "");
    CHECK_NOTHROW(region.flush(4000, 96));
    CHECK_NOTHROW(region.flush(4096, 0));
}

TEST_CASE("file: the flush hook reports the page-aligned ranges msync and fsync made durable", "[file]")
{
    const temporary_directory directory;
    const std::string path = directory.file("segment");
    const std::size_t page = detail::page_size();
    const detail::unique_fd file = detail::open_file(path, detail::open_mode::create_new);
    detail::truncate_file(file, 4 * page);
    const detail::mapped_region region = detail::map_file(file, 4 * page);

    flush_recorder recorder;
    {
        const detail::scoped_file_hooks hooks(recorder.hooks());
        region.flush(page + 10, 20);     // inside one page
        region.flush(2 * page - 8, 16);  // straddles a page boundary
        region.flush(0, 0);              // nothing to flush: no msync
        detail::fsync_file(file);
        detail::fsync_directory(directory.string());
    }
    region.flush(0, 8);  // hooks removed: not recorded

    const std::vector<flushed_range> ranges = recorder.ranges();
    REQUIRE(ranges.size() == 4);
    CHECK(ranges[0].operation == detail::file_operation::msync);
    CHECK(ranges[0].path == path);
    CHECK(ranges[0].offset == page);
    CHECK(ranges[0].length == 30);
    CHECK(ranges[1].offset == page);
    CHECK(ranges[1].length == page + 8);
    CHECK(ranges[2].operation == detail::file_operation::fsync);
    CHECK(ranges[2].offset == 0);
    CHECK(ranges[2].length == 4 * page);
    CHECK(ranges[3].operation == detail::file_operation::fsync_directory);
    CHECK(ranges[3].path == directory.string());
}

// ---- fault injection ------------------------------------------------------------------------

TEST_CASE("file: injected EIO on fsync fails with io_error naming the file", "[file][fault]")
{
    const temporary_directory directory;
    const detail::unique_fd file = detail::open_file(directory.file("producer.offset"), detail::open_mode::create_new);
    const detail::scoped_file_hooks hooks(inject(detail::file_operation::fsync, "producer.offset", EIO));
    const auto failure = error_from([&] { detail::fsync_file(file); });
    REQUIRE(failure);
    CHECK(failure->code() == errc::io_error);
    CHECK(missing_from(failure->what(), {"fsync", file.path(), "Input/output error"}) == "");
}

TEST_CASE("file: injected ENOSPC on preallocate says the disk is full", "[file][fault]")
{
    const temporary_directory directory;
    const detail::unique_fd file =
        detail::open_file(directory.file("00000000000000000000.log"), detail::open_mode::create_new);
    const detail::scoped_file_hooks hooks(inject(detail::file_operation::preallocate, ".log", ENOSPC));
    const auto failure = error_from([&] { detail::preallocate(file, 4096, 8192); });
    REQUIRE(failure);
    CHECK(failure->code() == errc::io_error);
    CHECK(missing_from(failure->what(), {file.path(), "disk is full", "offset 4096", "8192 bytes"}) == "");
}

TEST_CASE("file: injected errors on msync fail the flush with io_error naming the file and range", "[file][fault]")
{
    const temporary_directory directory;
    const detail::unique_fd file = detail::open_file(directory.file("segment"), detail::open_mode::create_new);
    detail::truncate_file(file, 2 * detail::page_size());
    const detail::mapped_region region = detail::map_file(file, 2 * detail::page_size());
    for (const int error_number : {EIO, ENOSPC}) {
        INFO("injected errno " << error_number);
        const detail::scoped_file_hooks hooks(inject(detail::file_operation::msync, "segment", error_number));
        const auto failure = error_from([&] { region.flush(detail::page_size(), 8); });
        REQUIRE(failure);
        CHECK(failure->code() == errc::io_error);
        CHECK(missing_from(failure->what(), {"msync", file.path(), "[" + std::to_string(detail::page_size()),
                                             std::system_category().message(error_number)}) == "");
    }
}

TEST_CASE("file: injected errors in each step of write_checkpoint keep the previous checkpoint", "[file][fault]")
{
    const temporary_directory directory;
    const std::string path = directory.file("consumer.offset");
    const std::vector<std::pair<detail::file_operation, int>> faults = {
        {detail::file_operation::open, EACCES},
        {detail::file_operation::write, ENOSPC},
        {detail::file_operation::fsync, EIO},
        {detail::file_operation::rename, EIO},
    };
    for (const auto& [operation, error_number] : faults) {
        INFO("injected into " << detail::operation_name(operation));
        detail::write_checkpoint(path, 40);
        {
            const detail::scoped_file_hooks hooks(inject(operation, "consumer.offset", error_number));
            const auto failure = error_from([&] { detail::write_checkpoint(path, 96); });
            REQUIRE(failure);
            CHECK(failure->code() == errc::io_error);
            CHECK(missing_from(failure->what(), {path, std::system_category().message(error_number)}) == "");
        }
        CHECK(detail::read_checkpoint(path) == 40U);
        CHECK_FALSE(detail::path_exists(path + ".tmp"));
        detail::write_checkpoint(path, 96);
        CHECK(detail::read_checkpoint(path) == 96U);
    }
}

TEST_CASE("file: injected EIO on the directory fsync of a checkpoint fails with io_error naming the directory",
          "[file][fault]")
{
    const temporary_directory directory;
    const std::string path = directory.file("earliest.offset");
    const detail::scoped_file_hooks hooks(inject(detail::file_operation::fsync_directory, directory.string(), EIO));
    const auto failure = error_from([&] { detail::write_checkpoint(path, 40); });
    REQUIRE(failure);
    CHECK(failure->code() == errc::io_error);
    CHECK(missing_from(failure->what(), {"fsync directory " + directory.string(), "Input/output error"}) == "");
}

TEST_CASE("file: injected errors reach rename, map, truncate, read and directory creation", "[file][fault]")
{
    const temporary_directory directory;
    const std::string path = directory.file("data");
    detail::unique_fd file = detail::open_file(path, detail::open_mode::create_new);
    detail::truncate_file(file, 64);

    SECTION("rename")
    {
        const detail::scoped_file_hooks hooks(inject(detail::file_operation::rename, "renamed", EIO));
        const auto failure = error_from([&] { detail::rename_file(path, directory.file("renamed")); });
        REQUIRE(failure);
        CHECK(missing_from(failure->what(), {path, directory.file("renamed")}) == "");
        CHECK(detail::path_exists(path));
    }
    SECTION("map")
    {
        const detail::scoped_file_hooks hooks(inject(detail::file_operation::map, "data", ENOMEM));
        const auto failure = error_from([&] { detail::map_file(file, 64); });
        REQUIRE(failure);
        CHECK(failure->code() == errc::io_error);
        CHECK(missing_from(failure->what(), {path}) == "");
    }
    SECTION("truncate")
    {
        const detail::scoped_file_hooks hooks(inject(detail::file_operation::truncate, "data", EIO));
        const auto failure = error_from([&] { detail::truncate_file(file, 0); });
        REQUIRE(failure);
        CHECK(missing_from(failure->what(), {path}) == "");
        CHECK(detail::file_size(file) == 64);
    }
    SECTION("read")
    {
        const detail::scoped_file_hooks hooks(inject(detail::file_operation::read, "data", EIO));
        std::array<std::byte, 8> buffer{};
        const auto failure = error_from([&] { detail::read_at(file, 8, buffer); });
        REQUIRE(failure);
        CHECK(missing_from(failure->what(), {path, "offset 8"}) == "");
    }
    SECTION("make_directory")
    {
        const detail::scoped_file_hooks hooks(inject(detail::file_operation::make_directory, "offsets", ENOSPC));
        const auto failure = error_from([&] { detail::make_directories(directory.file("offsets/group")); });
        REQUIRE(failure);
        CHECK(missing_from(failure->what(), {directory.file("offsets")}) == "");
        CHECK_FALSE(detail::path_exists(directory.file("offsets")));
    }
}

TEST_CASE("file: an injected error on status (stat, lstat) reaches path_exists, make_directories and the removal "
          "of temporary files, which name the path",
          "[file][fault]")
{
    const temporary_directory directory;
    write_raw_file(directory.file("data"), {1});
    SECTION("path_exists")
    {
        const detail::scoped_file_hooks hooks(inject(detail::file_operation::status, "data", EIO));
        const auto failure = error_from([&] { (void)detail::path_exists(directory.file("data")); });
        REQUIRE(failure);
        CHECK(failure->code() == errc::io_error);
        CHECK(missing_from(failure->what(), {directory.file("data"), "cannot inspect"}) == "");
    }
    SECTION("make_directories")
    {
        const detail::scoped_file_hooks hooks(inject(detail::file_operation::status, "offsets", EACCES));
        const auto failure = error_from([&] { detail::make_directories(directory.file("offsets/group")); });
        REQUIRE(failure);
        CHECK(failure->code() == errc::io_error);
        CHECK(missing_from(failure->what(), {directory.file("offsets/group")}) == "");
        CHECK_FALSE(std::filesystem::exists(directory.file("offsets")));
    }
    SECTION("remove_temporary_files")
    {
        const std::string temporary = directory.file("checkpoint") + std::string(detail::temporary_suffix);
        write_raw_file(temporary, {2});
        const detail::scoped_file_hooks hooks(inject(detail::file_operation::status, "checkpoint", EIO));
        const auto failure = error_from([&] { (void)detail::remove_temporary_files(directory.string()); });
        REQUIRE(failure);
        CHECK(missing_from(failure->what(), {temporary}) == "");
        CHECK(std::filesystem::exists(temporary));
    }
}

TEST_CASE("file: operations succeed again once the hooks are removed", "[file][fault]")
{
    const temporary_directory directory;
    const detail::unique_fd file = detail::open_file(directory.file("data"), detail::open_mode::create_new);
    {
        const detail::scoped_file_hooks hooks(inject(detail::file_operation::fsync, "", EIO));
        CHECK_THROWS_AS(detail::fsync_file(file), bufferqueue::error);
    }
    CHECK_NOTHROW(detail::fsync_file(file));
    CHECK(detail::install_file_hooks(nullptr) == nullptr);
}

// ---- directories ----------------------------------------------------------------------------

TEST_CASE("file: make_directories creates missing parents and reports whether it created the leaf", "[file]")
{
    const temporary_directory directory;
    const std::string nested = directory.file("topic/partition-00000/offsets");
    flush_recorder recorder;
    {
        const detail::scoped_file_hooks hooks(recorder.hooks());
        CHECK(detail::make_directories(nested));
    }
    CHECK(std::filesystem::is_directory(nested));
    CHECK_FALSE(detail::make_directories(nested));
    CHECK_FALSE(detail::make_directories(nested + "/"));
    // The parent of each created directory was fsynced.
    std::vector<std::string> synced;
    for (const flushed_range& range : recorder.ranges()) {
        synced.push_back(range.path);
    }
    CHECK(synced == std::vector<std::string>{directory.string(), directory.file("topic"),
                                             directory.file("topic/partition-00000")});

    write_raw_file(directory.file("plain"), {1});
    const auto failure = error_from([&] { detail::make_directories(directory.file("plain/child")); });
    REQUIRE(failure);
    CHECK(failure->code() == errc::io_error);
    CHECK(missing_from(failure->what(), {directory.file("plain"), "Not a directory"}) == "");
    // It names the file in the way, not the directory it was asked for.
    CHECK(missing_from(failure->what(), {"cannot create directory " + directory.file("plain") + ":"}) == "");
}

TEST_CASE("file: rename_file replaces the target and remove_file reports whether anything existed", "[file]")
{
    const temporary_directory directory;
    write_raw_file(directory.file("from"), {1, 2});
    write_raw_file(directory.file("to"), {9});
    detail::rename_file(directory.file("from"), directory.file("to"));
    CHECK_FALSE(detail::path_exists(directory.file("from")));
    CHECK(read_raw_file(directory.file("to")) == std::vector<unsigned char>{1, 2});

    CHECK(detail::remove_file(directory.file("to")));
    CHECK_FALSE(detail::remove_file(directory.file("to")));
    std::filesystem::create_directory(directory.file("empty"));
    CHECK(detail::remove_file(directory.file("empty")));
    CHECK_FALSE(detail::path_exists(directory.file("empty")));

    const auto failure = error_from([&] { detail::rename_file(directory.file("nothing"), directory.file("x")); });
    REQUIRE(failure);
    CHECK(missing_from(failure->what(), {directory.file("nothing"), "No such file or directory"}) == "");
}

TEST_CASE("file: list_directory returns sorted entries with their kinds", "[file]")
{
    const temporary_directory directory;
    write_raw_file(directory.file("b.log"), {});
    std::filesystem::create_directory(directory.file("a-folder"));
    std::filesystem::create_symlink("b.log", directory.file("c-link"));
    const std::vector<detail::directory_entry> entries = detail::list_directory(directory.string());
    REQUIRE(entries.size() == 3);
    CHECK(entries[0].name == "a-folder");
    CHECK(entries[0].kind == detail::entry_kind::directory);
    CHECK(entries[1].name == "b.log");
    CHECK(entries[1].kind == detail::entry_kind::file);
    CHECK(entries[2].name == "c-link");
    CHECK(entries[2].kind == detail::entry_kind::other);

    const auto failure = error_from([&] { detail::list_directory(directory.file("missing")); });
    REQUIRE(failure);
    CHECK(missing_from(failure->what(), {directory.file("missing")}) == "");
}

TEST_CASE("file: remove_temporary_files removes only .tmp files and folders", "[file]")
{
    const temporary_directory directory;
    write_raw_file(directory.file("producer.offset"), {0, 0, 0, 0, 0, 0, 0, 0});
    write_raw_file(directory.file("producer.offset.tmp"), {1, 2, 3});
    write_raw_file(directory.file("00000000000000000001.log.tmp"), {});
    write_raw_file(directory.file(".tmp"), {});  // only a suffix counts, not a bare ".tmp"
    std::filesystem::create_directories(directory.file("group.tmp/nested"));
    write_raw_file(directory.file("group.tmp/consumer.offset"), {1});
    write_raw_file(directory.file("group.tmp/nested/file"), {1});
    std::filesystem::create_directory(directory.file("group"));

    CHECK(detail::remove_temporary_files(directory.string()) == 3);
    std::vector<std::string> names;
    for (const auto& entry : detail::list_directory(directory.string())) {
        names.push_back(entry.name);
    }
    CHECK(names == std::vector<std::string>{".tmp", "group", "producer.offset"});
    CHECK(detail::remove_temporary_files(directory.string()) == 0);
    CHECK(detail::remove_temporary_files(directory.file("missing")) == 0);
}

// ---- directory lock -------------------------------------------------------------------------

TEST_CASE("file: a second lock on a directory in the same process fails fast", "[file][lock]")
{
    const temporary_directory directory;
    std::optional<detail::directory_lock> first(std::in_place, directory.string());
    CHECK(detail::path_exists(directory.file(".lock")));

    const auto failure = error_from([&] { detail::directory_lock second(directory.string()); });
    REQUIRE(failure);
    CHECK(failure->code() == errc::io_error);
    CHECK(missing_from(failure->what(), {directory.string(), "already open by another queue"}) == "");

    detail::directory_lock moved = std::move(*first);
    first.reset();  // the moved-from object releases nothing
    CHECK_THROWS_AS(detail::directory_lock(directory.string()), bufferqueue::error);
    {
        const detail::directory_lock released = std::move(moved);
    }
    CHECK_NOTHROW(detail::directory_lock(directory.string()));
}

TEST_CASE("file: a lock held by another process blocks this one and is released when it exits", "[file][lock]")
{
    const temporary_directory directory;
    std::array<int, 2> locked_pipe{};
    std::array<int, 2> release_pipe{};
    REQUIRE(::pipe(locked_pipe.data()) == 0);
    REQUIRE(::pipe(release_pipe.data()) == 0);

    const pid_t child = ::fork();
    REQUIRE(child != -1);
    if (child == 0) {
        int status = 0;
        try {
            const detail::directory_lock lock(directory.string());
            char byte = 'L';
            status = ::write(locked_pipe[1], &byte, 1) == 1 && ::read(release_pipe[0], &byte, 1) == 1 ? 0 : 2;
        } catch (...) {
            status = 1;
        }
        ::_exit(status);
    }
    ::close(locked_pipe[1]);
    ::close(release_pipe[0]);
    char byte = 0;
    REQUIRE(::read(locked_pipe[0], &byte, 1) == 1);

    const auto failure = error_from([&] { detail::directory_lock lock(directory.string()); });
    REQUIRE(failure);
    CHECK(failure->code() == errc::io_error);
    CHECK(missing_from(failure->what(), {"already open by another queue"}) == "");

    REQUIRE(::write(release_pipe[1], &byte, 1) == 1);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    ::close(locked_pipe[0]);
    ::close(release_pipe[1]);

    CHECK_NOTHROW(detail::directory_lock(directory.string()));
}

TEST_CASE("file: a lock held by this process blocks another process", "[file][lock]")
{
    const temporary_directory directory;
    const detail::directory_lock lock(directory.string());
    const pid_t child = ::fork();
    REQUIRE(child != -1);
    if (child == 0) {
        int status = 3;
        try {
            const detail::directory_lock second(directory.string());
            status = 0;
        } catch (const bufferqueue::error& failure) {
            status =
                std::string_view(failure.what()).find("already open by another queue") != std::string::npos ? 1 : 2;
        } catch (...) {
            status = 3;
        }
        ::_exit(status);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);  // 1: the child was refused with the expected message
}

TEST_CASE("file: locking a missing directory names the lock file", "[file][lock]")
{
    const temporary_directory directory;
    const std::string missing = directory.file("missing");
    const auto failure = error_from([&] { detail::directory_lock lock(missing); });
    REQUIRE(failure);
    CHECK(failure->code() == errc::io_error);
    CHECK(missing_from(failure->what(), {missing + "/.lock", "No such file or directory"}) == "");
}

// ---- checkpoints ----------------------------------------------------------------------------

TEST_CASE("file: a checkpoint round-trips as format version 2 (value, version, CRC-32C) and leaves no temporary "
          "file",
          "[file][checkpoint]")
{
    const temporary_directory directory;
    const std::string path = directory.file("producer.offset");
    CHECK_FALSE(detail::read_checkpoint(path).has_value());

    detail::write_checkpoint(path, 0x0102030405060708ULL);
    const std::vector<unsigned char> written = read_raw_file(path);
    REQUIRE(written.size() == 16);
    CHECK(std::vector<unsigned char>(written.begin(), written.begin() + 12) ==
          std::vector<unsigned char>{8, 7, 6, 5, 4, 3, 2, 1, 2, 0, 0, 0});
    const std::uint32_t crc = detail::crc32c(std::as_bytes(std::span(written.data(), 12)));
    CHECK(std::vector<unsigned char>(written.begin() + 12, written.end()) ==
          std::vector<unsigned char>{static_cast<unsigned char>(crc), static_cast<unsigned char>(crc >> 8),
                                     static_cast<unsigned char>(crc >> 16), static_cast<unsigned char>(crc >> 24)});
    CHECK(detail::read_checkpoint(path) == 0x0102030405060708ULL);
    CHECK_FALSE(detail::path_exists(path + ".tmp"));

    detail::write_checkpoint(path, 0);
    CHECK(detail::read_checkpoint(path) == 0U);
    detail::write_checkpoint(path, detail::max_checkpoint_value);
    CHECK(detail::read_checkpoint(path) == detail::max_checkpoint_value);
}

TEST_CASE("file: a version-1 checkpoint (8 little-endian bytes of an earlier release) is still read",
          "[file][checkpoint]")
{
    const temporary_directory directory;
    const std::string path = directory.file("consumer.offset");
    write_raw_file(path, {8, 7, 6, 5, 4, 3, 2, 1});
    CHECK(detail::read_checkpoint(path) == 0x0102030405060708ULL);
    detail::write_checkpoint(path, 40);
    CHECK(read_raw_file(path).size() == 16);
    CHECK(detail::read_checkpoint(path) == 40U);
}

TEST_CASE("file: any flipped bit of a checkpoint is corrupt_data naming the file", "[file][checkpoint]")
{
    const temporary_directory directory;
    const std::string path = directory.file("consumer.offset");
    detail::write_checkpoint(path, 4136);
    const std::vector<unsigned char> pristine = read_raw_file(path);
    for (std::size_t bit = 0; bit < pristine.size() * 8; ++bit) {
        INFO("bit " << bit);
        std::vector<unsigned char> damaged = pristine;
        damaged[bit / 8] = static_cast<unsigned char>(damaged[bit / 8] ^ (1U << (bit % 8)));
        write_raw_file(path, damaged);
        const auto failure = error_from([&] { detail::read_checkpoint(path); });
        REQUIRE(failure);
        CHECK(failure->code() == errc::corrupt_data);
        CHECK(missing_from(failure->what(), {path, "checksum"}) == "");
    }
}

TEST_CASE("file: a version-2 checkpoint of an unknown version or a negative value is corrupt_data naming the file",
          "[file][checkpoint]")
{
    const temporary_directory directory;
    const std::string path = directory.file("earliest.offset");
    const auto checksummed = [](std::vector<unsigned char> bytes) {
        const std::uint32_t crc = detail::crc32c(std::as_bytes(std::span(bytes.data(), bytes.size())));
        for (int shift = 0; shift < 32; shift += 8) {
            bytes.push_back(static_cast<unsigned char>(crc >> shift));
        }
        return bytes;
    };
    SECTION("version 3")
    {
        write_raw_file(path, checksummed({40, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0}));
        const auto failure = error_from([&] { detail::read_checkpoint(path); });
        REQUIRE(failure);
        CHECK(failure->code() == errc::corrupt_data);
        CHECK(missing_from(failure->what(), {path, "format version 3"}) == "");
    }
    SECTION("negative")
    {
        write_raw_file(path, checksummed({0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 2, 0, 0, 0}));
        const auto failure = error_from([&] { detail::read_checkpoint(path); });
        REQUIRE(failure);
        CHECK(failure->code() == errc::corrupt_data);
        CHECK(missing_from(failure->what(), {path, "negative", "-1"}) == "");
    }
}

TEST_CASE("file: a checkpoint of the wrong length is corrupt_data naming the file", "[file][checkpoint]")
{
    const temporary_directory directory;
    const std::string path = directory.file("consumer.offset");
    for (const std::size_t length : {0, 1, 7, 9, 15, 17, 24}) {
        INFO("length " << length);
        write_raw_file(path, std::vector<unsigned char>(length, 0));
        const auto failure = error_from([&] { detail::read_checkpoint(path); });
        REQUIRE(failure);
        CHECK(failure->code() == errc::corrupt_data);
        CHECK(missing_from(failure->what(), {path, std::to_string(length) + " bytes long"}) == "");
    }
}

TEST_CASE("file: a negative checkpoint is corrupt_data naming the file", "[file][checkpoint]")
{
    const temporary_directory directory;
    const std::string path = directory.file("earliest.offset");
    SECTION("minus one")
    {
        write_raw_file(path, {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF});
        const auto failure = error_from([&] { detail::read_checkpoint(path); });
        REQUIRE(failure);
        CHECK(failure->code() == errc::corrupt_data);
        CHECK(missing_from(failure->what(), {path, "negative", "-1"}) == "");
    }
    SECTION("the smallest int64")
    {
        write_raw_file(path, {0, 0, 0, 0, 0, 0, 0, 0x80});
        const auto failure = error_from([&] { detail::read_checkpoint(path); });
        REQUIRE(failure);
        CHECK(failure->code() == errc::corrupt_data);
        CHECK(missing_from(failure->what(), {path, "negative"}) == "");
    }
}

TEST_CASE("file: a checkpoint path that is a directory is corrupt_data naming it", "[file][checkpoint]")
{
    const temporary_directory directory;
    const std::string path = directory.file("consumer.offset");
    std::filesystem::create_directory(path);
    const auto failure = error_from([&] { detail::read_checkpoint(path); });
    REQUIRE(failure);
    CHECK(failure->code() == errc::corrupt_data);
    CHECK(missing_from(failure->what(), {path, "not a regular file"}) == "");
}

TEST_CASE("file: writing a checkpoint value that would read back as negative is invalid_argument", "[file][checkpoint]")
{
    const temporary_directory directory;
    const std::string path = directory.file("producer.offset");
    const auto failure = error_from([&] { detail::write_checkpoint(path, detail::max_checkpoint_value + 1); });
    REQUIRE(failure);
    CHECK(failure->code() == errc::invalid_argument);
    CHECK(missing_from(failure->what(), {path}) == "");
    CHECK_FALSE(detail::path_exists(path));
}

TEST_CASE("file: a checkpoint in a missing directory fails with io_error naming it", "[file][checkpoint]")
{
    const temporary_directory directory;
    const std::string path = directory.file("missing/consumer.offset");
    const auto failure = error_from([&] { detail::write_checkpoint(path, 40); });
    REQUIRE(failure);
    CHECK(failure->code() == errc::io_error);
    CHECK(missing_from(failure->what(), {path + ".tmp"}) == "");
    CHECK_FALSE(detail::read_checkpoint(path).has_value());
}

TEST_CASE("file: operation names read as words", "[file]")
{
    CHECK(detail::operation_name(detail::file_operation::fsync_directory) == "fsync_directory");
    CHECK(detail::operation_name(detail::file_operation::preallocate) == "preallocate");
    CHECK(detail::operation_name(detail::file_operation::msync) == "msync");
}

}  // namespace file_test
