// mmap_log_writer, part three: sharing the log with the writers of other processes (process-shared
// topics). The shared state lives in the partition's slot of the shared header (shared_log_slot.hpp);
// each writer adopts it when it takes the partition's append lock and stores its own back after
// every record, rollover and flush. See docs/mmap-storage.md, "Process-shared topics".
#include "bufferqueue/mmap/detail/mmap_log_writer.hpp"

#include "bufferqueue/detail/message.hpp"

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <utility>

namespace bufferqueue::detail {

void mmap_log_writer::share(shared_log_link link, bool first, log_position retained_from)
{
    shared_.emplace(std::move(link));
    const std::unique_lock lock(mutex_);
    if (first) {
        // The recovered state is the log's: nobody else has the folder open, and the header (with
        // its lock) was made anew.
        shared_->lock.lock();
        store_retained_from(retained_from);
        store_shared(tail_position_);
        shared_published_ = published_end();
        shared_->lock.unlock();
        return;
    }
    // The hold repairs what a writer that died holding the lock left and adopts the slot (the
    // partition was recovered under the lock, so the slot's tail is this tail or a later one).
    const shared_hold hold(*this);
    // What the other processes published, also when recovery found more (records of an `immediate`
    // append whose msync is still running are not published yet).
    const shared_log_state state = shared_->slot.load();
    check_shared_log_state(state, shared_->slot.retained_from(), files_.segment_size, files_.description,
                           shared_->header_path);
    published_items_.store(state.published_items, std::memory_order_release);
    published_end_.store(state.published_end, std::memory_order_release);
}

log_position mmap_log_writer::retained_from() const noexcept
{
    return shared_ ? shared_->slot.retained_from() : log_position{};
}

void mmap_log_writer::store_retained_from(log_position start) noexcept
{
    if (shared_) {
        retained_moved_ = retained_moved_ || start.offset > shared_->slot.retained_from().offset;
        shared_->slot.store_retained_from(start);
        retained_items_.store(start.items, std::memory_order_release);
        retained_offset_.store(start.offset, std::memory_order_release);
    }
}

void mmap_log_writer::flush_shared_for_close() noexcept
{
    if (!shared_ || segments_.closed()) {
        return;
    }
    try {
        const shared_hold hold(*this);
        flush_locked(true);
    } catch (...) {
        // Closing releases resources whatever happens; the next open recovers from disk.
    }
}

// The `batch` flush of a shared log: the msync of the tail's pending bytes runs with the shared
// append lock let go, so the other processes append meanwhile (mutex_ stays held: nothing in this
// process unmaps the segment). Taking the lock again adopts what they did; the flushed end moves only
// if no other process's flush or rollover covered more meanwhile. A failed msync throws its
// `io_error` with the lock taken again.
void mmap_log_writer::flush_batch_shared(shared_hold& hold)
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
    if (producer_hint_due()) {
        write_producer_hint();
    }
}

bool mmap_log_writer::refresh() noexcept
{
    try {
        // Without any lock first: nothing to do unless another process published more (the own
        // process's appends, which wake this process's watcher too, are published already) or
        // released segments.
        if (!shared_ || (shared_->slot.published_end() <= published_end() &&
                         shared_->slot.retained_from_offset() <= retained_offset_.load(std::memory_order_acquire))) {
            return false;
        }
        const std::unique_lock lock(mutex_);
        if (segments_.closed()) {
            return false;
        }
        const std::uint64_t before = published_end();
        const shared_hold hold(*this);
        publish();
        return published_end() != before;
    } catch (...) {
        return false;
    }
}

// Takes the shared append lock; repairs what a writer that died holding it left; adopts the state.
void mmap_log_writer::lock_shared()
{
    const bool owner_died = shared_->lock.lock();
    try {
        const shared_log_state state = shared_->slot.load();
        check_shared_log_state(state, shared_->slot.retained_from(), files_.segment_size, files_.description,
                               shared_->header_path);
        if (owner_died) {
            repair_shared_tail(files_, shared_->slot, shared_->header_path);
        }
        adopt(state);
    } catch (...) {
        shared_->lock.unlock();
        throw;
    }
}

void mmap_log_writer::unlock_shared() noexcept
{
    store_shared(tail_position_);
    const bool published = shared_published_ < published_end();
    shared_published_ = std::max(shared_published_, published_end());
    shared_->lock.unlock();
    const bool released = std::exchange(retained_moved_, false);
    if ((published && shared_->slot.take_consumer_waiting()) || released) {
        // The other processes' watchers publish it to their consumers, or drop released segments.
        shared_->wake.notify();
    }
}

void mmap_log_writer::note_consumer_waiting() const noexcept
{
    if (!shared_) {
        return;
    }
    shared_->slot.mark_consumer_waiting();
    // Published by another process before the mark: no append will notify for it, so wake this
    // process's watcher now.
    if (shared_->slot.published_end() > published_end()) {
        process_shared_event wake = shared_->wake;  // a view: notifying changes the shared word only
        wake.notify();
    }
}

// Stores this writer's state into the slot (under the shared lock); `pending_end` is where the
// record being written ends (what a writer that dies now may leave torn). The flushed and published
// ends only ever grow.
void mmap_log_writer::store_shared(std::uint64_t pending_end) noexcept
{
    if (!shared_ || tail_ == nullptr) {
        return;
    }
    shared_log_state state = shared_->slot.load();
    state.tail_segment = tail_->index;
    state.tail_position = tail_position_;
    state.tail_first_item = tail_->first_item;
    state.items = items_;
    state.tail_ended = tail_ended_ ? 1 : 0;
    state.pending_end = pending_end;
    const std::uint64_t flushed_end = logical_offset(tail_->index, flushed_position_, files_.segment_size);
    if (flushed_end > state.flushed_end) {
        state.flushed_end = flushed_end;
        state.flushed_items = flushed_items_;
    }
    const std::uint64_t published = published_end();
    if (published > state.published_end) {
        state.published_end = published;
        state.published_items = end_items();
    }
    shared_->slot.store(state);
    // The record's bytes are written only after the pending end is stored: a writer killed between
    // the two leaves nothing the next holder does not zero.
    std::atomic_signal_fence(std::memory_order_seq_cst);
}

// A record was written: a leader of another process gathering records for its msync re-checks.
void mmap_log_writer::notify_gathering_leader() const noexcept
{
    if (shared_ && shared_->slot.gathering()) {
        process_shared_event flushed = shared_->slot.flush_event();  // a view
        flushed.notify();
    }
}

// Takes over the log's tail as the slot describes it (another process may have appended, rolled
// over or flushed since this writer last held the lock).
void mmap_log_writer::adopt(const shared_log_state& state)
{
    if (state.tail_segment < tail_->index) {
        throw error(
            errc::corrupt_data,
            detail::format_message("{}: the topic's shared header names segment {} as the tail, but this process "
                                   "already appends to segment {}",
                                   files_.description, state.tail_segment, tail_->index));
    }
    const log_position start = shared_->slot.retained_from();
    if (state.tail_segment > tail_->index) {
        const std::uint64_t start_segment = split_offset(start.offset, files_.segment_size).segment_index;
        if (start_segment > tail_->index) {
            // Another process's retention deleted every segment this process has mapped (it did
            // not follow the appends meanwhile): map the log again from where it is retained.
            auto first = open_mmap_segment(files_, start_segment);
            first->first_item = start.items;
            retire(segments_.restart_at(std::move(first)));
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
    shared_published_ = std::max(shared_published_, state.published_end);
    adopt_retained_from(start);
}

// Unmaps segments another process's retention released, unless a leader of this process msyncs
// without mutex_ now: it may msync one of them (its records, flushed and published by another
// process meanwhile, were committed past), so they stay mapped until lead_flush ends.
void mmap_log_writer::retire(std::vector<std::unique_ptr<mmap_segment_file>> released) noexcept
{
    if (!flushing_) {
        return;  // unmapped as `released` goes
    }
    for (auto& segment : released) {
        try {
            retired_segments_.push_back(std::move(segment));
        } catch (...) {
            // Out of memory: the leader's msync of an unmapped range fails with an error, no crash.
        }
    }
}

// Drops this process's mappings of the segments another process's retention released (their files
// are deleted, or about to be); the tail is never among them.
void mmap_log_writer::adopt_retained_from(log_position start)
{
    if (start.offset <= retained_offset_.load(std::memory_order_relaxed)) {
        return;  // the usual case: no retention since this writer last held the lock
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
        retire(segments_.release_below(start_segment));
    }
    retained_items_.store(start.items, std::memory_order_release);
    retained_offset_.store(start.offset, std::memory_order_release);
}

// Maps the segments after the tail up to `index`, which other processes created (each exists: a
// rollover creates the file before it stores the new tail). The first item of a segment between the
// two is counted from its predecessor's records.
void mmap_log_writer::map_segments_up_to(std::uint64_t index, std::uint64_t tail_first_item)
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

// The previous holder of the append lock died holding it: the record or marker it was writing
// (between the tail position and the pending end) was never stored as written, so nobody was told
// of it; zero it, so that neither readers nor recovery take it for data. A rollover it started
// (a successor file the slot does not name) is removed; the next rollover makes it again.
void repair_shared_tail(const mmap_partition_files& files, shared_log_slot slot, std::string_view header_path)
{
    shared_log_state state = slot.load();
    check_shared_log_state(state, slot.retained_from(), files.segment_size, files.description, header_path);
    if (state.pending_end > state.tail_position) {
        const auto segment = open_mmap_segment(files, state.tail_segment);
        const std::span<std::byte> bytes = segment->region.bytes();
        std::memset(bytes.data() + state.tail_position, 0, state.pending_end - state.tail_position);
        segment->region.flush(state.tail_position, state.pending_end - state.tail_position);
    }
    const std::string successor = files.segment_path(state.tail_segment + 1);
    if (path_exists(successor)) {
        remove_file(successor);
    }
    state.pending_end = state.tail_position;
    slot.store(state);
}

}  // namespace bufferqueue::detail
