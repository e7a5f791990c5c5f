#include "bufferqueue/mmap/detail/segment_format.hpp"

#include "catch.hpp"
#include "test_support.hpp"

#include "bufferqueue/error.hpp"
#include "bufferqueue/mmap/detail/crc32c.hpp"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace segment_format_test {

namespace {

using bufferqueue::test::error_from;
using bufferqueue::test::missing_from;

namespace detail = bufferqueue::detail;
using bufferqueue::errc;
using detail::scan_stop;

std::span<const std::byte> as_bytes(std::string_view text)
{
    return std::as_bytes(std::span<const char>(text.data(), text.size()));
}

std::string as_string(std::span<const std::byte> bytes)
{
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// Writes the header of segment `index` into the first bytes of `segment`, as create_mmap_segment
// does (with make_segment_header).
void put_segment_header(std::span<std::byte> segment, std::uint64_t index, std::uint64_t size)
{
    const auto header = detail::make_segment_header(index, size);
    REQUIRE(segment.size() >= header.size());
    std::copy(header.begin(), header.end(), segment.begin());
}

// A log end past the next segment's first offset: normalize_offset may look at the segment's end.
constexpr std::uint64_t whole_log = std::numeric_limits<std::uint64_t>::max();

// A zero-filled in-memory segment with a header, filled by appending records.
class segment_builder {
public:
    segment_builder(std::uint64_t index, std::uint64_t size) : index_(index), bytes_(size)
    {
        put_segment_header(bytes_, index, size);
    }

    // Appends a record; returns its position.
    std::uint64_t add(std::string_view payload)
    {
        REQUIRE(detail::fits(bytes_.size(), position_, payload.size()));
        const std::uint64_t start = position_;
        position_ += detail::encode_record(std::span(bytes_).subspan(position_), as_bytes(payload));
        starts_.push_back(start);
        payloads_.emplace_back(payload);
        return start;
    }

    // Appends a segment-end marker; returns its position.
    std::uint64_t end_segment()
    {
        detail::encode_segment_end(std::span(bytes_).subspan(position_));
        return position_;
    }

    std::vector<std::byte>& bytes() { return bytes_; }
    std::span<const std::byte> segment() const { return bytes_; }
    std::uint64_t index() const { return index_; }
    std::uint64_t position() const { return position_; }
    const std::vector<std::uint64_t>& starts() const { return starts_; }
    const std::vector<std::string>& payloads() const { return payloads_; }

private:
    std::uint64_t index_;
    std::vector<std::byte> bytes_;
    std::uint64_t position_ = detail::segment_header_size;
    std::vector<std::uint64_t> starts_;
    std::vector<std::string> payloads_;
};

// Reads the records from the first boundary the way a consumer does; returns their payloads.
std::vector<std::string> read_all(std::span<const std::byte> segment)
{
    std::vector<std::string> payloads;
    std::uint64_t position = detail::segment_header_size;
    while (const auto record = detail::read_record(segment, position)) {
        payloads.push_back(as_string(record->payload));
        position = record->next_position;
    }
    return payloads;
}

}  // namespace

// ---- sizes ----------------------------------------------------------------------------------

TEST_CASE("segment format: a record takes 8 bytes plus its payload rounded up to 8", "[segment_format]")
{
    CHECK(detail::record_size(0) == 8);
    CHECK(detail::record_size(1) == 16);
    CHECK(detail::record_size(8) == 16);
    CHECK(detail::record_size(9) == 24);
    CHECK(detail::record_size(detail::max_record_payload_size) == 8 + 0x1'0000'0000ULL);
}

TEST_CASE("segment format: the largest payload is what fits in one record after the header", "[segment_format]")
{
    CHECK(detail::max_payload_size(0) == 0);
    CHECK(detail::max_payload_size(47) == 0);
    CHECK(detail::max_payload_size(48) == 0);
    CHECK(detail::max_payload_size(56) == 8);
    CHECK(detail::max_payload_size(4096) == 4048);
    CHECK(detail::max_payload_size(64ULL << 32) == detail::max_record_payload_size);
    for (const std::uint64_t size : {48ULL, 56ULL, 64ULL, 4096ULL, 1ULL << 20}) {
        CHECK(detail::fits(size, detail::segment_header_size, detail::max_payload_size(size)));
        CHECK_FALSE(detail::fits(size, detail::segment_header_size, detail::max_payload_size(size) + 1));
    }
}

TEST_CASE("segment format: fits checks the room left after a position", "[segment_format]")
{
    CHECK(detail::fits(128, 40, 80));
    CHECK_FALSE(detail::fits(128, 40, 81));
    CHECK(detail::fits(128, 120, 0));
    CHECK_FALSE(detail::fits(128, 128, 0));
    CHECK_FALSE(detail::fits(128, 136, 0));
    CHECK_FALSE(detail::fits(1ULL << 40, 40, detail::max_record_payload_size + 1));
}

TEST_CASE("segment format: segment sizes must be multiples of 8 of at least 64 bytes", "[segment_format]")
{
    // is_valid_segment_size is the check behind the segment_size option (whose error message
    // mmap_topic_test checks).
    CHECK(detail::min_segment_size == 64);
    CHECK(detail::is_valid_segment_size(64));
    CHECK(detail::is_valid_segment_size(256ULL * 1024 * 1024));
    CHECK(detail::is_valid_segment_size(detail::max_segment_size));
    for (const std::uint64_t size :
         std::initializer_list<std::uint64_t>{0, 40, 48, 56, 63, 65, 4097, detail::max_segment_size + 8}) {
        INFO("segment size " << size);
        CHECK_FALSE(detail::is_valid_segment_size(size));
    }
}

// ---- segment header -------------------------------------------------------------------------

TEST_CASE("segment format: a written header validates and has the documented layout", "[segment_format]")
{
    std::vector<std::byte> segment(4096);
    put_segment_header(segment, 0x0102030405060708ULL, 4096);
    CHECK_FALSE(detail::validate_segment_header(segment, 0x0102030405060708ULL, 4096).has_value());
    CHECK_NOTHROW(detail::check_segment_header(segment, 0x0102030405060708ULL, 4096, "/data/00.log"));

    CHECK(as_string(std::span(segment).first(8)) == std::string("BQSEGMT\0", 8));
    CHECK(detail::load_u32_little_endian(segment.data() + 8) == 1);
    CHECK(detail::load_u32_little_endian(segment.data() + 12) == 40);
    CHECK(segment[16] == std::byte{0x08});
    CHECK(detail::load_u64_little_endian(segment.data() + 16) == 0x0102030405060708ULL);
    CHECK(detail::load_u64_little_endian(segment.data() + 24) == 4096);
    CHECK(detail::load_u32_little_endian(segment.data() + 32) == 0);
    CHECK(detail::load_u32_little_endian(segment.data() + 36) == detail::crc32c(std::span(segment).first(36)));
    CHECK(std::all_of(segment.begin() + 40, segment.end(), [](std::byte value) { return value == std::byte{0}; }));

    const auto header = detail::make_segment_header(0x0102030405060708ULL, 4096);
    CHECK(std::equal(header.begin(), header.end(), segment.begin()));
}

TEST_CASE("segment format: a header with the wrong magic, version, size, index or checksum is rejected",
          "[segment_format]")
{
    std::vector<std::byte> segment(256);
    put_segment_header(segment, 7, 256);
    const auto rewrite_checksum = [&] {
        detail::store_u32_little_endian(segment.data() + 36, detail::crc32c(std::span(segment).first(36)));
    };
    std::optional<std::string> problem;
    SECTION("magic")
    {
        segment[0] = std::byte{'X'};
        rewrite_checksum();
        problem = detail::validate_segment_header(segment, 7, 256);
        REQUIRE(problem);
        CHECK(missing_from(*problem, {"magic", "offset 0"}) == "");
    }
    SECTION("version")
    {
        detail::store_u32_little_endian(segment.data() + 8, 2);
        problem = detail::validate_segment_header(segment, 7, 256);
        REQUIRE(problem);
        CHECK(missing_from(*problem, {"version", "is 2"}) == "");
    }
    SECTION("header size")
    {
        detail::store_u32_little_endian(segment.data() + 12, 48);
        rewrite_checksum();
        problem = detail::validate_segment_header(segment, 7, 256);
        REQUIRE(problem);
        CHECK(missing_from(*problem, {"header size", "48"}) == "");
    }
    SECTION("checksum")
    {
        segment[20] ^= std::byte{0x01};
        problem = detail::validate_segment_header(segment, 7, 256);
        REQUIRE(problem);
        CHECK(missing_from(*problem, {"checksum"}) == "");
    }
    SECTION("reserved field")
    {
        segment[32] = std::byte{1};
        rewrite_checksum();
        problem = detail::validate_segment_header(segment, 7, 256);
        REQUIRE(problem);
        CHECK(missing_from(*problem, {"reserved"}) == "");
    }
    SECTION("index")
    {
        problem = detail::validate_segment_header(segment, 8, 256);
        REQUIRE(problem);
        CHECK(missing_from(*problem, {"segment index", "is 7", "says 8"}) == "");
    }
    SECTION("segment size")
    {
        problem = detail::validate_segment_header(segment, 7, 512);
        REQUIRE(problem);
        CHECK(missing_from(*problem, {"segment size", "256", "512"}) == "");
    }
    SECTION("too short")
    {
        problem = detail::validate_segment_header(std::span(segment).first(39), 7, 256);
        REQUIRE(problem);
        CHECK(missing_from(*problem, {"39 bytes"}) == "");
    }
    SECTION("check_segment_header throws corrupt_data naming the file")
    {
        const auto failure = error_from([&] { detail::check_segment_header(segment, 3, 256, "/data/3.log"); });
        REQUIRE(failure);
        CHECK(failure->code() == errc::corrupt_data);
        CHECK(missing_from(failure->what(), {"/data/3.log", "segment index"}) == "");
    }
}

TEST_CASE("segment format: a flipped byte anywhere in the header is detected", "[segment_format]")
{
    std::vector<std::byte> segment(128);
    put_segment_header(segment, 1, 128);
    for (std::size_t index = 0; index < detail::segment_header_size; ++index) {
        for (const std::byte mask : {std::byte{0x01}, std::byte{0x80}, std::byte{0xFF}}) {
            segment[index] ^= mask;
            CHECK(detail::validate_segment_header(segment, 1, 128).has_value());
            segment[index] ^= mask;
        }
    }
    CHECK_FALSE(detail::validate_segment_header(segment, 1, 128).has_value());
}

// ---- records --------------------------------------------------------------------------------

TEST_CASE("segment format: a record holds length, checksum, payload and zero padding", "[segment_format]")
{
    std::vector<std::byte> destination(32, std::byte{0xEE});
    CHECK(detail::encode_record(destination, as_bytes("hello")) == 16);
    CHECK(detail::load_u32_little_endian(destination.data()) == 5);
    const std::uint32_t expected_checksum =
        detail::crc32c(as_bytes("hello"), detail::crc32c(std::span(destination).first(4)));
    CHECK(detail::load_u32_little_endian(destination.data() + 4) == expected_checksum);
    CHECK(as_string(std::span(destination).subspan(8, 5)) == "hello");
    CHECK(std::all_of(destination.begin() + 13, destination.begin() + 16,
                      [](std::byte value) { return value == std::byte{0}; }));
    CHECK(destination[16] == std::byte{0xEE});  // nothing written past the record
}

TEST_CASE("segment format: records round-trip, including empty payloads and payloads of every padding",
          "[segment_format]")
{
    segment_builder builder(0, 1024);
    const std::vector<std::string> payloads = {"", "a", "ab", "abcdefg", "abcdefgh", "abcdefghi", "", "last"};
    for (const std::string& payload : payloads) {
        builder.add(payload);
    }
    CHECK(read_all(builder.segment()) == payloads);

    const auto empty = detail::read_record(builder.segment(), builder.starts()[0]);
    REQUIRE(empty);
    CHECK(empty->payload.empty());
    CHECK(empty->next_position == builder.starts()[1]);

    const detail::scan_result scan = detail::scan_segment(builder.segment(), detail::segment_header_size);
    CHECK(scan.end_position == builder.position());
    CHECK(scan.record_count == payloads.size());
    CHECK(scan.reason == scan_stop::zero_header);
    CHECK_FALSE(scan.segment_complete());
}

TEST_CASE("segment format: a zero-filled area is not a record", "[segment_format]")
{
    std::vector<std::byte> segment(256);
    put_segment_header(segment, 0, 256);
    CHECK_FALSE(detail::read_record(segment, 40).has_value());
    CHECK_FALSE(detail::is_segment_end(segment, 40));
    const detail::scan_result scan = detail::scan_segment(segment, 40);
    CHECK(scan.end_position == 40);
    CHECK(scan.record_count == 0);
    CHECK(scan.reason == scan_stop::zero_header);
}

TEST_CASE("segment format: encoding needs room and a payload within the format's limit", "[segment_format]")
{
    std::vector<std::byte> destination(15);
    const auto too_small = error_from([&] { detail::encode_record(destination, as_bytes("hello")); });
    REQUIRE(too_small);
    CHECK(too_small->code() == errc::invalid_argument);
    CHECK(detail::encode_record(std::span(destination).first(8), {}) == 8);

    const auto marker = error_from([&] { detail::encode_segment_end(std::span(destination).first(7)); });
    REQUIRE(marker);
    CHECK(marker->code() == errc::invalid_argument);
}

TEST_CASE("segment format: a segment-end marker completes the segment and normalizes to the next one",
          "[segment_format]")
{
    segment_builder builder(3, 256);
    builder.add("first");
    builder.add("second");
    const std::uint64_t marker = builder.end_segment();
    CHECK(detail::load_u32_little_endian(builder.bytes().data() + marker) == detail::segment_end_length);
    CHECK(detail::load_u32_little_endian(builder.bytes().data() + marker + 4) == detail::segment_end_checksum);
    CHECK(detail::segment_end_checksum ==
          detail::crc32c(detail::segment_magic, detail::crc32c(std::span(builder.bytes()).subspan(marker, 4))));

    const detail::scan_result scan = detail::scan_segment(builder.segment(), 40);
    CHECK(scan.end_position == marker);
    CHECK(scan.record_count == 2);
    CHECK(scan.reason == scan_stop::segment_end_marker);
    CHECK(scan.segment_complete());
    CHECK(detail::is_segment_end(builder.segment(), marker));
    CHECK_FALSE(detail::read_record(builder.segment(), marker).has_value());
    CHECK(detail::is_record_boundary(builder.segment(), marker));
    CHECK(detail::normalize_offset(builder.segment(), 3, marker, whole_log) == 4 * 256 + 40);
    CHECK(detail::normalize_offset(builder.segment(), 3, marker, 4 * 256 + 40) == 4 * 256 + 40);
    CHECK(detail::normalize_offset(builder.segment(), 3, builder.starts()[1], whole_log) ==
          3 * 256 + builder.starts()[1]);
    // Before the next segment exists the marker's position stays (and its bytes are not read).
    CHECK(detail::normalize_offset(builder.segment(), 3, marker, 4 * 256 + 39) == 3 * 256 + marker);
}

TEST_CASE("segment format: an area of 0xFF bytes is neither a record nor a segment-end marker", "[segment_format]")
{
    std::vector<std::byte> segment(256, std::byte{0xFF});
    put_segment_header(segment, 0, 256);
    CHECK_FALSE(detail::is_segment_end(segment, 40));
    CHECK_FALSE(detail::read_record(segment, 40).has_value());
    const detail::scan_result scan = detail::scan_segment(segment, 40);
    CHECK(scan.end_position == 40);
    CHECK(scan.reason == scan_stop::bad_checksum);
    CHECK_FALSE(scan.segment_complete());
}

TEST_CASE("segment format: a damaged segment-end marker does not end the segment", "[segment_format]")
{
    segment_builder builder(0, 128);
    builder.add("x");
    const std::uint64_t marker = builder.end_segment();
    builder.bytes()[marker + 5] ^= std::byte{0x10};
    CHECK_FALSE(detail::is_segment_end(builder.segment(), marker));
    const detail::scan_result scan = detail::scan_segment(builder.segment(), 40);
    CHECK(scan.end_position == marker);
    CHECK(scan.reason == scan_stop::bad_checksum);
    CHECK_FALSE(scan.segment_complete());
}

TEST_CASE("segment format: a record exactly filling the segment completes it without a marker", "[segment_format]")
{
    constexpr std::uint64_t size = 128;
    segment_builder builder(5, size);
    builder.add("abc");
    const std::string filler(static_cast<std::size_t>(size - builder.position() - detail::record_header_size), 'f');
    builder.add(filler);
    REQUIRE(builder.position() == size);
    CHECK_FALSE(detail::fits(size, size, 0));

    const detail::scan_result scan = detail::scan_segment(builder.segment(), 40);
    CHECK(scan.end_position == size);
    CHECK(scan.record_count == 2);
    CHECK(scan.reason == scan_stop::segment_full);
    CHECK(scan.segment_complete());
    CHECK(read_all(builder.segment()) == builder.payloads());
    CHECK(detail::is_segment_end(builder.segment(), size));
    CHECK(detail::is_record_boundary(builder.segment(), size));
    CHECK(detail::normalize_offset(builder.segment(), 5, size, whole_log) == 6 * size + 40);
}

TEST_CASE("segment format: a torn last record is cut off after every byte, keeping exactly the complete records",
          "[segment_format]")
{
    segment_builder builder(0, 512);
    builder.add("one");
    builder.add("");
    builder.add("three three");
    const std::uint64_t last = builder.add("the last record, torn while written");
    const std::uint64_t end = builder.position();
    const std::vector<std::byte> complete = builder.bytes();

    const std::uint64_t payload_end = last + detail::record_header_size + builder.payloads().back().size();
    REQUIRE(payload_end < end);  // the last record has padding
    for (std::uint64_t cut = last; cut <= end; ++cut) {
        INFO("cut at " << cut);
        const bool whole = cut == end;
        const std::uint64_t expected_end = whole ? end : last;
        const std::uint64_t expected_count = whole ? 4 : 3;

        // Power loss on a preallocated file: the bytes never written are zero. The padding is zero
        // too, so the record is complete once its last payload byte is written.
        std::vector<std::byte> zeroed = complete;
        std::fill(zeroed.begin() + static_cast<std::ptrdiff_t>(cut), zeroed.end(), std::byte{0});
        detail::scan_result scan = detail::scan_segment(zeroed, 40);
        CHECK(scan.end_position == (cut >= payload_end ? end : last));
        CHECK(scan.record_count == (cut >= payload_end ? 4U : 3U));
        CHECK_FALSE(scan.segment_complete());
        CHECK(read_all(zeroed).size() == (cut >= payload_end ? 4U : 3U));

        // Stale bytes after the cut instead of zeros.
        std::vector<std::byte> stale = complete;
        std::fill(stale.begin() + static_cast<std::ptrdiff_t>(cut), stale.end(), std::byte{0xAB});
        scan = detail::scan_segment(stale, 40);
        CHECK(scan.end_position == expected_end);
        CHECK(scan.record_count == expected_count);

        // The file itself is cut short.
        scan = detail::scan_segment(std::span(complete).first(cut), 40);
        CHECK(scan.end_position == expected_end);
        CHECK(scan.record_count == expected_count);
    }
}

TEST_CASE("segment format: a flipped byte stops the scan at the damaged record and never yields a wrong payload",
          "[segment_format]")
{
    segment_builder builder(0, 256);
    builder.add("alpha");
    builder.add("");
    builder.add("gamma-gamma");
    builder.add("12345678");
    const std::uint64_t marker = builder.end_segment();
    const std::vector<std::byte> original = builder.bytes();
    std::vector<std::uint64_t> starts = builder.starts();
    starts.push_back(marker);

    for (std::uint64_t position = detail::segment_header_size; position < original.size(); ++position) {
        // The record (or marker) the damaged byte belongs to; beyond the marker nothing is read.
        const auto damaged = std::upper_bound(starts.begin(), starts.end(), position) - starts.begin() - 1;
        const bool inside_records = position < marker + detail::record_header_size;
        for (const std::byte mask : {std::byte{0x01}, std::byte{0x80}, std::byte{0xFF}}) {
            INFO("byte " << position << " xor " << std::to_integer<int>(mask));
            std::vector<std::byte> segment = original;
            segment[position] ^= mask;
            const detail::scan_result scan = detail::scan_segment(segment, 40);
            const std::vector<std::string> read = read_all(segment);
            if (inside_records) {
                CHECK(scan.end_position == starts[static_cast<std::size_t>(damaged)]);
                CHECK(scan.record_count == static_cast<std::uint64_t>(damaged));
                CHECK_FALSE(scan.segment_complete());
                CHECK(read.size() == static_cast<std::size_t>(damaged));
            } else {
                CHECK(scan.end_position == marker);
                CHECK(scan.reason == scan_stop::segment_end_marker);
                CHECK(read.size() == builder.payloads().size());
            }
            for (std::size_t index = 0; index < read.size(); ++index) {
                CHECK(read[index] == builder.payloads()[index]);
            }
        }
    }
}

TEST_CASE("segment format: the scanner names why it stopped", "[segment_format]")
{
    segment_builder builder(0, 256);
    const std::uint64_t first = builder.add("abc");
    const std::uint64_t second = builder.position();

    SECTION("a length that points past the end of the segment")
    {
        detail::store_u32_little_endian(builder.bytes().data() + second, 1000);
        const detail::scan_result scan = detail::scan_segment(builder.segment(), 40);
        CHECK(scan.end_position == second);
        CHECK(scan.reason == scan_stop::length_past_segment_end);
    }
    SECTION("non-zero padding, even with a checksum that matches the payload")
    {
        builder.bytes()[first + 8 + 3] = std::byte{1};
        const detail::scan_result scan = detail::scan_segment(builder.segment(), 40);
        CHECK(scan.end_position == first);
        CHECK(scan.reason == scan_stop::nonzero_padding);
        CHECK_FALSE(detail::read_record(builder.segment(), first).has_value());
    }
    SECTION("a bad checksum")
    {
        builder.bytes()[first + 8] ^= std::byte{0x20};
        const detail::scan_result scan = detail::scan_segment(builder.segment(), 40);
        CHECK(scan.end_position == first);
        CHECK(scan.reason == scan_stop::bad_checksum);
    }
    SECTION("a start position that is not a record boundary")
    {
        for (const std::uint64_t start : {0ULL, 8ULL, 39ULL, 44ULL, 264ULL}) {
            const detail::scan_result scan = detail::scan_segment(builder.segment(), start);
            CHECK(scan.reason == scan_stop::invalid_start_position);
            CHECK(scan.end_position == start);
            CHECK(scan.record_count == 0);
            CHECK_FALSE(detail::read_record(builder.segment(), start).has_value());
        }
    }
    SECTION("the requested stop position")
    {
        builder.add("def");
        const detail::scan_result scan = detail::scan_segment(builder.segment(), 40, second);
        CHECK(scan.end_position == second);
        CHECK(scan.record_count == 1);
        CHECK(scan.reason == scan_stop::reached_stop_position);
    }
    for (const scan_stop reason :
         {scan_stop::reached_stop_position, scan_stop::segment_end_marker, scan_stop::segment_full,
          scan_stop::zero_header, scan_stop::bad_checksum, scan_stop::length_past_segment_end,
          scan_stop::nonzero_padding, scan_stop::invalid_start_position}) {
        CHECK_FALSE(detail::describe(reason).empty());
    }
}

TEST_CASE("segment format: record boundaries are the header end and the ends of complete records", "[segment_format]")
{
    segment_builder builder(0, 256);
    builder.add("first record");
    builder.add("");
    builder.add("third");
    std::vector<std::uint64_t> boundaries = builder.starts();
    boundaries.push_back(builder.position());
    for (std::uint64_t position = 0; position <= 264; ++position) {
        const bool expected = std::find(boundaries.begin(), boundaries.end(), position) != boundaries.end();
        INFO("position " << position);
        CHECK(detail::is_record_boundary(builder.segment(), position) == expected);
    }
}

// ---- offsets and file names -----------------------------------------------------------------

TEST_CASE("segment format: logical offsets are segment index times segment size plus position", "[segment_format]")
{
    constexpr std::uint64_t size = 64ULL * 1024 * 1024;
    CHECK(detail::logical_offset(0, 40, size) == 40);
    CHECK(detail::logical_offset(3, 1000, size) == 3 * size + 1000);
    CHECK(detail::split_offset(3 * size + 1000, size) == detail::segment_position{3, 1000});
    CHECK(detail::first_record_offset(0, size) == 40);
    CHECK(detail::first_record_offset(2, size) == 2 * size + 40);

    std::vector<std::byte> segment(256);
    put_segment_header(segment, 9, 256);
    CHECK(detail::normalize_offset(segment, 9, 40, whole_log) == 9 * 256 + 40);
}

TEST_CASE("segment format: segment file names are 20 digits and .log", "[segment_format]")
{
    CHECK(detail::segment_file_name(0) == "00000000000000000000.log");
    CHECK(detail::segment_file_name(1) == "00000000000000000001.log");
    CHECK(detail::segment_file_name(18446744073709551615ULL) == "18446744073709551615.log");
    CHECK(detail::parse_segment_file_name("00000000000000000042.log") == 42U);
    CHECK(detail::parse_segment_file_name("18446744073709551615.log") == 18446744073709551615ULL);
    for (const std::string_view name :
         {"", "42.log", "0000000000000000042.log", "000000000000000000042.log", "00000000000000000042.tmp",
          "00000000000000000042.log.tmp", "0000000000000000004x.log", "18446744073709551616.log",
          "-0000000000000000042.log"}) {
        INFO("name " << name);
        CHECK_FALSE(detail::parse_segment_file_name(name).has_value());
    }
}

TEST_CASE("segment format: a flush mark holds an offset and its CRC, and a damaged mark reads as none",
          "[segment_format]")
{
    const auto mark = detail::make_flush_mark(4136);
    const std::array<unsigned char, 16> expected = {0x28, 0x10, 0, 0, 0, 0, 0, 0, 0x6F, 0x29, 0x48, 0x5F, 0, 0, 0, 0};
    for (std::size_t i = 0; i < expected.size(); ++i) {
        CHECK(std::to_integer<unsigned char>(mark[i]) == expected[i]);
    }
    CHECK(detail::read_flush_mark(mark) == std::optional<std::uint64_t>(4136));
    CHECK(detail::read_flush_mark(detail::make_flush_mark(0)) == std::optional<std::uint64_t>(0));
    CHECK_FALSE(detail::read_flush_mark(std::array<std::byte, 16>{}));  // never written: zeros
    CHECK_FALSE(detail::read_flush_mark(std::span<const std::byte>(mark.data(), 15)));
    for (std::size_t i = 0; i < mark.size(); ++i) {
        auto damaged = mark;
        damaged[i] ^= std::byte{0x01};
        INFO("byte " << i);
        CHECK_FALSE(detail::read_flush_mark(damaged));
    }
}

}  // namespace segment_format_test
