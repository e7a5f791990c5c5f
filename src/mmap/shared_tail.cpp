// The tail of a process-shared log handed between the processes' writers (shared_tail.hpp): taking
// it over as the slot says under the append lock (mapping the segments other processes created,
// dropping those their retention released), handing it back, and the `batch` flush with the append
// lock let go.
#include "bufferqueue/mmap/detail/shared_tail.hpp"

#include "bufferqueue/detail/message.hpp"

#include <utility>

namespace bufferqueue::detail {

void shared_tail::initialize(log_position retained_from)
{
    shared_.initialize(appender_.tail_state(), retained_from, appender_.published_end());
}

void shared_tail::join()
{
    // The hold repairs what a writer that died holding the lock left and adopts the slot (the
    // partition was recovered under the lock, so the slot's tail is this tail or a later one).
    const hold held(*this);
    // What the other processes published, also when recovery found more (records of an `immediate`
    // append whose msync is still running are not published yet).
    appender_.publish_at(shared_.load_checked());
}

void shared_tail::lock()
{
    const shared_log_state state = shared_.lock();
    try {
        adopt(state);
    } catch (...) {
        shared_.abandon();
        throw;
    }
}

void shared_tail::unlock() noexcept
{
    appender_.store_tail();
    shared_.unlock(appender_.published_end());
}

void shared_tail::flush_batch(hold& held)
{
    if (!active()) {
        appender_.flush_locked(false);
        return;
    }
    const group_commit::flush_range range = appender_.take_unflushed();
    if (range.to <= range.from) {
        return;
    }
    held.release();
    try {
        range.segment->region.flush(range.from, range.to - range.from);
    } catch (...) {
        held.acquire();
        throw;
    }
    held.acquire();
    // Unless another process rolled the tail over meanwhile (its rollover flushed the whole segment).
    appender_.flushed(range);
}

// Takes over the log's tail as the slot describes it (another process may have appended, rolled
// over or flushed since this process last held the lock).
void shared_tail::adopt(const shared_log_state& state)
{
    const std::uint64_t tail_index = appender_.tail_index();
    if (state.tail_segment < tail_index) {
        throw error(
            errc::corrupt_data,
            detail::format_message("{}: the topic's shared header names segment {} as the tail, but this process "
                                   "already appends to segment {}",
                                   files_.description, state.tail_segment, tail_index));
    }
    const log_position start = shared_.retained_from();
    const bool rolled_over = state.tail_segment > tail_index;
    if (rolled_over) {
        const std::uint64_t start_segment = split_offset(start.offset, files_.segment_size).segment_index;
        if (start_segment > tail_index) {
            // Another process's retention deleted every segment this process has mapped (it did
            // not follow the appends meanwhile): map the log again from where it is retained.
            auto first = open_mmap_segment(files_, start_segment);
            first->first_item = start.items;
            commit_.keep_mapped(segments_.restart_at(std::move(first)));
            appender_.follow_last_segment();  // map_segments_up_to goes on from here
        }
        map_segments_up_to(state.tail_segment, state.tail_first_item);
    }
    appender_.take_over(state, rolled_over);
    shared_.adopted(state.published_end);
    adopt_retained_from(start);
}

// Drops this process's mappings of the segments another process's retention released (their files
// are deleted, or about to be); the tail is never among them.
void shared_tail::adopt_retained_from(log_position start)
{
    if (start.offset <= shared_.retained_offset()) {
        return;  // the usual case: no retention since this process last held the lock
    }
    const std::uint64_t start_segment = split_offset(start.offset, files_.segment_size).segment_index;
    if (start_segment > appender_.tail_index()) {
        return;  // the tail is always retained; a slot that says otherwise is left to recovery
    }
    std::uint64_t first_index = 0;
    {
        const auto list_lock = segments_.share();
        first_index = segments_.first_index();
    }
    if (start_segment > first_index) {
        commit_.keep_mapped(segments_.release_below(start_segment));
    }
    shared_.follow_retained_from(start);
}

// Maps the segments after the tail up to `index`, which other processes created (each exists: a
// rollover creates the file before it stores the new tail), the appender following each. The first
// item of a segment between the two is counted from its predecessor's records.
void shared_tail::map_segments_up_to(std::uint64_t index, std::uint64_t tail_first_item)
{
    for (std::uint64_t next = appender_.tail_index() + 1; next <= index; ++next) {
        auto segment = open_mmap_segment(files_, next);
        if (next == index) {
            segment->first_item = tail_first_item;
        } else {
            const mmap_segment_file& previous = segments_.last();
            segment->first_item =
                previous.first_item + scan_segment(previous.region.bytes(), segment_header_size).record_count;
        }
        segments_.append(std::move(segment));
        appender_.follow_last_segment();
    }
}

}  // namespace bufferqueue::detail
