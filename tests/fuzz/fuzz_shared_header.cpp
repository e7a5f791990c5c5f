// libFuzzer target: the shared header of a process-shared topic (`{topic}/shared.header`, see
// docs/mmap-format.md, "Shared header"), as a process that did not make it opens and uses it. The
// input is the file. The header is opened with the options it holds (as a later opener with the same
// options would), then for each partition (up to 8) the slot's shared log state is checked as the
// writers check it before they use it, its append lock is taken (without waiting) and given back,
// and partition 0's repair after a dead holder runs against a real segment 0. Only
// `bufferqueue::error` may come out: corrupt_data for the file, timed_out or io_error for a lock held
// or unusable, io_error for a segment the slot names that does not exist. A state the check lets
// through must keep every position inside the segments. Never a crash, a hang, a write outside the
// folder.
#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/mmap_segment_file.hpp"
#include "bufferqueue/mmap/detail/segment_format.hpp"
#include "bufferqueue/mmap/detail/shared_append.hpp"
#include "bufferqueue/mmap/detail/shared_topic_header.hpp"

#include "fuzz_support.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace {

namespace bq = bufferqueue;
namespace detail = bufferqueue::detail;
namespace fs = std::filesystem;

using bq::fuzz::require;

// Segment sizes up to this get a real segment 0 for the repair (larger ones are not worth the time).
constexpr std::uint64_t max_repaired_segment_size = 64 * 1024;

fs::path scratch_folder()
{
    const fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    return base / ("bufferqueue-fuzz-shared-header-" + std::to_string(::getpid()));
}

void write_file(const std::string& path, std::span<const std::byte> bytes)
{
    const detail::unique_fd file = detail::open_file(path, detail::open_mode::create_or_truncate);
    if (!bytes.empty()) {
        detail::write_at(file, 0, bytes);
    }
}

// What the writers rely on in a state the check let through.
void require_usable(const detail::shared_log_state& state, detail::log_position retained, std::uint64_t segment_size)
{
    require(state.tail_segment < std::numeric_limits<std::uint64_t>::max() / segment_size,
            "a tail segment whose logical offsets overflow passed the check");
    const std::uint64_t marker = state.tail_ended != 0 ? 0 : detail::record_header_size;
    require(state.tail_position >= detail::segment_header_size && state.tail_position + marker <= segment_size,
            "a tail position outside the segment passed the check");
    require(state.pending_end >= state.tail_position && state.pending_end <= segment_size,
            "a pending end outside the segment passed the check");
    const std::uint64_t tail_end = detail::logical_offset(state.tail_segment, state.tail_position, segment_size);
    require(state.published_end <= tail_end && retained.offset <= tail_end,
            "a published or retained end past the tail passed the check");
    require(state.published_items <= state.items && state.flushed_items <= state.items && retained.items <= state.items,
            "more records published, flushed or retained than appended passed the check");
}

void require_expected(const bq::error& failure, std::initializer_list<bq::errc> codes)
{
    require(std::find(codes.begin(), codes.end(), static_cast<bq::errc>(failure.code().value())) != codes.end(),
            failure.what());
    require(std::string(failure.what()).size() > 0, "an error without a message");
}

// How check_shared_header refuses `bytes` (its contract): a version 1 header - the magic, then version
// 1, in a whole header - is `invalid_argument` (a process of an older bufferqueue has the topic open),
// anything else it does not accept `corrupt_data`.
void require_refusal(const bq::error& failure, std::span<const std::byte> bytes)
{
    constexpr std::array<char, 8> magic = {'B', 'Q', 'S', 'H', 'A', 'R', 'E', '\0'};
    std::uint32_t version = 0;
    const bool whole = bytes.size() >= detail::shared_header_layout::header_size;
    if (whole) {
        std::memcpy(&version, bytes.data() + magic.size(), sizeof version);
    }
    if (whole && std::memcmp(bytes.data(), magic.data(), magic.size()) == 0 && version == 1) {
        require_expected(failure, {bq::errc::invalid_argument});
    } else {
        bq::fuzz::require_corrupt_data(failure);
    }
}

// The slots of an opened header: check each state, take and give back each lock, repair partition 0.
void use_slots(const detail::shared_topic_header& header, const detail::shared_header_fields& fields,
               const fs::path& folder)
{
    const std::uint64_t segment_size = fields.segment_size;
    for (std::uint64_t partition = 0; partition < std::min<std::uint64_t>(fields.partitions, 8); ++partition) {
        const detail::shared_log_slot slot = header.log_slot(partition);
        const detail::shared_log_state state = slot.load();
        const detail::log_position retained = slot.retained_from();
        try {
            detail::check_shared_log_state(state, retained, segment_size, "fuzz partition", header.path());
            require_usable(state, retained, segment_size);
        } catch (const bq::error& failure) {
            require_expected(failure, {bq::errc::corrupt_data});
        }
        if (const auto written = slot.written_end_in(state.tail_segment, segment_size)) {
            require(*written - detail::logical_offset(state.tail_segment, 0, segment_size) <= segment_size,
                    "a written end past the segment");
        }
        try {
            auto lock = header.append_lock(partition);
            lock.lock(std::chrono::nanoseconds::zero());  // held by "someone": a timed_out at once
            lock.unlock();
        } catch (const bq::error& failure) {
            require_expected(failure, {bq::errc::timed_out, bq::errc::io_error});
        }
    }
    if (segment_size > max_repaired_segment_size) {
        return;
    }
    const detail::mmap_partition_files files{.description = "fuzz partition 0",
                                             .folder = (folder / "partition-00000").string(),
                                             .segment_size = segment_size};
    fs::create_directories(files.folder);
    const auto segment = detail::create_mmap_segment(files, 0, segment_size, 0);
    try {
        detail::repair_shared_tail(files, header.log_slot(0), header.path());
    } catch (const bq::error& failure) {
        require_expected(failure, {bq::errc::corrupt_data, bq::errc::io_error});
    }
    require(!detail::validate_segment_header(segment->region.bytes(), 0, segment_size),
            "the repair wrote into segment 0's header");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    static const fs::path base = scratch_folder();
    const fs::path folder = base / "topic";
    fs::remove_all(base);
    fs::create_directories(folder);
    const std::string path = (folder / std::string(detail::shared_header_layout::file_name)).string();
    write_file(path, bq::fuzz::as_bytes(data, size));

    // A copy: the state word is read atomically, which takes an aligned word.
    const std::vector<std::byte> header(reinterpret_cast<const std::byte*>(data),
                                        reinterpret_cast<const std::byte*>(data) +
                                            std::min<std::size_t>(size, detail::shared_header_layout::header_size));
    detail::shared_header_fields fields;
    try {
        fields = detail::check_shared_header(header, size, path);
    } catch (const bq::error& failure) {
        require_refusal(failure, header);
    }
    // As a later opener with the options the header holds, or (when it is refused) with some.
    const detail::shared_topic_options options{
        .partitions = fields.partitions == 0 ? 1 : fields.partitions,
        .segment_size = fields.segment_size == 0 ? 4096 : fields.segment_size,
        .max_retained_consumed_segments =
            fields.retention == 0 ? std::nullopt : std::optional<std::size_t>(fields.retention - 1),
        .serializer_name = fields.serializer_name};
    try {
        const detail::shared_topic_header header("fuzz", folder.string(), options, false);
        require(fields.partitions != 0, "a header check_shared_header refuses was opened");
        use_slots(header, fields, folder);
    } catch (const bq::error& failure) {
        require_refusal(failure, header);
    }
    // Nothing was made outside the topic folder.
    for (const auto& entry : fs::directory_iterator(base)) {
        require(entry.path() == folder, "a file was made outside the topic folder");
    }
    return 0;
}
