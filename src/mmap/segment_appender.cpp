// Writing records into the tail segment (segment_appender.hpp): appends, rollover, the msyncs of the
// tail, publishing what consumers may read and the producer.offset hint, and the tail as it is
// reported to, and taken over from, a process-shared log's slot (shared_tail.cpp takes it over).
#include "bufferqueue/mmap/detail/segment_appender.hpp"

#include "bufferqueue/detail/message.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

namespace bufferqueue::detail {

segment_appender::segment_appender(const mmap_partition_files& files, settings configuration,
                                   mmap_segment_list& segments, const mmap_recovered_tail& tail,
                                   mapped_region flush_mark, group_commit& commit, shared_append& shared) noexcept
    : files_(files), settings_(configuration), segments_(segments), commit_(commit), shared_(shared),
      tail_(&segments.last()), tail_position_(tail.tail_position),
      // A recovered tail past what is known durable is flushed before anything vouches for it: the
      // next flush (every commit whose checkpoint covers it, close, rollover) msyncs it.
      flushed_position_(tail.flushed_position),
      // Only compared with the records appended since (the producer.offset cadence): the records of
      // a recovered tail past flushed_position_ count as flushed.
      flushed_items_(tail.end_items),
      // A last segment ended by a marker whose successor was never created (the process stopped in
      // a rollover, or the disk was full) stays ended: the next append creates the successor, so a
      // topic on a full disk can still be opened and read.
      tail_ended_(tail.tail_ended), items_(tail.end_items), flush_mark_(std::move(flush_mark)),
      checkpoint_(files, tail.checkpointed_offset, configuration.flush_batch_size)
{
    // Everything recovered is readable (it survived the stop), also a tail past what is known durable.
    publish_up_to(tail_position_, items_);
}

void segment_appender::require_open() const
{
    if (segments_.closed()) {
        throw error(errc::closed, detail::format_message("{} is closed", files_.description));
    }
}

// What consumers may read. Under `immediate` only what an msync made durable: a consumer never sees
// a record that a power loss could take back or whose producer is told its flush failed (a later
// flush that succeeds publishes it). Under `batch` everything appended.
void segment_appender::publish() noexcept
{
    if (settings_.flush == flush_strategy::immediate) {
        publish_up_to(std::min(flushed_position_, tail_position_), flushed_items_);
    } else {
        publish_up_to(tail_position_, items_);
    }
}

// Publishes the records of the tail before `position` (`items` records in all), unless more is
// published already (a recovered tail past the flushed end). Under the mutex (or in the constructor).
void segment_appender::publish_up_to(std::uint64_t position, std::uint64_t items) noexcept
{
    const std::uint64_t end = logical_offset(tail_->index, position, files_.segment_size);
    if (end < published_end_.load(std::memory_order_relaxed)) {
        return;
    }
    published_items_.store(items, std::memory_order_release);
    published_end_.store(end, std::memory_order_release);
}

std::uint64_t segment_appender::written_end() const noexcept
{
    return logical_offset(tail_->index, tail_position_, files_.segment_size);
}

std::uint64_t segment_appender::durable_end() const noexcept
{
    return logical_offset(tail_->index, flushed_position_, files_.segment_size);
}

bool segment_appender::write_record()
{
    const std::uint64_t size = payload_.size();
    const std::uint64_t limit = max_payload_size(record_area());
    if (size > limit) {
        throw error(
            errc::invalid_argument,
            detail::format_message("{}: a record of {} bytes does not fit in a segment of {} bytes (at most {} payload "
                                   "bytes)",
                                   files_.description, size, files_.segment_size, limit));
    }
    while (tail_ended_ || !fits(record_area(), tail_position_, size)) {
        if (commit_.flushing()) {
            return false;  // a rollover waits for the leader's msync of the tail
        }
        // A segment-end marker is final: once written (even if the rollover then failed, or the
        // process stopped before it), the next record goes to the next segment.
        if (!tail_ended_) {
            reserve(*tail_, tail_position_ + record_header_size);
            store_tail(tail_position_ + record_header_size);  // what a dead writer may have torn
            encode_segment_end(tail_->region.bytes().subspan(tail_position_));
            tail_ended_ = true;
            store_tail(tail_position_);
        }
        roll_over(tail_position_ + record_header_size);
    }
    const std::uint64_t end = tail_position_ + record_size(size);
    reserve(*tail_, end);
    store_tail(end);  // what a dead writer may have torn
    encode_record(tail_->region.bytes().subspan(tail_position_), payload_);
    tail_position_ = end;
    ++items_;
    ++unflushed_records_;
    checkpoint_.count_record();
    store_tail(tail_position_);
    shared_.notify_gathering_leader();
    return true;
}

// Records end at least `record_header_size` bytes before the end of a segment, so every segment this
// appender fills ends with a segment-end marker, and a rollover happens before the record that does
// not fit is written (a failed rollover leaves nothing half-done).
std::uint64_t segment_appender::record_area() const noexcept
{
    return files_.segment_size - record_header_size;
}

// Reserves disk blocks for bytes [0, end) of `segment`, a chunk at a time.
void segment_appender::reserve(mmap_segment_file& segment, std::uint64_t end)
{
    if (end <= segment.reserved_end) {
        return;
    }
    const std::uint64_t chunk_end =
        std::min(files_.segment_size, (end + reservation_chunk - 1) / reservation_chunk * reservation_chunk);
    preallocate(segment.file, segment.reserved_end, chunk_end - segment.reserved_end);
    segment.reserved_end = chunk_end;
}

// Ends the tail segment (its records and marker end at `flush_end`), flushes it and continues in a
// new segment, whose first record is item `items_`. A failure leaves the appender on the old tail, so
// the next append retries.
void segment_appender::roll_over(std::uint64_t flush_end)
{
    flush_range(flushed_position_, flush_end);
    flushed_position_ = flush_end;
    flushed_items_ = items_;
    mark_flushed(tail_position_);  // the records before the marker
    unflushed_records_ = 0;
    tail_ = &segments_.append(create_mmap_segment(files_, tail_->index + 1, reservation_chunk, items_));
    tail_position_ = segment_header_size;
    flushed_position_ = segment_header_size;
    tail_ended_ = false;
    publish();  // everything before the new segment is flushed
    store_tail(tail_position_);
    write_producer_hint();
}

void segment_appender::flush_locked(bool force_checkpoint)
{
    if (tail_position_ > flushed_position_) {
        flush_range(flushed_position_, tail_position_);
        flushed_tail(tail_position_, items_);
    }
    unflushed_records_ = 0;
    if (force_checkpoint) {
        checkpoint_.write(checkpoint_offset(), items_ - flushed_items_);
    } else {
        write_producer_hint_if_due();
    }
}

// The msync of bytes [from, to) of the tail, under the mutex with no leader in flight. It settles the
// waiting appends it covers (all of them: they are all in the tail), with its error if it fails.
void segment_appender::flush_range(std::uint64_t from, std::uint64_t to)
{
    if (to <= from) {
        return;
    }
    try {
        tail_->region.flush(from, to - from);
    } catch (...) {
        commit_.settle(logical_offset(tail_->index, to, files_.segment_size), group_commit::current_failure());
        throw;
    }
    commit_.settle(logical_offset(tail_->index, to, files_.segment_size), nullptr);
}

// After a successful msync of the tail up to `position`, which holds `items` records.
void segment_appender::flushed_tail(std::uint64_t position, std::uint64_t items) noexcept
{
    if (position > flushed_position_) {
        flushed_position_ = position;
        flushed_items_ = items;
        mark_flushed(position);
        publish();
        store_tail(tail_position_);
    }
}

// After a successful msync of the log before the logical offset `flush_end` (`items` records): a
// group-commit leader, whose tail may since have been rolled over by another process (whose
// rollover flushed the whole old segment: nothing left to do then).
void segment_appender::flushed_through(std::uint64_t flush_end, std::uint64_t items) noexcept
{
    const segment_position at = split_offset(flush_end, files_.segment_size);
    if (at.segment_index == tail_->index) {
        flushed_tail(at.position, items);
    }
}

group_commit::flush_range segment_appender::unflushed() noexcept
{
    return {.segment = tail_,
            .from = flushed_position_,
            .to = tail_position_,
            .items = items_,
            .flush_end = logical_offset(tail_->index, tail_position_, files_.segment_size)};
}

group_commit::flush_range segment_appender::take_unflushed() noexcept
{
    unflushed_records_ = 0;
    return unflushed();
}

void segment_appender::flushed(const group_commit::flush_range& range) noexcept
{
    flushed_through(range.flush_end, range.items);
    unflushed_records_ = 0;
    write_producer_hint_if_due();
}

void segment_appender::publish_flushed(const group_commit::flush_range& range) noexcept
{
    flushed_through(range.flush_end, range.items);
}

shared_log_state segment_appender::tail_state(std::uint64_t pending_end) const noexcept
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

void segment_appender::store_tail(std::uint64_t pending_end) noexcept
{
    if (shared_.active() && tail_ != nullptr) {
        shared_.store(tail_state(pending_end));
    }
}

void segment_appender::take_over(const shared_log_state& state, bool rolled_over) noexcept
{
    if (rolled_over) {
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
}

void segment_appender::publish_at(const shared_log_state& state) noexcept
{
    published_items_.store(state.published_items, std::memory_order_release);
    published_end_.store(state.published_end, std::memory_order_release);
}

// After an msync of the log completed: the flush mark vouches for everything before `flushed_end`
// (a store into the mapped flush.mark, never synced; see segment_format.hpp), so recovery reports
// damage there instead of cutting it as a torn tail. No extra system call.
void segment_appender::mark_flushed(std::uint64_t flushed_end) noexcept
{
    if (flush_mark_.data() != nullptr) {
        const auto mark = make_flush_mark(logical_offset(tail_->index, flushed_end, files_.segment_size));
        std::memcpy(flush_mark_.data(), mark.data(), mark.size());
    }
}

// producer.offset covers flushed data only: with group commit, records appended while the leader
// msynced may follow flushed_position_; they count towards the next checkpoint. After a failed
// rollover the flushed end includes the segment-end marker, which no checkpoint may point past.
std::uint64_t segment_appender::checkpoint_offset() const noexcept
{
    return logical_offset(tail_->index, std::min(flushed_position_, tail_position_), files_.segment_size);
}

void segment_appender::write_producer_hint() noexcept
{
    checkpoint_.write_hint(checkpoint_offset(), items_ - flushed_items_);
}

void segment_appender::write_producer_hint_if_due() noexcept
{
    if (checkpoint_.hint_due()) {
        write_producer_hint();
    }
}

void segment_appender::close() noexcept
{
    segments_.close();
    tail_ = nullptr;
    flush_mark_.unmap();
}

}  // namespace bufferqueue::detail
