// Internal: the writer of a persistent partition's log - appends, disk reservation, rollover,
// flushes (msync and flush.mark) and the producer.offset recovery hint (see docs/mmap-storage.md,
// "Writing" and "Flushing").
#pragma once

#include "bufferqueue/error.hpp"
#include "bufferqueue/options.hpp"
#include "bufferqueue/storage/mmap/detail/file.hpp"
#include "bufferqueue/storage/mmap/detail/mmap_recovery.hpp"
#include "bufferqueue/storage/mmap/detail/mmap_segment_list.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace bufferqueue::detail {

/// Appends records to the last segment of a partition and publishes them. Appends are serialized by
/// the writer's mutex: serialize, check the size, roll over when the record does not fit, reserve
/// disk blocks ahead of the write position (so a full disk is an error, not SIGBUS), encode, then
/// flush by strategy. It counts the records it appends, so `end_items()` is the item index of the
/// next record (recovered at open). `published_end()` and `end_items()` are lock-free.
class mmap_log_writer {
public:
    /// The chunk of disk blocks reserved at a time (also when recovery creates a segment).
    static constexpr std::uint64_t reservation_chunk = 4 * 1024 * 1024;

    struct settings {
        flush_strategy flush = flush_strategy::immediate;
        std::size_t flush_batch_size = 100;
    };

    /// Continues the log in `segments` (whose last segment is the tail) from the recovered `tail`.
    /// `files` and `segments` must outlive the writer. Never throws.
    mmap_log_writer(const mmap_partition_files& files, settings configuration, mmap_segment_list& segments,
                    const mmap_recovered_tail& tail, mapped_region flush_mark) noexcept;

    mmap_log_writer(const mmap_log_writer&) = delete;
    mmap_log_writer& operator=(const mmap_log_writer&) = delete;

    /// The writer's mutex, for the partition's close (lock order: this one first).
    std::unique_lock<std::mutex> lock() { return std::unique_lock(mutex_); }

    /// Appends `count` records, the payload of record `index` written by `serialize(index, payload)`
    /// into a cleared, reused buffer, counting them in `appended` (which may start above 0); then
    /// publishes them, also when it throws part way. Throws what `serialize` throws, and
    /// `bufferqueue::error`: `closed`, `invalid_argument` for a payload that cannot fit in a segment,
    /// `io_error`. Thread-safe.
    template <class Serialize>
    void append(std::size_t count, std::size_t& appended, Serialize&& serialize)
    {
        const std::lock_guard lock(mutex_);
        require_open();
        try {
            while (appended < count) {
                payload_.clear();
                serialize(appended, payload_);
                write_record();
                ++appended;
                if (settings_.flush == flush_strategy::batch && unflushed_records_ >= settings_.flush_batch_size) {
                    flush_locked(false);
                }
            }
            if (settings_.flush == flush_strategy::immediate) {
                flush_locked(false);
            }
        } catch (...) {
            publish();
            throw;
        }
        publish();
    }

    /// A commit is a flush boundary: before a group's checkpoint may point at `next_offset`, the log
    /// up to it is flushed and producer.offset covers it. Throws `closed`, `io_error`. Thread-safe.
    void flush_for_commit(std::uint64_t next_offset);

    /// Flushes what is pending (best effort), then closes `segments` and unmaps flush.mark. Caller
    /// holds `lock()`. Never throws.
    void close_locked() noexcept;

    /// The logical offset one past the newest published record (acquire). Thread-safe.
    std::uint64_t published_end() const noexcept { return published_end_.load(std::memory_order_acquire); }

    /// Records ever appended to the partition, published ones only (acquire). Thread-safe.
    std::uint64_t end_items() const noexcept { return published_items_.load(std::memory_order_acquire); }

private:
    // Bounds on how far producer.offset lags the flushed data on the produce path (see
    // producer_hint_due).
    static constexpr std::size_t producer_hint_records = 64 * 1024;
    static constexpr std::chrono::steady_clock::duration producer_hint_period = std::chrono::seconds(1);

    void require_open() const;
    void publish() noexcept;
    void write_record();
    void mark_flushed(std::uint64_t flushed_end) noexcept;
    std::uint64_t record_area() const noexcept;
    void reserve(mmap_segment_file& segment, std::uint64_t end);
    void roll_over(std::uint64_t flush_end);
    void flush_locked(bool force_checkpoint);
    bool producer_hint_due() const noexcept;
    void write_producer_hint() noexcept;
    void write_producer_checkpoint();

    const mmap_partition_files& files_;
    const settings settings_;
    mmap_segment_list& segments_;
    const std::string producer_path_;

    std::mutex mutex_;
    std::vector<std::byte> payload_;            // guarded by mutex_
    mmap_segment_file* tail_ = nullptr;         // guarded by mutex_
    std::uint64_t tail_position_ = 0;           // guarded by mutex_
    std::uint64_t flushed_position_ = 0;        // guarded by mutex_
    bool tail_ended_ = false;                   // the tail holds a segment-end marker; mutex_
    std::uint64_t items_ = 0;                   // records appended, published or not; mutex_
    mapped_region flush_mark_;                  // flush.mark, written under mutex_
    std::uint64_t checkpointed_offset_ = 0;     // guarded by mutex_
    std::size_t unflushed_records_ = 0;         // guarded by mutex_
    std::size_t records_since_checkpoint_ = 0;  // guarded by mutex_
    bool producer_hint_failed_ = false;         // guarded by mutex_
    // When producer.offset was last written, or the partition opened; guarded by mutex_.
    std::chrono::steady_clock::time_point checkpoint_time_ = std::chrono::steady_clock::now();
    // Written together under mutex_ (items first), read by consumers: one cache line of their own.
    alignas(64) std::atomic<std::uint64_t> published_end_{0};
    std::atomic<std::uint64_t> published_items_{0};
};

}  // namespace bufferqueue::detail
