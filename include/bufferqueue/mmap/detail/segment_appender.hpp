// Internal: writes records into the tail segment of a persistent partition's log - size check,
// disk reservation, encoding, rollover to a new segment, msyncs of the tail (flush.mark), what
// consumers may read, and the producer.offset recovery hint (see docs/mmap-storage.md, "Writing" and
// "Flushing"). What only a process-shared log needs is shared_tail.hpp's and shared_append.hpp's.
#pragma once

#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/group_commit.hpp"
#include "bufferqueue/mmap/detail/mmap_recovery.hpp"
#include "bufferqueue/mmap/detail/mmap_segment_list.hpp"
#include "bufferqueue/mmap/detail/producer_checkpoint.hpp"
#include "bufferqueue/mmap/detail/shared_append.hpp"
#include "bufferqueue/options.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace bufferqueue::detail {

/// Appends records to the last segment of a partition (the tail) and publishes them. Checks the
/// size, rolls over when a record does not fit (a segment-end marker, an msync of the old tail, a
/// new segment), reserves disk blocks ahead of the write position (so a full disk is an error, not
/// SIGBUS) and encodes. It counts the records it appends, so `end_items()` is the item index of the
/// next published record (recovered at open). Under `batch` what it appends is published at once;
/// under `immediate` a record is published only once an msync made it durable (the group commit's
/// leader, or a flush of its own). Its msyncs settle the group commit's waiters they cover. It knows
/// one writer's view of the tail: for a process-shared log it reports its tail to the slot
/// (`shared_append::store`, one branch when the log is not shared) around every record, rollover
/// and flush, and `shared_tail` moves it onto the tail other processes moved (`follow_last_segment`,
/// `take_over`) when it takes the append lock.
///
/// Thread-safety: part of `mmap_log_writer`; every member is called holding the writer's mutex
/// (which guards every field) - and for a process-shared log the append lock, where a member says
/// so - unless its comment says otherwise; `published_end()` and `end_items()` are lock-free.
/// Allocation: the reused payload buffer grows to the largest record; a rollover maps a new
/// segment. Completion: every call is synchronous and may block on the disk. Errors: as each
/// member says.
class segment_appender {
public:
    /// The chunk of disk blocks reserved at a time (also when recovery creates a segment).
    static constexpr std::uint64_t reservation_chunk = 4 * 1024 * 1024;

    struct settings {
        flush_strategy flush = flush_strategy::immediate;
        std::size_t flush_batch_size = 100;
    };

    /// Continues the log in `segments` (whose last segment is the tail) from the recovered `tail`.
    /// `files`, `segments`, `commit` and `shared` must outlive the appender. Never throws.
    segment_appender(const mmap_partition_files& files, settings configuration, mmap_segment_list& segments,
                     const mmap_recovered_tail& tail, mapped_region flush_mark, group_commit& commit,
                     shared_append& shared) noexcept;

    segment_appender(const segment_appender&) = delete;
    segment_appender& operator=(const segment_appender&) = delete;

    /// Throws `closed` once the partition closed.
    void require_open() const;

    /// The reused buffer `write_record` writes a record of; cleared and filled by the caller.
    std::vector<std::byte>& payload() noexcept { return payload_; }

    /// Writes `payload()` as the next record, rolling over first when it does not fit; returns true.
    /// Returns false, having written nothing, when the record needs a rollover while a group-commit
    /// leader msyncs the tail (which retention may delete once it is no longer the tail): the caller
    /// waits for it (`group_commit::wait_for_idle_flush`, keeping `payload()` aside meanwhile) and
    /// calls again. Throws `invalid_argument` for a payload that cannot fit in a segment, `io_error`
    /// (then nothing half-done stays).
    bool write_record();

    /// Under `batch`: whether `flush_batch_size` records wait for their flush.
    bool batch_flush_due() const noexcept
    {
        return settings_.flush == flush_strategy::batch && unflushed_records_ >= settings_.flush_batch_size;
    }

    /// Flushes the tail's pending bytes (one msync, then the flush mark); writes producer.offset when
    /// `force_checkpoint` (a failure throws) or due (best effort). Throws `io_error`. No leader in flight.
    void flush_locked(bool force_checkpoint);

    /// Whether producer.offset is behind `next_offset` (a commit must flush first).
    bool checkpoint_behind(std::uint64_t next_offset) const noexcept { return checkpoint_.behind(next_offset); }

    /// Publishes what consumers may read: under `immediate` what an msync made durable, under
    /// `batch` everything appended. Never throws.
    void publish() noexcept;

    /// The logical offset one past the last record written, and one past what is known durable.
    std::uint64_t written_end() const noexcept;
    std::uint64_t durable_end() const noexcept;

    /// What an msync without the writer's mutex (a group-commit leader's) or without the append lock
    /// (a process-shared log's `batch` flush) covers: the tail's bytes written since its last flush.
    group_commit::flush_range unflushed() noexcept;

    /// As `unflushed`, for a `batch` flush, which it counts as done (`batch_flush_due` is false
    /// until `flush_batch_size` more records were appended, whether the msync succeeds or not).
    group_commit::flush_range take_unflushed() noexcept;

    /// An msync of `range` (`unflushed()`) that ran without the writer's mutex or the append lock
    /// succeeded: publishes it (unless another process's rollover covered it already) and writes the
    /// producer.offset hint when due; for a process-shared log stores it into the slot (call holding
    /// the append lock, so other processes publish it too). Never throws.
    void flushed(const group_commit::flush_range& range) noexcept;

    /// As `flushed`, publishing only: for a process-shared log whose append lock is unusable (this
    /// process still publishes its flush). Never throws.
    void publish_flushed(const group_commit::flush_range& range) noexcept;

    /// This appender's tail as the slot of a process-shared log stores it, with nothing pending.
    shared_log_state tail_state() const noexcept { return tail_state(tail_position_); }

    /// Process-shared logs: stores this appender's tail into the slot (holding the append lock).
    /// Without sharing, or once closed: nothing. Never throws.
    void store_tail() noexcept { store_tail(tail_position_); }

    /// The index of the tail segment. Never throws.
    std::uint64_t tail_index() const noexcept { return tail_->index; }

    /// The segment list's last segment is the tail from now on: another process's rollover mapped
    /// it, or the list restarted at it (`shared_tail`). Where the next record goes in it is
    /// `take_over`'s. Never throws.
    void follow_last_segment() noexcept { tail_ = &segments_.last(); }

    /// Continues from the tail `state` describes (another process's appends, rollovers and flushes,
    /// the slot's; `state.tail_segment` is `tail_index()`), `rolled_over` when the tail moved to a
    /// later segment since this appender last wrote (nothing in it was flushed by this process).
    /// Publishes nothing. Never throws.
    void take_over(const shared_log_state& state, bool rolled_over) noexcept;

    /// Publishes the published end and item count of `state` (the slot's, every process's). Never throws.
    void publish_at(const shared_log_state& state) noexcept;

    /// Closes the segments and unmaps flush.mark. Never throws.
    void close() noexcept;

    /// Whether `close` ran (the segments are closed). Never throws.
    bool closed() const noexcept { return segments_.closed(); }

    /// The logical offset one past the newest published record (acquire). Lock-free.
    std::uint64_t published_end() const noexcept { return published_end_.load(std::memory_order_acquire); }

    /// Records ever appended to the partition, published ones only (acquire). Lock-free.
    std::uint64_t end_items() const noexcept { return published_items_.load(std::memory_order_acquire); }

private:
    void publish_up_to(std::uint64_t position, std::uint64_t items) noexcept;
    std::uint64_t record_area() const noexcept;
    void reserve(mmap_segment_file& segment, std::uint64_t end);
    void roll_over(std::uint64_t flush_end);
    void flush_range(std::uint64_t from, std::uint64_t to);
    void flushed_tail(std::uint64_t position, std::uint64_t items) noexcept;
    void flushed_through(std::uint64_t flush_end, std::uint64_t items) noexcept;
    void mark_flushed(std::uint64_t flushed_end) noexcept;
    std::uint64_t checkpoint_offset() const noexcept;
    void write_producer_hint() noexcept;
    void write_producer_hint_if_due() noexcept;
    // The tail as a process-shared log's slot stores it; `pending_end` is where the record being
    // written ends (what a writer that dies now may leave torn).
    shared_log_state tail_state(std::uint64_t pending_end) const noexcept;
    void store_tail(std::uint64_t pending_end) noexcept;

    const mmap_partition_files& files_;
    const settings settings_;
    mmap_segment_list& segments_;
    group_commit& commit_;
    shared_append& shared_;

    std::vector<std::byte> payload_;      // guarded by the writer's mutex, as every field below
    mmap_segment_file* tail_ = nullptr;   // but the published ends
    std::uint64_t tail_position_ = 0;     // where the next record goes in the tail
    std::uint64_t flushed_position_ = 0;  // the tail was msynced before it
    std::uint64_t flushed_items_ = 0;     // records before flushed_position_
    bool tail_ended_ = false;             // the tail holds a segment-end marker
    std::uint64_t items_ = 0;             // records appended, published or not
    mapped_region flush_mark_;            // flush.mark
    std::size_t unflushed_records_ = 0;   // records since the last flush
    producer_checkpoint checkpoint_;      // producer.offset
    // Written together under the writer's mutex (items first), read by consumers: one cache line of
    // their own.
    alignas(64) std::atomic<std::uint64_t> published_end_{0};
    std::atomic<std::uint64_t> published_items_{0};
};

}  // namespace bufferqueue::detail
