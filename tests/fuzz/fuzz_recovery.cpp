// libFuzzer target: recovery of a partition folder built from the input. The input holds a flags
// byte, a producer.offset and a consumer.offset value and the bodies of up to two 256-byte segments
// (behind valid headers, or with the input's own header bytes when a flag says so). Opening the
// partition must either fail with corrupt_data or succeed; a group reads records until the end,
// and when no checkpoint vouches for anything, what it reads is exactly the prefix of valid records
// an independent walk of the segments finds. Never a crash, a hang or a wrong item.
#include "bufferqueue/mmap/detail/mmap_partition.hpp"

#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/segment_format.hpp"

#include "fuzz_support.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace {

namespace bq = bufferqueue;
namespace detail = bufferqueue::detail;
namespace fs = std::filesystem;

constexpr std::uint64_t segment_size = 256;

struct bytes_serializer {
    void serialize(const std::string& item, std::vector<std::byte>& out) const
    {
        const auto* first = reinterpret_cast<const std::byte*>(item.data());
        out.insert(out.end(), first, first + item.size());
    }
    std::string deserialize(std::span<const std::byte> bytes) const
    {
        return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    }
};

fs::path scratch_folder()
{
    const fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    return base / ("bufferqueue-fuzz-recovery-" + std::to_string(::getpid()));
}

void write_file(const std::string& path, std::span<const std::byte> bytes)
{
    const detail::unique_fd file = detail::open_file(path, detail::open_mode::create_or_truncate);
    detail::write_at(file, 0, bytes);
}

void write_u64(const std::string& path, std::uint64_t value)
{
    std::array<std::byte, 8> bytes{};
    detail::store_u64_little_endian(bytes.data(), value);
    write_file(path, bytes);
}

// The payloads a reader must see when nothing vouches for any record: valid records from the
// first record boundary of segment 0, continuing into segment 1 after a complete segment 0.
std::vector<std::string> expected_prefix(const std::vector<std::vector<std::byte>>& segments)
{
    std::vector<std::string> payloads;
    for (std::size_t index = 0; index < segments.size(); ++index) {
        if (detail::validate_segment_header(segments[index], index, segment_size)) {
            break;
        }
        std::uint64_t position = detail::segment_header_size;
        while (const auto record = detail::read_record(segments[index], position)) {
            payloads.emplace_back(reinterpret_cast<const char*>(record->payload.data()), record->payload.size());
            position = record->next_position;
        }
        if (!detail::is_segment_end(segments[index], position)) {
            break;
        }
    }
    return payloads;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    using bq::fuzz::require;
    if (size < 5) {
        return 0;
    }
    static const fs::path folder = scratch_folder();
    fs::remove_all(folder);
    fs::create_directories(folder);
    const std::uint8_t flags = data[0];
    const std::uint64_t producer_offset = std::uint64_t{data[1]} | std::uint64_t{data[2]} << 8;
    const std::uint64_t group_offset = std::uint64_t{data[3]} | std::uint64_t{data[4]} << 8;
    const auto input = bq::fuzz::as_bytes(data + 5, size - 5);

    // Segment bodies from the input; with flag 0x04 the input supplies the headers too.
    const bool raw_headers = (flags & 0x04) != 0;
    const std::size_t body = raw_headers ? segment_size : segment_size - detail::segment_header_size;
    std::vector<std::vector<std::byte>> segments;
    for (std::size_t index = 0; index < 2 && (index == 0 || input.size() > body); ++index) {
        std::vector<std::byte> segment(segment_size);
        if (!raw_headers) {
            const auto header = detail::make_segment_header(index, segment_size);
            std::copy(header.begin(), header.end(), segment.begin());
        }
        const std::size_t from = index * body;
        const std::size_t count = from < input.size() ? std::min(body, input.size() - from) : 0;
        std::copy_n(input.begin() + static_cast<std::ptrdiff_t>(from), count,
                    segment.begin() + static_cast<std::ptrdiff_t>(segment_size - body));
        segments.push_back(std::move(segment));
    }
    for (std::size_t index = 0; index < segments.size(); ++index) {
        write_file((folder / detail::segment_file_name(index)).string(), segments[index]);
    }
    if ((flags & 0x01) != 0) {
        write_u64((folder / "producer.offset").string(), producer_offset);
    }
    if ((flags & 0x02) != 0) {
        fs::create_directories(folder / "offsets" / "g");
        write_u64((folder / "offsets" / "g" / "consumer.offset").string(), group_offset);
    }

    try {
        detail::mmap_partition<std::string> partition({.topic = "fuzz",
                                                       .partition = 0,
                                                       .folder = folder.string(),
                                                       .segment_size = segment_size,
                                                       .flush = bq::flush_strategy::immediate,
                                                       .flush_batch_size = 4,
                                                       .max_retained_consumed_segments = std::nullopt,
                                                       .serializer = bytes_serializer{}});
        auto& cursor = partition.open_cursor("g");
        std::vector<std::string> read;
        for (int pulls = 0; pulls < 1000; ++pulls) {
            const bq::pull_result<std::string> pulled = partition.pull(cursor, 7);
            if (pulled.items.empty()) {
                break;
            }
            read.insert(read.end(), pulled.items.begin(), pulled.items.end());
            partition.commit(cursor, pulled.next_offset);
        }
        require(!partition.has_data(cursor), "a group stopped reading before the end of the log");
        if ((flags & 0x03) == 0) {
            require(read == expected_prefix(segments), "recovery did not yield exactly the prefix of valid records");
        }
        // The recovered partition accepts new records behind what it kept.
        const std::string item = "appended";
        std::size_t appended = 0;
        partition.append(bq::item_source<std::string>{.base = &item, .count = 1}, appended);
        const bq::pull_result<std::string> after = partition.pull(cursor, 7);
        require(after.items.size() == 1 && after.items[0] == item, "a record appended after recovery reads wrong");
    } catch (const bq::error& failure) {
        bq::fuzz::require_corrupt_data(failure);
    }
    return 0;
}
