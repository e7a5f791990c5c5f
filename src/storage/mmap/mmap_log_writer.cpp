#include "bufferqueue/storage/mmap/detail/mmap_log_writer.hpp"

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
      // A last segment ended by a marker whose successor was never created (the process stopped in
      // a rollover, or the disk was full) stays ended: the next append creates the successor, so a
      // topic on a full disk can still be opened and read.
      tail_ended_(tail.tail_ended), items_(tail.end_items), flush_mark_(std::move(flush_mark)),
      checkpointed_offset_(tail.checkpointed_offset)
{
    publish();
}

void mmap_log_writer::require_open() const
{
    if (segments_.closed()) {
        throw error(errc::closed, files_.description + " is closed");
    }
}

void mmap_log_writer::publish() noexcept
{
    published_items_.store(items_, std::memory_order_release);
    published_end_.store(logical_offset(tail_->index, tail_position_, files_.segment_size), std::memory_order_release);
}

void mmap_log_writer::write_record()
{
    const std::uint64_t size = payload_.size();
    const std::uint64_t limit = max_payload_size(record_area());
    if (size > limit) {
        throw error(errc::invalid_argument, files_.description + ": a record of " + std::to_string(size) +
                                                " bytes does not fit in a segment of " +
                                                std::to_string(files_.segment_size) + " bytes (at most " +
                                                std::to_string(limit) + " payload bytes)");
    }
    if (tail_ended_ || !fits(record_area(), tail_position_, size)) {
        // A segment-end marker is final: once written (even if the rollover then failed, or the
        // process stopped before it), the next record goes to the next segment.
        if (!tail_ended_) {
            reserve(*tail_, tail_position_ + record_header_size);
            encode_segment_end(tail_->region.bytes().subspan(tail_position_));
            tail_ended_ = true;
        }
        roll_over(tail_position_ + record_header_size);
    }
    const std::uint64_t end = tail_position_ + record_size(size);
    reserve(*tail_, end);
    encode_record(tail_->region.bytes().subspan(tail_position_), payload_);
    tail_position_ = end;
    ++items_;
    ++unflushed_records_;
    ++records_since_checkpoint_;
}

// After an msync of the log completed: the flush mark vouches for everything before `flushed_end`
// (a store into the mapped flush.mark, never synced; see segment_format.hpp), so recovery reports
// damage there instead of cutting it as a torn tail. No extra system call.
void mmap_log_writer::mark_flushed(std::uint64_t flushed_end) noexcept
{
    if (flush_mark_.data() != nullptr) {
        const auto mark = make_flush_mark(logical_offset(tail_->index, flushed_end, files_.segment_size));
        std::memcpy(flush_mark_.data(), mark.data(), mark.size());
    }
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
    if (flush_end > flushed_position_) {
        tail_->region.flush(flushed_position_, flush_end - flushed_position_);
        flushed_position_ = flush_end;
    }
    mark_flushed(tail_position_);  // the records before the marker
    unflushed_records_ = 0;
    tail_ = &segments_.append(create_mmap_segment(files_, tail_->index + 1, reservation_chunk, items_));
    tail_position_ = segment_header_size;
    flushed_position_ = segment_header_size;
    tail_ended_ = false;
    write_producer_hint();
}

// Flushes the tail's pending bytes (one msync, then the flush mark); writes producer.offset when
// forced (a failure throws) or due (best effort, see write_producer_hint).
void mmap_log_writer::flush_locked(bool force_checkpoint)
{
    if (tail_position_ > flushed_position_) {
        tail_->region.flush(flushed_position_, tail_position_ - flushed_position_);
        flushed_position_ = tail_position_;
        mark_flushed(flushed_position_);
    }
    unflushed_records_ = 0;
    if (force_checkpoint) {
        write_producer_checkpoint();
    } else if (producer_hint_due()) {
        write_producer_hint();
    }
}

void mmap_log_writer::flush_for_commit(std::uint64_t next_offset)
{
    const std::lock_guard lock(mutex_);
    require_open();
    if (checkpointed_offset_ < next_offset) {
        flush_locked(true);
    }
}

void mmap_log_writer::close_locked() noexcept
{
    if (segments_.closed()) {
        return;
    }
    try {
        flush_locked(true);
    } catch (...) {
        // Closing releases resources whatever happens; the next open recovers from disk.
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

void mmap_log_writer::write_producer_checkpoint()
{
    const std::uint64_t offset = logical_offset(tail_->index, tail_position_, files_.segment_size);
    if (offset != checkpointed_offset_) {
        write_checkpoint(producer_path_, offset);
        checkpointed_offset_ = offset;
    }
    records_since_checkpoint_ = 0;
    checkpoint_time_ = std::chrono::steady_clock::now();
    producer_hint_failed_ = false;
}

}  // namespace bufferqueue::detail
