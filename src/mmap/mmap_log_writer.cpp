// mmap_log_writer, part one: appending records, rollover, flushing, closing, publishing what
// consumers may read and the producer.offset hint. The group commit of `immediate` appends (waiting
// for, leading and settling flushes) is in mmap_log_group_commit.cpp.
#include "bufferqueue/mmap/detail/mmap_log_writer.hpp"

#include "bufferqueue/detail/message.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace bufferqueue::detail {

mmap_log_writer::mmap_log_writer(const mmap_partition_files& files, settings configuration, mmap_segment_list& segments,
                                 const mmap_recovered_tail& tail, mapped_region flush_mark) noexcept
    : files_(files), settings_(configuration), segments_(segments), producer_path_(files.producer_path()),
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
      checkpointed_offset_(tail.checkpointed_offset)
{
    // Everything recovered is readable (it survived the stop), also a tail past what is known durable.
    publish_up_to(tail_position_, items_);
}

void mmap_log_writer::require_open() const
{
    if (segments_.closed()) {
        throw error(errc::closed, detail::format_message("{} is closed", files_.description));
    }
}

// What consumers may read. Under `immediate` only what an msync made durable: a consumer never sees
// a record that a power loss could take back or whose producer is told its flush failed (a later
// flush that succeeds publishes it). Under `batch` everything appended.
void mmap_log_writer::publish() noexcept
{
    if (settings_.flush == flush_strategy::immediate) {
        publish_up_to(std::min(flushed_position_, tail_position_), flushed_items_);
    } else {
        publish_up_to(tail_position_, items_);
    }
}

// Publishes the records of the tail before `position` (`items` records in all), unless more is
// published already (a recovered tail past the flushed end). Under mutex_ (or in the constructor).
void mmap_log_writer::publish_up_to(std::uint64_t position, std::uint64_t items) noexcept
{
    const std::uint64_t end = logical_offset(tail_->index, position, files_.segment_size);
    if (end < published_end_.load(std::memory_order_relaxed)) {
        return;
    }
    published_items_.store(items, std::memory_order_release);
    published_end_.store(end, std::memory_order_release);
}

std::uint64_t mmap_log_writer::appended_items() const
{
    const std::lock_guard lock(mutex_);
    return items_;
}

std::uint64_t mmap_log_writer::written_end() const noexcept
{
    return logical_offset(tail_->index, tail_position_, files_.segment_size);
}

void mmap_log_writer::write_record(std::unique_lock<std::mutex>& lock, shared_hold& hold)
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
        if (flushing_) {
            // A rollover waits for the leader's msync of the tail (which retention may delete once
            // it is no longer the tail). Others append meanwhile: keep this record's payload aside
            // and decide again. The shared append lock is let go meanwhile (the leader takes it to
            // store what it flushed); taking it again adopts what other processes appended.
            std::vector<std::byte> record = std::move(payload_);
            hold.release();
            wait_for_idle_flush(lock);
            payload_ = std::move(record);
            require_open();
            hold.acquire();
            continue;
        }
        // A segment-end marker is final: once written (even if the rollover then failed, or the
        // process stopped before it), the next record goes to the next segment.
        if (!tail_ended_) {
            reserve(*tail_, tail_position_ + record_header_size);
            store_shared(tail_position_ + record_header_size);  // what a dead writer may have torn
            encode_segment_end(tail_->region.bytes().subspan(tail_position_));
            tail_ended_ = true;
            store_shared(tail_position_);
        }
        roll_over(tail_position_ + record_header_size);
    }
    const std::uint64_t end = tail_position_ + record_size(size);
    reserve(*tail_, end);
    store_shared(end);  // what a dead writer may have torn
    encode_record(tail_->region.bytes().subspan(tail_position_), payload_);
    tail_position_ = end;
    ++items_;
    ++unflushed_records_;
    ++records_since_checkpoint_;
    store_shared(tail_position_);
    notify_gathering_leader();
}

// Records end at least `record_header_size` bytes before the end of a segment, so every segment this
// writer fills ends with a segment-end marker, and a rollover happens before the record that does
// not fit is written (a failed rollover leaves nothing half-done).
std::uint64_t mmap_log_writer::record_area() const noexcept
{
    return files_.segment_size - record_header_size;
}

// Reserves disk blocks for bytes [0, end) of `segment`, a chunk at a time.
void mmap_log_writer::reserve(mmap_segment_file& segment, std::uint64_t end)
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
// new segment, whose first record is item `items_`. A failure leaves the writer on the old tail, so
// the next append retries.
void mmap_log_writer::roll_over(std::uint64_t flush_end)
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
    store_shared(tail_position_);
    write_producer_hint();
}

// Flushes the tail's pending bytes (one msync, then the flush mark); writes producer.offset when
// forced (a failure throws) or due (best effort, see write_producer_hint).
void mmap_log_writer::flush_locked(bool force_checkpoint)
{
    if (tail_position_ > flushed_position_) {
        flush_range(flushed_position_, tail_position_);
        flushed_tail(tail_position_, items_);
    }
    unflushed_records_ = 0;
    if (force_checkpoint) {
        write_producer_checkpoint();
    } else if (producer_hint_due()) {
        write_producer_hint();
    }
}

// The msync of bytes [from, to) of the tail, under mutex_ with no leader in flight. It settles the
// waiting appends it covers (all of them: they are all in the tail), with its error if it fails.
void mmap_log_writer::flush_range(std::uint64_t from, std::uint64_t to)
{
    if (to <= from) {
        return;
    }
    try {
        tail_->region.flush(from, to - from);
    } catch (...) {
        settle(logical_offset(tail_->index, to, files_.segment_size), current_failure());
        throw;
    }
    settle(logical_offset(tail_->index, to, files_.segment_size), nullptr);
}

// After a successful msync of the tail up to `position`, which holds `items` records.
void mmap_log_writer::flushed_tail(std::uint64_t position, std::uint64_t items) noexcept
{
    if (position > flushed_position_) {
        flushed_position_ = position;
        flushed_items_ = items;
        mark_flushed(position);
        publish();
        store_shared(tail_position_);
    }
}

// After a successful msync of the log before the logical offset `flush_end` (`items` records): a
// group-commit leader, whose tail may since have been rolled over by another process (whose
// rollover flushed the whole old segment: nothing left to do then).
void mmap_log_writer::flushed_through(std::uint64_t flush_end, std::uint64_t items) noexcept
{
    const segment_position at = split_offset(flush_end, files_.segment_size);
    if (at.segment_index == tail_->index) {
        flushed_tail(at.position, items);
    }
}

void mmap_log_writer::flush_for_commit(std::uint64_t next_offset)
{
    std::unique_lock lock(mutex_);
    require_open();
    wait_for_idle_flush(lock);
    require_open();
    const shared_hold hold(*this);
    if (checkpointed_offset_ < next_offset) {
        flush_locked(true);
    }
}

void mmap_log_writer::close_locked() noexcept
{
    if (segments_.closed()) {
        return;
    }
    if (!shared_) {  // a shared log flushed in flush_shared_for_close
        try {
            flush_locked(true);
        } catch (...) {
            // Closing releases resources whatever happens; the next open recovers from disk.
        }
    }
    if (!waiters_.empty()) {  // only when the flush failed before its msync
        settle(UINT64_MAX, std::make_shared<const flush_failure>(flush_failure{
                               errc::closed, detail::format_message("{} was closed before the record was flushed",
                                                                    files_.description)}));
    }
    segments_.close();
    tail_ = nullptr;
    flush_mark_.unmap();
}

// On the produce path producer.offset is due after a failed hint, or once at least flush_batch_size
// records were appended since the last checkpoint and either producer_hint_records records or
// producer_hint_period passed. Each checkpoint costs a file write, two fsyncs and a rename, so it
// must not come with every batch flush; rollovers, commits and close write it regardless.
bool mmap_log_writer::producer_hint_due() const noexcept
{
    if (producer_hint_failed_) {
        return true;
    }
    if (records_since_checkpoint_ < settings_.flush_batch_size) {
        return false;
    }
    return records_since_checkpoint_ >= producer_hint_records ||
           std::chrono::steady_clock::now() - checkpoint_time_ >= producer_hint_period;
}

// producer.offset written on the way (at a rollover, or when producer_hint_due) is only a recovery
// hint: the records it would cover are already stored and flushed, so failing to write it must not
// fail the produce call that stored them (the producer would retry and store them twice). It is
// retried at the next flush; commits and close write it for real.
void mmap_log_writer::write_producer_hint() noexcept
{
    try {
        write_producer_checkpoint();
    } catch (...) {
        producer_hint_failed_ = true;  // retried at the next flush, commit or close
    }
}

// producer.offset covers flushed data only: with group commit, records appended while the leader
// msynced may follow flushed_position_; they count towards the next checkpoint. After a failed
// rollover the flushed end includes the segment-end marker, which no checkpoint may point past.
void mmap_log_writer::write_producer_checkpoint()
{
    const std::uint64_t offset =
        logical_offset(tail_->index, std::min(flushed_position_, tail_position_), files_.segment_size);
    if (offset != checkpointed_offset_) {
        write_checkpoint(producer_path_, offset, files_.access);
        checkpointed_offset_ = offset;
    }
    records_since_checkpoint_ = static_cast<std::size_t>(items_ - flushed_items_);
    checkpoint_time_ = std::chrono::steady_clock::now();
    producer_hint_failed_ = false;
}

}  // namespace bufferqueue::detail
