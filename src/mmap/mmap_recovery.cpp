#include "bufferqueue/mmap/detail/mmap_recovery.hpp"

#include "bufferqueue/mmap/detail/group_path.hpp"

#include "bufferqueue/detail/message.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <span>

namespace bufferqueue::detail {

namespace {

bool is_temporary(const std::string& name)
{
    return name.ends_with(temporary_suffix);
}

const mmap_segment_file& segment_at(const mmap_recovered_state& state, std::uint64_t index)
{
    return *state.segments[index - state.first_segment_index];
}

std::uint64_t last_index(const mmap_recovered_state& state)
{
    return state.first_segment_index + state.segments.size() - 1;
}

// Valid records per retained segment, oldest first, as far as recovery walked them.
using record_counts = std::vector<std::uint64_t>;

void count_records(record_counts& counts, const mmap_recovered_state& state, std::uint64_t index, std::uint64_t records)
{
    const auto slot = static_cast<std::size_t>(index - state.first_segment_index);
    if (counts.size() <= slot) {
        counts.resize(slot + 1, 0);
    }
    counts[slot] += records;
}

// Every record from earliest.offset up to producer.offset must be intact: that range was
// flushed before producer.offset advanced, so a bad checksum there is corruption, not a torn tail.
// The same holds up to the offset in flush.mark (`vouching` names the file that vouches).
// Returns the records of each segment up to `producer_offset`.
record_counts verify_vouched_range(const mmap_partition_files& files, const mmap_recovered_state& state,
                                   std::uint64_t producer_offset, const std::string& vouching)
{
    record_counts counts;
    const segment_position target = split_offset(producer_offset, files.segment_size);
    const std::string vouched = detail::format_message(", inside the range {} vouches for as flushed (up to offset {})",
                                                       vouching, producer_offset);
    if (target.segment_index > last_index(state) || target.position < segment_header_size) {
        files.corrupt(vouching, detail::format_message("holds offset {}, ahead of the log (last segment {})",
                                                       producer_offset, last_index(state)));
    }
    for (std::uint64_t index = state.first_segment_index; index <= target.segment_index; ++index) {
        const mmap_segment_file& segment = segment_at(state, index);
        const bool last = index == target.segment_index;
        const scan_result scanned =
            scan_segment(segment.region.bytes(), segment_header_size, last ? target.position : files.segment_size);
        if ((!last && !scanned.segment_complete()) || (last && scanned.end_position < target.position)) {
            files.corrupt(segment.path, detail::format_message("{} at byte {}{}", describe(scanned.reason),
                                                               scanned.end_position, vouched));
        }
        if (last && scanned.end_position != target.position) {
            files.corrupt(vouching, detail::format_message("holds offset {}, which is not a record boundary of {}",
                                                           producer_offset, segment.path));
        }
        count_records(counts, state, index, scanned.record_count);
    }
    return counts;
}

// Walks valid records forward from `from` (the end of what is known flushed) to the end of the log,
// adds them to `counts` and fills in the tail of `state` and the repairs it needs.
// One past the last nonzero byte of `bytes` at or after `from`, or `from` when they are all zero;
// compares 8 bytes at a time where it can.
std::uint64_t last_nonzero_end(std::span<const std::byte> bytes, std::uint64_t from) noexcept
{
    std::uint64_t end = bytes.size();
    while (end > from && end % 8 != 0) {
        if (bytes[end - 1] != std::byte{0}) {
            return end;
        }
        --end;
    }
    while (end >= from + 8) {
        std::uint64_t word = 0;
        std::memcpy(&word, bytes.data() + end - 8, sizeof word);
        if (word != 0) {
            break;
        }
        end -= 8;
    }
    while (end > from) {
        if (bytes[end - 1] != std::byte{0}) {
            return end;
        }
        --end;
    }
    return from;
}

void scan_to_end(const mmap_partition_files& files, mmap_recovered_state& state, std::uint64_t from,
                 record_counts& counts)
{
    segment_position at = split_offset(from, files.segment_size);
    for (;;) {
        const mmap_segment_file& segment = segment_at(state, at.segment_index);
        const std::span<const std::byte> bytes = segment.region.bytes();
        const scan_result scanned = scan_segment(bytes, at.position);
        const bool last = at.segment_index == last_index(state);
        count_records(counts, state, at.segment_index, scanned.record_count);
        if (scanned.segment_complete() && !(last && scanned.reason == scan_stop::segment_end_marker)) {
            if (last) {
                // A segment filled to its very end (no room for a marker; this writer always leaves
                // room): its successor, created by step 2, holds the next record boundary.
                state.create_successor = at.segment_index + 1;
                state.tail.tail_position = segment_header_size;
                state.tail.flushed_position = segment_header_size;
                return;
            }
            at = {at.segment_index + 1, segment_header_size};
            continue;
        }
        if (!last) {
            files.corrupt(segment.path, detail::format_message("{} at byte {}, but a later segment exists",
                                                               describe(scanned.reason), scanned.end_position));
        }
        // Known durable: up to `from` when it is in this segment (the scan started there).
        state.tail.flushed_position = at.position;
        state.tail.tail_position = scanned.end_position;
        state.tail.tail_ended = scanned.reason == scan_stop::segment_end_marker;
        // Whatever follows is zeroed by step 2, so stale bytes can never line up with a later record.
        // Only as far as the file holds data: past it the file reads as zeros (most of a segment
        // is reserved blocks never written), and reading it would fault in every page.
        const std::uint64_t cut_from = state.tail.tail_position + (state.tail.tail_ended ? record_header_size : 0);
        const std::uint64_t scan_from = std::min<std::uint64_t>(cut_from, bytes.size());
        const std::uint64_t data_ends =
            std::min<std::uint64_t>(bytes.size(), data_end(segment.file, scan_from).value_or(bytes.size()));
        state.cut_from = cut_from;
        state.cut_to = std::max(cut_from, last_nonzero_end(bytes.first(std::max(data_ends, scan_from)), scan_from));
        return;
    }
}

// The offset in flush.mark when the file exists and holds a valid mark, else nothing.
std::optional<std::uint64_t> read_flush_mark_file(const mmap_partition_files& files)
{
    std::optional<unique_fd> file = try_open_file(files.flush_mark_path(), open_mode::read_only);
    if (!file) {
        return std::nullopt;
    }
    std::array<std::byte, flush_mark_size> mark{};
    if (read_at(*file, 0, mark) != mark.size()) {
        return std::nullopt;
    }
    return read_flush_mark(mark);
}

// Validates a group's checkpoint and returns its item position.
log_position group_position(const mmap_partition_files& files, const mmap_recovered_state& state, std::uint64_t offset,
                            const std::string& path, std::uint64_t end)
{
    if (offset < state.earliest.offset) {
        files.corrupt(
            path, detail::format_message("holds offset {}, before earliest.offset {}", offset, state.earliest.offset));
    }
    if (offset > end) {
        files.corrupt(path,
                      detail::format_message("holds offset {}, ahead of the log (which ends at {})", offset, end));
    }
    const segment_position at = split_offset(offset, files.segment_size);
    if (at.position < segment_header_size) {
        files.corrupt(path, detail::format_message("holds offset {}, which is not a record boundary", offset));
    }
    if (at.segment_index > last_index(state)) {
        return {offset, state.tail.end_items};  // the first offset of the successor step 2 creates
    }
    const mmap_segment_file& segment = segment_at(state, at.segment_index);
    const scan_result scanned = scan_segment(segment.region.bytes(), segment_header_size, at.position);
    if (scanned.end_position != at.position) {
        files.corrupt(path, detail::format_message("holds offset {}, which is not a record boundary", offset));
    }
    return {offset, segment.first_item + scanned.record_count};
}

void load_groups(const mmap_partition_files& files, mmap_recovered_state& state, std::uint64_t end)
{
    const std::string offsets = files.offsets_folder();
    if (!path_exists(offsets)) {
        return;
    }
    for (const directory_entry& entry : list_directory(offsets)) {
        if (entry.kind != entry_kind::directory || is_temporary(entry.name)) {
            continue;  // a `.tmp` folder is a group whose creation was interrupted (removed by step 2)
        }
        const std::string folder = offsets + "/" + entry.name;
        std::string group;
        try {
            group = unescape_group_name(entry.name);
        } catch (const error& failure) {
            files.corrupt(folder, detail::format_message("is not the folder of a consumer group: {}", failure.what()));
        }
        const std::string path = folder + "/consumer.offset";
        const std::optional<std::uint64_t> offset = read_checkpoint(path);
        if (!offset) {
            files.corrupt(folder, "has no consumer.offset");
        }
        state.groups.emplace(std::move(group), group_position(files, state, *offset, path, end));
    }
}

// What the partition folder holds, read before anything is validated.
struct partition_listing {
    std::vector<std::uint64_t> indices;  // segment files, sorted
    bool has_groups = false;
    std::optional<std::uint64_t> earliest_checkpoint;
    std::optional<std::uint64_t> producer_checkpoint;
    std::optional<log_position> item_checkpoint;
};

partition_listing read_listing(const mmap_partition_files& files)
{
    partition_listing listing;
    if (!path_exists(files.folder)) {
        return listing;
    }
    listing.earliest_checkpoint = read_checkpoint(files.earliest_path());
    listing.item_checkpoint = read_item_position(files.earliest_items_path());
    listing.producer_checkpoint = read_checkpoint(files.producer_path());
    for (const directory_entry& entry : list_directory(files.folder)) {
        if (const auto index = parse_segment_file_name(entry.name)) {
            listing.indices.push_back(*index);
        }
    }
    std::sort(listing.indices.begin(), listing.indices.end());
    if (path_exists(files.offsets_folder())) {
        const auto entries = list_directory(files.offsets_folder());
        listing.has_groups = std::any_of(entries.begin(), entries.end(),
                                         [](const directory_entry& entry) { return !is_temporary(entry.name); });
    }
    return listing;
}

// Finds the retained range from earliest.offset, lists the leftovers below it and opens (maps and
// checks the header of) every retained segment.
void open_retained_segments(const mmap_partition_files& files, mmap_recovered_state& state, partition_listing& listing,
                            map_access access)
{
    std::vector<std::uint64_t>& indices = listing.indices;
    const std::optional<std::uint64_t>& earliest_checkpoint = listing.earliest_checkpoint;
    const std::optional<std::uint64_t>& producer_checkpoint = listing.producer_checkpoint;
    // earliest.offset is the first record boundary of the oldest retained segment (0: segment 0).
    std::uint64_t first_index = 0;
    if (earliest_checkpoint && *earliest_checkpoint != 0) {
        const segment_position at = split_offset(*earliest_checkpoint, files.segment_size);
        if (at.position != segment_header_size) {
            files.corrupt(
                files.earliest_path(),
                detail::format_message("holds offset {}, which is not the start of a segment", *earliest_checkpoint));
        }
        first_index = at.segment_index;
    }
    state.earliest.offset = first_record_offset(first_index, files.segment_size);
    if (producer_checkpoint && *producer_checkpoint < state.earliest.offset) {
        files.corrupt(files.earliest_path(),
                      detail::format_message("holds offset {}, greater than offset {} in {}", state.earliest.offset,
                                             *producer_checkpoint, files.producer_path()));
    }

    // Segments below the earliest one are leftovers of an interrupted deletion, removed by step 2.
    for (const std::uint64_t index : indices) {
        if (index < first_index) {
            state.leftovers.push_back(index);
        }
    }
    std::erase_if(indices, [first_index](std::uint64_t index) { return index < first_index; });
    if (indices.empty() || indices.front() != first_index) {
        files.corrupt(files.segment_path(first_index),
                      detail::format_message("is missing, but {} says it is retained", files.earliest_path()));
    }
    state.first_segment_index = first_index;
    for (std::size_t i = 0; i < indices.size(); ++i) {
        if (indices[i] != first_index + i) {
            files.corrupt(files.segment_path(first_index + i),
                          detail::format_message("is missing inside the retained range (segments {} to {})",
                                                 first_index, indices.back()));
        }
        state.segments.push_back(open_mmap_segment(files, indices[i], access));
    }
}

// The item index of the record at earliest.offset, from earliest.items (`stored`). Retention writes
// that file before it moves earliest.offset, so it may be ahead: then the records of the segments
// still retained before it are counted back. A file behind earliest.offset (an earlier release's
// retention ran since) gives a lower bound, and a missing one 0.
std::uint64_t earliest_item_index(const mmap_partition_files& files, const mmap_recovered_state& state,
                                  const std::optional<log_position>& stored, const record_counts& counts)
{
    if (!stored) {
        return 0;
    }
    if (stored->offset <= state.earliest.offset) {
        return stored->items;
    }
    const std::string path = files.earliest_items_path();
    const segment_position at = split_offset(stored->offset, files.segment_size);
    if (at.position != segment_header_size || at.segment_index > last_index(state)) {
        files.corrupt(path, detail::format_message("holds offset {}, which is not the start of a retained segment",
                                                   stored->offset));
    }
    std::uint64_t before = 0;
    for (std::uint64_t index = state.first_segment_index; index < at.segment_index; ++index) {
        before += counts[static_cast<std::size_t>(index - state.first_segment_index)];
    }
    if (before > stored->items) {
        files.corrupt(
            path, detail::format_message("holds item index {} at offset {}, but {} retained records lie before that "
                                         "offset",
                                         stored->items, stored->offset, before));
    }
    return stored->items - before;
}

// Gives every retained segment its first item index and the tail the partition's end.
void number_segments(mmap_recovered_state& state, const record_counts& counts)
{
    std::uint64_t items = state.earliest.items;
    for (std::size_t slot = 0; slot < state.segments.size(); ++slot) {
        state.segments[slot]->first_item = items;
        items += slot < counts.size() ? counts[slot] : 0;
    }
    state.tail.end_items = items;
}

}  // namespace

mmap_recovered_state recover_mmap_partition(const mmap_partition_files& files, map_access access)
{
    mmap_recovered_state state;
    partition_listing listing = read_listing(files);
    const std::optional<std::uint64_t>& producer_checkpoint = listing.producer_checkpoint;
    if (listing.indices.empty()) {
        if (listing.earliest_checkpoint || producer_checkpoint || listing.item_checkpoint || listing.has_groups) {
            files.corrupt(files.folder,
                          detail::format_message("holds checkpoints but no segment file ({} or later is missing)",
                                                 segment_file_name(0)));
        }
        state.new_partition = true;
        state.tail.tail_position = segment_header_size;
        state.tail.flushed_position = segment_header_size;
        state.earliest = {first_record_offset(0, files.segment_size), 0};
        return state;
    }

    open_retained_segments(files, state, listing, access);

    // Every retained record is walked once here (twice up to producer.offset when flush.mark vouches
    // for more), and counted on the way.
    record_counts counts;
    std::uint64_t scan_from = state.earliest.offset;
    if (producer_checkpoint) {
        counts = verify_vouched_range(files, state, *producer_checkpoint, files.producer_path());
        scan_from = *producer_checkpoint;
    }
    // flush.mark may vouch for more (a mark older than a later retention is below earliest.offset).
    if (const auto mark = read_flush_mark_file(files); mark && *mark > scan_from) {
        counts = verify_vouched_range(files, state, *mark, files.flush_mark_path());
        scan_from = *mark;
    }
    scan_to_end(files, state, scan_from, counts);
    state.earliest.items = earliest_item_index(files, state, listing.item_checkpoint, counts);
    number_segments(state, counts);
    const std::uint64_t tail_index = state.create_successor.value_or(last_index(state));
    load_groups(files, state, logical_offset(tail_index, state.tail.tail_position, files.segment_size));
    state.tail.checkpointed_offset = producer_checkpoint.value_or(0);
    return state;
}

}  // namespace bufferqueue::detail
