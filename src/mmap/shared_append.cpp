// The process-shared side of a partition's appends (shared_append.hpp): the append lock, the slot of
// the shared header and the wake-up of the other processes' watchers. See docs/mmap-storage.md,
// "Process-shared topics".
#include "bufferqueue/mmap/detail/shared_append.hpp"

#include "bufferqueue/mmap/detail/file.hpp"

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <utility>

namespace bufferqueue::detail {

void shared_append::initialize(const shared_log_state& mine, log_position retained_from, std::uint64_t published_end)
{
    link_->lock.lock();
    store_retained_from(retained_from);
    store(mine);
    shared_published_ = published_end;
    link_->lock.unlock();
}

shared_log_state shared_append::load_checked() const
{
    const shared_log_state state = link_->slot.load();
    check_shared_log_state(state, link_->slot.retained_from(), files_.segment_size, files_.description,
                           link_->header_path);
    return state;
}

shared_log_state shared_append::lock()
{
    const bool owner_died = link_->lock.lock();
    try {
        const shared_log_state state = load_checked();
        if (owner_died) {
            repair_shared_tail(files_, link_->slot, link_->header_path);
        }
        return state;
    } catch (...) {
        link_->lock.unlock();
        throw;
    }
}

void shared_append::unlock(std::uint64_t published_end) noexcept
{
    const bool published = shared_published_ < published_end;
    shared_published_ = std::max(shared_published_, published_end);
    link_->lock.unlock();
    const bool released = std::exchange(retained_moved_, false);
    if ((published && link_->slot.take_consumer_waiting()) || released) {
        // The other processes' watchers publish it to their consumers, or drop released segments.
        link_->wake.notify();
    }
}

void shared_append::store(const shared_log_state& mine) noexcept
{
    shared_log_state state = link_->slot.load();
    state.tail_segment = mine.tail_segment;
    state.tail_position = mine.tail_position;
    state.tail_first_item = mine.tail_first_item;
    state.items = mine.items;
    state.tail_ended = mine.tail_ended;
    state.pending_end = mine.pending_end;
    if (mine.flushed_end > state.flushed_end) {
        state.flushed_end = mine.flushed_end;
        state.flushed_items = mine.flushed_items;
    }
    if (mine.published_end > state.published_end) {
        state.published_end = mine.published_end;
        state.published_items = mine.published_items;
    }
    link_->slot.store(state);
    // The record's bytes are written only after the pending end is stored: a writer killed between
    // the two leaves nothing the next holder does not zero.
    std::atomic_signal_fence(std::memory_order_seq_cst);
}

void shared_append::adopted(std::uint64_t published_end) noexcept
{
    shared_published_ = std::max(shared_published_, published_end);
}

void shared_append::notify_gathering_leader() const noexcept
{
    if (link_ && link_->slot.gathering()) {
        process_shared_event flushed = link_->slot.flush_event();  // a view
        flushed.notify();
    }
}

void shared_append::note_consumer_waiting(std::uint64_t published_end) const noexcept
{
    if (!link_) {
        return;
    }
    link_->slot.mark_consumer_waiting();
    // Published by another process before the mark: no append will notify for it, so wake this
    // process's watcher now.
    if (link_->slot.published_end() > published_end) {
        process_shared_event wake = link_->wake;  // a view: notifying changes the shared word only
        wake.notify();
    }
}

bool shared_append::moved_on(std::uint64_t published_end) const noexcept
{
    return link_ && (link_->slot.published_end() > published_end ||
                     link_->slot.retained_from_offset() > retained_offset_.load(std::memory_order_acquire));
}

log_position shared_append::retained_from() const noexcept
{
    return link_ ? link_->slot.retained_from() : log_position{};
}

void shared_append::store_retained_from(log_position start) noexcept
{
    if (link_) {
        retained_moved_ = retained_moved_ || start.offset > link_->slot.retained_from().offset;
        link_->slot.store_retained_from(start);
        follow_retained_from(start);
    }
}

void shared_append::follow_retained_from(log_position start) noexcept
{
    retained_items_.store(start.items, std::memory_order_release);
    retained_offset_.store(start.offset, std::memory_order_release);
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
