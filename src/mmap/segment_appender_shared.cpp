// segment_appender (segment_appender.hpp), its process-shared part: storing its tail into the slot,
// the `batch` flush with the append lock let go, and taking over the tail other processes moved
// (mapping the segments they created, dropping those their retention released). Appending itself is
// in segment_appender.cpp (one file would pass the 400-line limit).
#include "bufferqueue/mmap/detail/segment_appender.hpp"

#include "bufferqueue/detail/message.hpp"

#include <utility>

namespace bufferqueue::detail {

// Process-shared logs: this appender's tail as the slot stores it; `pending_end` is where the record
// being written ends (what a writer that dies now may leave torn).
shared_log_state segment_appender::shared_state(std::uint64_t pending_end) const noexcept
{
    return {.tail_segment = tail_->index,
            .tail_position = tail_position_,
            .tail_first_item = tail_->first_item,
            .items = items_,
            .tail_ended = tail_ended_ ? 1U : 0U,
            .pending_end = pending_end,
            .flushed_end = logical_offset(tail_->index, flushed_position_, files_.segment_size),
            .flushed_items = flushed_items_,
            .published_end = published_end(),
            .published_items = end_items()};
}

void segment_appender::store_shared(std::uint64_t pending_end) noexcept
{
    if (shared_.active() && tail_ != nullptr) {
        shared_.store(shared_state(pending_end));
    }
}

void segment_appender::initialize_shared(log_position retained_from)
{
    shared_.initialize(shared_state(tail_position_), retained_from, published_end());
}

void segment_appender::publish_shared(const shared_log_state& state) noexcept
{
    published_items_.store(state.published_items, std::memory_order_release);
    published_end_.store(state.published_end, std::memory_order_release);
}

// The `batch` flush of a shared log: the msync of the tail's pending bytes runs with the shared
// append lock let go, so the other processes append meanwhile (the writer's mutex stays held:
// nothing in this process unmaps the segment). Taking the lock again adopts what they did; the
// flushed end moves only if no other process's flush or rollover covered more meanwhile. A failed
// msync throws its `io_error` with the lock taken again.
void segment_appender::flush_batch_shared(shared_hold& hold)
{
    unflushed_records_ = 0;
    const std::uint64_t from = flushed_position_;
    const std::uint64_t to = tail_position_;
    if (to <= from) {
        return;
    }
    const std::uint64_t items = items_;
    const std::uint64_t segment_index = tail_->index;
    mmap_segment_file& segment = *tail_;
    hold.release();
    try {
        segment.region.flush(from, to - from);
    } catch (...) {
        hold.acquire();
        throw;
    }
    hold.acquire();
    if (tail_->index == segment_index) {
        flushed_tail(to, items);
    }
    write_producer_hint_if_due();
}

// Takes the shared append lock (which checks the slot and repairs after a dead holder), then adopts.
void segment_appender::lock_shared()
{
    const shared_log_state state = shared_.lock();
    try {
        adopt(state);
    } catch (...) {
        shared_.abandon();
        throw;
    }
}

void segment_appender::unlock_shared() noexcept
{
    store_shared(tail_position_);
    shared_.unlock(published_end());
}

// Takes over the log's tail as the slot describes it (another process may have appended, rolled
// over or flushed since this appender last held the lock).
void segment_appender::adopt(const shared_log_state& state)
{
    if (state.tail_segment < tail_->index) {
        throw error(
            errc::corrupt_data,
            detail::format_message("{}: the topic's shared header names segment {} as the tail, but this process "
                                   "already appends to segment {}",
                                   files_.description, state.tail_segment, tail_->index));
    }
    const log_position start = shared_.retained_from();
    if (state.tail_segment > tail_->index) {
        const std::uint64_t start_segment = split_offset(start.offset, files_.segment_size).segment_index;
        if (start_segment > tail_->index) {
            // Another process's retention deleted every segment this process has mapped (it did
            // not follow the appends meanwhile): map the log again from where it is retained.
            auto first = open_mmap_segment(files_, start_segment);
            first->first_item = start.items;
            commit_.keep_mapped(segments_.restart_at(std::move(first)));
            tail_ = &segments_.last();  // map_segments_up_to goes on from here
        }
        map_segments_up_to(state.tail_segment, state.tail_first_item);
        tail_ = &segments_.last();
        flushed_position_ = segment_header_size;
        flushed_items_ = state.tail_first_item;
    }
    tail_position_ = state.tail_position;
    items_ = state.items;
    tail_ended_ = state.tail_ended != 0;
    const segment_position flushed = split_offset(state.flushed_end, files_.segment_size);
    if (flushed.segment_index == tail_->index && flushed.position > flushed_position_) {
        flushed_position_ = flushed.position;
        flushed_items_ = state.flushed_items;
    }
    shared_.adopted(state.published_end);
    adopt_retained_from(start);
}

// Drops this process's mappings of the segments another process's retention released (their files
// are deleted, or about to be); the tail is never among them.
void segment_appender::adopt_retained_from(log_position start)
{
    if (start.offset <= shared_.retained_offset()) {
        return;  // the usual case: no retention since this appender last held the lock
    }
    const std::uint64_t start_segment = split_offset(start.offset, files_.segment_size).segment_index;
    if (start_segment > tail_->index) {
        return;  // the tail is always retained; a slot that says otherwise is left to recovery
    }
    std::uint64_t first_index = 0;
    {
        const auto lock = segments_.share();
        first_index = segments_.first_index();
    }
    if (start_segment > first_index) {
        commit_.keep_mapped(segments_.release_below(start_segment));
    }
    shared_.follow_retained_from(start);
}

// Maps the segments after the tail up to `index`, which other processes created (each exists: a
// rollover creates the file before it stores the new tail). The first item of a segment between the
// two is counted from its predecessor's records.
void segment_appender::map_segments_up_to(std::uint64_t index, std::uint64_t tail_first_item)
{
    for (std::uint64_t next = tail_->index + 1; next <= index; ++next) {
        auto segment = open_mmap_segment(files_, next);
        if (next == index) {
            segment->first_item = tail_first_item;
        } else {
            const mmap_segment_file& previous = segments_.last();
            segment->first_item =
                previous.first_item + scan_segment(previous.region.bytes(), segment_header_size).record_count;
        }
        segments_.append(std::move(segment));
        tail_ = &segments_.last();
    }
}

}  // namespace bufferqueue::detail
