// The options that define a persistent topic's stored data (partitions, segment_size, serializer),
// kept in `{topic}/topic.options` and compared at every open (issue 51, item 2).
#include "bufferqueue/mmap/mmap_topic.hpp"

#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/mmap/detail/crc32c.hpp"
#include "bufferqueue/mmap/detail/topic_options_file.hpp"
#include "bufferqueue/mmap/detail/topic_options_format.hpp"

#include "catch.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <span>
#include <string>
#include <variant>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace mmap_topic_options_test {

namespace {

using bufferqueue::test::differences;
using bufferqueue::test::error_from;
using bufferqueue::test::file_bytes;
using bufferqueue::test::missing_from;
using bufferqueue::test::queue_runner;
using bufferqueue::test::snapshot;
using bufferqueue::test::string_bytes_serializer;
using bufferqueue::test::temporary_directory;
using bufferqueue::test::write_file;

namespace bq = bufferqueue;
namespace fs = std::filesystem;
using bq::errc;

bq::mmap_topic_options<std::string> string_topic(const fs::path& directory, std::size_t partitions = 1,
                                                 std::uint64_t segment_size = 4096)
{
    return {.name = "events",
            .partitions = partitions,
            .data_directory = directory,
            .segment_size = segment_size,
            .serializer = string_bytes_serializer{}};
}

fs::path options_file(const fs::path& directory)
{
    return directory / "events" / "topic.options";
}

// Opens the topic, produces `records` items round-robin, reads them all with group "g" and closes.
void write_topic(const bq::mmap_topic_options<std::string>& options, std::size_t records)
{
    queue_runner runner;
    runner->add_topic(options);
    auto producer = runner->producer<std::string>("events");
    for (std::size_t index = 0; index < records; ++index) {
        REQUIRE(producer.try_produce("record " + std::to_string(index)));
    }
}

// The number of records group "g" reads from the topic opened with `options`.
std::size_t records_in(const bq::mmap_topic_options<std::string>& options)
{
    queue_runner runner;
    runner->add_topic(options);
    auto consumer = runner->create_pull_consumer<std::string>({.topic = "events", .group = "g", .auto_commit = true});
    std::size_t count = 0;
    while (auto batch = consumer.try_consume()) {
        count += batch->size();
    }
    return count;
}

// Opening with `options` fails with invalid_argument naming every one of `mentions`, and changes no
// file under the data folder.
template <class T>
void require_refused(const bq::mmap_topic_options<T>& options, std::initializer_list<std::string_view> mentions)
{
    const auto before = snapshot(options.data_directory);
    queue_runner runner;
    const auto failure = error_from([&] { runner->add_topic(options); });
    REQUIRE(failure);
    INFO(failure->what());
    CHECK(failure->code() == errc::invalid_argument);
    CHECK(missing_from(failure->what(), mentions).empty());
    CHECK(differences(before, snapshot(options.data_directory)) == std::vector<std::string>{});
}

// Opening with `options` fails with corrupt_data naming the options file, and changes no file.
void require_corrupt_options(const bq::mmap_topic_options<std::string>& options)
{
    const auto before = snapshot(options.data_directory);
    queue_runner runner;
    const auto failure = error_from([&] { runner->add_topic(options); });
    REQUIRE(failure);
    INFO(failure->what());
    CHECK(failure->code() == errc::corrupt_data);
    CHECK(missing_from(failure->what(), {options_file(options.data_directory).string()}).empty());
    CHECK(differences(before, snapshot(options.data_directory)) == std::vector<std::string>{});
}

}  // namespace

TEST_CASE("mmap topic options: another segment_size is refused naming the option, both values and the folder, "
          "and no file changes",
          "[mmap]")
{
    temporary_directory directory;
    write_topic(string_topic(directory.path(), 2, 4096), 10);
    require_refused(string_topic(directory.path(), 2, 8192),
                    {"'segment_size'", "8192", "4096", (directory.path() / "events").string()});
    CHECK(records_in(string_topic(directory.path(), 2, 4096)) == 10);
}

TEST_CASE("mmap topic options: another serializer is refused naming the option, both types and the folder", "[mmap]")
{
    temporary_directory directory;
    write_topic(string_topic(directory.path()), 3);
    bq::mmap_topic_options<std::string> as_json{
        .name = "events", .data_directory = directory.path(), .segment_size = 4096};
    require_refused(as_json, {"'serializer'", "string_bytes_serializer", "json_serializer",
                              (directory.path() / "events").string()});
    CHECK(records_in(string_topic(directory.path())) == 3);
}

TEST_CASE("mmap topic options: fewer partitions are refused as invalid_argument, more are added and stored", "[mmap]")
{
    temporary_directory directory;
    write_topic(string_topic(directory.path(), 3), 6);
    require_refused(string_topic(directory.path(), 2),
                    {"'partitions'", "is 2 here", "3", (directory.path() / "events").string()});
    CHECK(records_in(string_topic(directory.path(), 4)) == 6);  // adding partitions stays allowed
    // Now the folder holds four partitions: three would strand the records of the fourth.
    require_refused(string_topic(directory.path(), 3), {"'partitions'", "is 3 here", "4"});
}

TEST_CASE("mmap topic options: retention and the flush settings may change between opens", "[mmap]")
{
    temporary_directory directory;
    write_topic(string_topic(directory.path()), 5);
    auto changed = string_topic(directory.path());
    changed.max_retained_consumed_segments = 1;
    changed.flush = bq::flush_strategy::batch;
    changed.flush_batch_size = 7;
    CHECK(records_in(changed) == 5);
}

TEST_CASE("mmap topic options: a folder written without topic.options opens, gets the file, and is checked from "
          "then on",
          "[mmap]")
{
    temporary_directory directory;
    write_topic(string_topic(directory.path(), 2), 8);
    fs::remove(options_file(directory.path()));  // as folders written before the file existed

    CHECK(records_in(string_topic(directory.path(), 2)) == 8);
    REQUIRE(fs::is_regular_file(options_file(directory.path())));
    bq::mmap_topic_options<std::string> as_json{
        .name = "events", .partitions = 2, .data_directory = directory.path(), .segment_size = 4096};
    require_refused(as_json, {"'serializer'", "string_bytes_serializer"});
}

TEST_CASE("mmap topic options: in a folder without topic.options, segment_size and partitions are read from the "
          "files and a mismatch is refused as invalid_argument",
          "[mmap]")
{
    temporary_directory directory;
    write_topic(string_topic(directory.path(), 3, 4096), 9);
    fs::remove(options_file(directory.path()));

    require_refused(string_topic(directory.path(), 3, 8192), {"'segment_size'", "8192", "4096"});
    require_refused(string_topic(directory.path(), 2, 4096), {"'partitions'", "is 2 here", "3"});
    CHECK_FALSE(fs::exists(options_file(directory.path())));
    CHECK(records_in(string_topic(directory.path(), 4, 4096)) == 9);  // adding partitions stays allowed
    CHECK(fs::is_regular_file(options_file(directory.path())));
}

TEST_CASE("mmap topic options: a damaged topic.options is corrupt_data naming the file, and no file changes", "[mmap]")
{
    temporary_directory directory;
    write_topic(string_topic(directory.path()), 4);
    const fs::path file = options_file(directory.path());
    const std::vector<unsigned char> intact = file_bytes(file);
    REQUIRE(intact.size() > 8);

    SECTION("a flipped bit")
    {
        std::vector<unsigned char> damaged = intact;
        damaged[intact.size() / 2] ^= 0x10;
        write_file(file, damaged);
    }
    SECTION("cut short")
    {
        write_file(file, std::vector<unsigned char>(intact.begin(), intact.end() - 1));
    }
    SECTION("empty")
    {
        write_file(file, {});
    }
    SECTION("a folder in its place")
    {
        fs::remove(file);
        fs::create_directory(file);
    }
    require_corrupt_options(string_topic(directory.path()));
}

TEST_CASE("mmap topic options: a process-shared folder nobody holds refuses another segment_size as "
          "invalid_argument",
          "[mmap][process_shared]")
{
    temporary_directory directory;
    auto shared = string_topic(directory.path(), 1, 1024 * 1024);
    shared.process_shared = true;
    write_topic(shared, 3);
    shared.segment_size = 2 * 1024 * 1024;
    require_refused(shared, {"'segment_size'", "2097152", "1048576", (directory.path() / "events").string()});
    auto exclusive = shared;
    exclusive.process_shared = false;
    require_refused(exclusive, {"'segment_size'", "2097152", "1048576"});
}

TEST_CASE("mmap topic options: serializer names are compared without the spellings in which GCC and clang differ",
          "[mmap]")
{
    namespace detail = bq::detail;
    const auto options = [](std::string name) {
        return detail::stored_topic_options{.partitions = 1, .segment_size = 64, .serializer_name = std::move(name)};
    };
    const auto compare = [&](const std::string& given, const std::string& found) {
        detail::require_same_options("events", "/data/events", detail::options_origin::options_file, options(given),
                                     options(found));
    };
    CHECK_NOTHROW(compare("bufferqueue::json_serializer<std::__cxx11::basic_string<char> >",
                          "bufferqueue::json_serializer<std::basic_string<char>>"));
    CHECK_NOTHROW(compare("raw_serializer<{anonymous}::point>", "raw_serializer<(anonymous namespace)::point>"));
    const auto different =
        error_from([&] { compare("bufferqueue::msgpack_serializer<order>", "bufferqueue::json_serializer<order>"); });
    REQUIRE(different);
    CHECK(different->code() == errc::invalid_argument);
    CHECK(missing_from(different->what(),
                       {"'serializer'", "msgpack_serializer<order>", "json_serializer<order>", "/data/events"})
              .empty());
}

TEST_CASE("mmap topic options: the file holds the documented bytes and every change to them is caught", "[mmap]")
{
    namespace detail = bq::detail;
    const detail::stored_topic_options options{.partitions = 3, .segment_size = 4096, .serializer_name = "ab"};
    const std::vector<std::byte> bytes = detail::encode_topic_options(options);
    std::vector<std::byte> expected;
    const std::initializer_list<unsigned> fields = {'B', 'Q', 'T', 'O', 'P', 'I', 'C', 0,  // magic
                                                    1,   0,   0,   0,                      // version
                                                    2,   0,   0,   0,                      // name length
                                                    3,   0,   0,   0,   0,   0,   0,   0,  // partitions
                                                    0,   16,  0,   0,   0,   0,   0,   0,  // segment size, 4096
                                                    'a', 'b'};                             // serializer name
    for (const unsigned value : fields) {
        expected.push_back(static_cast<std::byte>(value));
    }
    const std::uint32_t crc = detail::crc32c(expected);
    for (int shift = 0; shift < 32; shift += 8) {
        expected.push_back(static_cast<std::byte>(crc >> shift));
    }
    CHECK(bytes == expected);
    const auto decoded = detail::decode_topic_options(bytes);
    REQUIRE(std::holds_alternative<detail::stored_topic_options>(decoded));
    CHECK(std::get<detail::stored_topic_options>(decoded) == options);

    for (std::size_t byte = 0; byte < bytes.size(); ++byte) {
        for (int bit = 0; bit < 8; ++bit) {
            std::vector<std::byte> damaged = bytes;
            damaged[byte] ^= static_cast<std::byte>(1U << bit);
            INFO("byte " << byte << " bit " << bit);
            CHECK(std::holds_alternative<std::string>(detail::decode_topic_options(damaged)));
        }
    }
    for (std::size_t size = 0; size < bytes.size(); ++size) {
        INFO("cut to " << size << " bytes");
        CHECK(std::holds_alternative<std::string>(
            detail::decode_topic_options(std::span<const std::byte>(bytes).first(size))));
    }
    // Valid bytes holding values no topic can have.
    for (const detail::stored_topic_options& impossible :
         {detail::stored_topic_options{.partitions = 0, .segment_size = 4096},
          detail::stored_topic_options{.partitions = 1, .segment_size = 100}}) {
        CHECK(std::holds_alternative<std::string>(
            detail::decode_topic_options(detail::encode_topic_options(impossible))));
    }
    // A serializer name longer than the file keeps is cut, and compared cut.
    const std::string long_name(detail::topic_options_layout::max_serializer_name + 10, 'x');
    const auto cut = detail::decode_topic_options(
        detail::encode_topic_options({.partitions = 1, .segment_size = 64, .serializer_name = long_name}));
    REQUIRE(std::holds_alternative<detail::stored_topic_options>(cut));
    CHECK(std::get<detail::stored_topic_options>(cut).serializer_name == detail::stored_serializer_name(long_name));
}

}  // namespace mmap_topic_options_test
