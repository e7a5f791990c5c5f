// Internal: the writer of a persistent partition's log - appends, disk reservation, rollover,
// flushes (msync and flush.mark), group commit of `immediate` produce calls and the producer.offset
// recovery hint (see docs/mmap-storage.md, "Writing", "Flushing" and "Group commit").
#pragma once

#include "bufferqueue/error.hpp"
#include "bufferqueue/options.hpp"
#include "bufferqueue/storage/mmap/detail/file.hpp"
#include "bufferqueue/storage/mmap/detail/mmap_recovery.hpp"
#include "bufferqueue/storage/mmap/detail/mmap_segment_list.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace bufferqueue::detail {

/// Appends records to the last segment of a partition and publishes them. Appends are serialized by
/// the writer's mutex: serialize, check the size, roll over when the record does not fit, reserve
/// disk blocks ahead of the write position (so a full disk is an error, not SIGBUS), encode, then
/// flush by strategy. It counts the records it appends, so `end_items()` is the item index of the
/// next published record (recovered at open). `published_end()` and `end_items()` are lock-free.
/// Under `batch` an append publishes its records at once; under `immediate` a record is published
/// (readable, and counted by `end_items()`) only once an msync made it durable.
///
/// Group commit (`flush_strategy::immediate`): an append releases the mutex and waits (on a condition variable: callers
/// are blocking-pool or user threads, never executor threads) until a flush covered its last record. When no flush is
/// in flight one waiter becomes the flush leader: it waits briefly for the producers of the previous flush to append
/// again (see `gather_followers`), msyncs everything appended so far with the mutex released, then settles every waiter
/// the flush covered - with success, or with the flush's error - and wakes the others. At most one msync of the log
/// runs at a time: rollovers, commits and close wait for the leader.
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
    /// publishes them, also when it throws part way. With `flush_strategy::immediate` it then
    /// returns only once a flush that succeeded covered its records (group commit, see above); a
    /// failed flush throws its `io_error` in every call whose records it covered. Throws what
    /// `serialize` throws, and `bufferqueue::error`: `closed`, `invalid_argument` for a payload that
    /// cannot fit in a segment, `io_error`. Thread-safe; blocks (never call it on an executor thread).
    template <class Serialize>
    void append(std::size_t count, std::size_t& appended, Serialize&& serialize)
    {
        std::unique_lock lock(mutex_);
        require_open();
        try {
            while (appended < count) {
                payload_.clear();
                serialize(appended, payload_);
                write_record(lock);
                ++appended;
                if (settings_.flush == flush_strategy::batch && unflushed_records_ >= settings_.flush_batch_size) {
                    flush_locked(false);
                }
            }
        } catch (...) {
            publish();
            throw;
        }
        publish();
        if (settings_.flush == flush_strategy::immediate) {
            wait_until_durable(lock, written_end());
        }
    }

    /// A commit is a flush boundary: before a group's checkpoint may point at `next_offset`, the log
    /// up to it is flushed and producer.offset covers it. Throws `closed`, `io_error`. Thread-safe.
    void flush_for_commit(std::uint64_t next_offset);

    /// Waits until no group-commit flush is in flight (`lock` is `lock()`, released while waiting).
    /// Holding the lock afterwards keeps it so: only an append holding it starts a flush.
    void wait_for_idle_flush(std::unique_lock<std::mutex>& lock);

    /// Flushes what is pending (best effort), settles every waiting append, then closes `segments`
    /// and unmaps flush.mark. Caller holds `lock()` and waited with `wait_for_idle_flush` since
    /// taking it. Never throws.
    void close_locked() noexcept;

    /// The logical offset one past the newest published record (acquire). Thread-safe.
    std::uint64_t published_end() const noexcept { return published_end_.load(std::memory_order_acquire); }

    /// Records ever appended to the partition, published ones only (acquire). Thread-safe.
    std::uint64_t end_items() const noexcept { return published_items_.load(std::memory_order_acquire); }

    /// Records ever appended, published or not (under `immediate`, also those whose msync is still
    /// running). Thread-safe; takes the writer's mutex.
    std::uint64_t appended_items() const;

private:
    // Bounds on how far producer.offset lags the flushed data on the produce path (see
    // producer_hint_due).
    static constexpr std::size_t producer_hint_records = 64 * 1024;
    static constexpr std::chrono::steady_clock::duration producer_hint_period = std::chrono::seconds(1);

    // Why a flush failed, shared (read-only) by the waiting appends it settled: each throws an
    // `error` of its own built from it, so no exception object is shared between threads.
    struct flush_failure {
        errc code = errc::io_error;
        std::string message;  // the `error` message, without the code's own text
    };

    // An append waiting for its records to be durable (group commit); lives on the waiting thread's
    // stack, registered in waiters_ until a flush settles it. Fields guarded by mutex_.
    struct durability_waiter {
        std::uint64_t end = 0;  // the logical offset one past its last record
        bool settled = false;
        std::shared_ptr<const flush_failure> failure{};  // set when the flush that settled it failed
    };

    // The longest a flush leader waits for followers (see gather_followers).
    static constexpr std::chrono::microseconds max_gather_time{500};

    void require_open() const;
    void publish() noexcept;
    void publish_up_to(std::uint64_t position, std::uint64_t items) noexcept;
    std::uint64_t written_end() const noexcept;
    void write_record(std::unique_lock<std::mutex>& lock);
    void wait_until_durable(std::unique_lock<std::mutex>& lock, std::uint64_t end);
    void gather_followers(std::unique_lock<std::mutex>& lock);
    void lead_flush(std::unique_lock<std::mutex>& lock) noexcept;
    static std::shared_ptr<const flush_failure> current_failure() noexcept;
    void settle(std::uint64_t flushed_end, const std::shared_ptr<const flush_failure>& failure) noexcept;
    void flushed_tail(std::uint64_t position, std::uint64_t items) noexcept;
    void mark_flushed(std::uint64_t flushed_end) noexcept;
    std::uint64_t record_area() const noexcept;
    void reserve(mmap_segment_file& segment, std::uint64_t end);
    void roll_over(std::uint64_t flush_end);
    void flush_range(std::uint64_t from, std::uint64_t to);
    void flush_locked(bool force_checkpoint);
    bool producer_hint_due() const noexcept;
    void write_producer_hint() noexcept;
    void write_producer_checkpoint();

    const mmap_partition_files& files_;
    const settings settings_;
    mmap_segment_list& segments_;
    const std::string producer_path_;

    mutable std::mutex mutex_;
    std::vector<std::byte> payload_;            // guarded by mutex_
    mmap_segment_file* tail_ = nullptr;         // guarded by mutex_
    std::uint64_t tail_position_ = 0;           // guarded by mutex_
    std::uint64_t flushed_position_ = 0;        // guarded by mutex_
    std::uint64_t flushed_items_ = 0;           // records before flushed_position_; mutex_
    bool tail_ended_ = false;                   // the tail holds a segment-end marker; mutex_
    std::uint64_t items_ = 0;                   // records appended, published or not; mutex_
    mapped_region flush_mark_;                  // flush.mark, written under mutex_
    std::uint64_t checkpointed_offset_ = 0;     // guarded by mutex_
    std::size_t unflushed_records_ = 0;         // guarded by mutex_
    std::size_t records_since_checkpoint_ = 0;  // guarded by mutex_
    bool producer_hint_failed_ = false;         // guarded by mutex_
    // When producer.offset was last written, or the partition opened; guarded by mutex_.
    std::chrono::steady_clock::time_point checkpoint_time_ = std::chrono::steady_clock::now();
    // Group commit, all guarded by mutex_: a leader is gathering or msyncing (then nothing else
    // flushes, rolls over or closes); the appends waiting to be durable; how many appends the last
    // leader's flush settled or left waiting (the followers the next leader waits for), and how long
    // its msync took (bounds that wait).
    bool flushing_ = false;
    std::vector<durability_waiter*> waiters_;
    std::size_t expected_followers_ = 0;
    std::chrono::steady_clock::duration last_flush_time_{};
    std::condition_variable flush_done_;        // a leader finished; waiters re-check
    std::condition_variable follower_arrived_;  // an append started waiting; the gathering leader re-checks
    // Written together under mutex_ (items first), read by consumers: one cache line of their own.
    alignas(64) std::atomic<std::uint64_t> published_end_{0};
    std::atomic<std::uint64_t> published_items_{0};
};

}  // namespace bufferqueue::detail
