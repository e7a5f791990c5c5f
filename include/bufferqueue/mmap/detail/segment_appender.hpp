// Internal: writes records into the tail segment of a persistent partition's log - size check,
// disk reservation, encoding, rollover to a new segment, msyncs of the tail (flush.mark), what
// consumers may read, and the producer.offset recovery hint (see docs/mmap-storage.md, "Writing" and
// "Flushing"); for a process-shared log also taking over the tail other processes moved.
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
#include <mutex>
#include <string>
#include <vector>

namespace bufferqueue::detail {

/// Appends records to the last segment of a partition (the tail) and publishes them. Checks the
/// size, rolls over when a record does not fit (a segment-end marker, an msync of the old tail, a
/// new segment), reserves disk blocks ahead of the write position (so a full disk is an error, not
/// SIGBUS) and encodes. It counts the records it appends, so `end_items()` is the item index of the
/// next published record (recovered at open). Under `batch` what it appends is published at once;
/// under `immediate` a record is published only once an msync made it durable (the group commit's
/// leader, or a flush of its own). Its msyncs settle the group commit's waiters they cover. For a
/// process-shared log it stores its tail into the slot (`shared_append`) around every record and
/// adopts the tail other processes moved when it takes the append lock (`shared_hold`).
///
/// Thread-safety: part of `mmap_log_writer`; every member is called holding the writer's mutex
/// (which guards every field) unless its comment says otherwise; `published_end()` and
/// `end_items()` are lock-free. Allocation: the reused payload buffer grows to the largest record;
/// a rollover maps a new segment. Completion: every call is synchronous and may block on the disk.
/// Errors: as each member says.
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

    /// Holds the shared append lock of a process-shared log (nothing otherwise) while it lives,
    /// having adopted the tail other processes moved when it took it; stores this appender's tail
    /// back, unlocks and wakes the other processes' watchers when released. Used under the writer's
    /// mutex. `acquire` throws what `shared_append::lock` and the adoption throw (`corrupt_data`,
    /// `io_error`, `timed_out`); once the partition closed it takes nothing.
    class shared_hold {
    public:
        explicit shared_hold(segment_appender& appender) : appender_(appender) { acquire(); }
        ~shared_hold() { release(); }
        shared_hold(const shared_hold&) = delete;
        shared_hold& operator=(const shared_hold&) = delete;

        void acquire()
        {
            // Once closed there is no tail to adopt: the caller's own checks report `closed`.
            if (appender_.shared_.active() && !held_ && !appender_.segments_.closed()) {
                appender_.lock_shared();
                held_ = true;
            }
        }

        void release() noexcept
        {
            if (held_) {
                held_ = false;
                appender_.unlock_shared();
            }
        }

    private:
        segment_appender& appender_;
        bool held_ = false;
    };

    /// Throws `closed` once the partition closed.
    void require_open() const;

    /// The reused buffer `write_record` writes a record of; cleared and filled by the caller.
    std::vector<std::byte>& payload() noexcept { return payload_; }

    /// Writes `payload()` as the next record, rolling over first when it does not fit (waiting, with
    /// `lock` and `hold` let go meanwhile, for a group-commit flush in flight). Throws `invalid_argument`
    /// for a payload that cannot fit in a segment, `closed`, `io_error` (then nothing half-done stays).
    void write_record(std::unique_lock<std::mutex>& lock, shared_hold& hold);

    /// Under `batch`: whether `flush_batch_size` records wait for their flush.
    bool batch_flush_due() const noexcept
    {
        return settings_.flush == flush_strategy::batch && unflushed_records_ >= settings_.flush_batch_size;
    }

    /// The `batch` flush of the pending records (for a shared log with `hold` let go during the msync).
    /// Throws `io_error`.
    void flush_batch(shared_hold& hold);

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

    /// What a group-commit leader msyncs: the tail's bytes written since its last flush.
    group_commit::flush_range unflushed() noexcept;

    /// A group-commit leader's msync of `range` succeeded: publishes it (unless another process's
    /// rollover covered it already) and writes the producer.offset hint when due; a process-shared
    /// log stores it under the append lock, so other processes publish it too (when the lock is
    /// unusable, this process still publishes it). Never throws.
    void leader_flushed(const group_commit::flush_range& range) noexcept;

    /// The first process to open a process-shared topic: writes the slot from this appender's state
    /// and `retained_from`. Throws what taking the append lock throws.
    void initialize_shared(log_position retained_from);

    /// Publishes what `state`, the slot's, says was published (by every process). Never throws.
    void publish_shared(const shared_log_state& state) noexcept;

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
    // Process-shared logs (segment_appender_shared.cpp).
    shared_log_state shared_state(std::uint64_t pending_end) const noexcept;
    void store_shared(std::uint64_t pending_end) noexcept;
    void flush_batch_shared(shared_hold& hold);
    void lock_shared();
    void unlock_shared() noexcept;
    void adopt(const shared_log_state& state);
    void adopt_retained_from(log_position start);
    void map_segments_up_to(std::uint64_t index, std::uint64_t tail_first_item);

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
