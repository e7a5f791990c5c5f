// Internal: the writer of a persistent partition's log - appends, disk reservation, rollover,
// flushes (msync and flush.mark), group commit of `immediate` produce calls and the producer.offset
// recovery hint (see docs/mmap-storage.md, "Writing", "Flushing" and "Group commit").
#pragma once

#include "bufferqueue/error.hpp"
#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/mmap_recovery.hpp"
#include "bufferqueue/mmap/detail/mmap_segment_list.hpp"
#include "bufferqueue/mmap/detail/process_shared_sync.hpp"
#include "bufferqueue/mmap/detail/shared_log_slot.hpp"
#include "bufferqueue/options.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
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
///
/// Process-shared topics (`share`): the log is appended to by the writers of several processes. Each
/// holds the partition's shared append lock (after its own mutex) while it writes, rolls over or
/// flushes: it adopts the state other processes stored in the shared slot, mapping the segments they
/// created, and stores its own back after every record. Group commit works across processes: an
/// msync flushes the pages of every process's records before its end, and the flushed end in the
/// slot tells the others.
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

    /// A partition's part of a process-shared topic's shared header.
    struct shared_log_link {
        process_shared_mutex lock;  ///< the partition's append lock
        shared_log_slot slot;       ///< the partition's shared log state, guarded by `lock`
        process_shared_event wake;  ///< notified after this writer published records
        std::string header_path;    ///< the shared header's path, for errors about what the slot holds
    };

    /// Shares the log with other processes through `link`. Call once, before any other call. With
    /// `first` (no other process has the topic open) the slot is written from this writer's
    /// recovered state and `retained_from` (the recovered earliest position); otherwise the writer
    /// adopts the slot's state, and publishes what it says is published. Throws `io_error` (the
    /// append lock is unusable), `timed_out` (another process held it for `process_shared_mutex::max_wait`),
    /// `corrupt_data` (the slot holds a state no writer stores, check_shared_log_state, or a segment
    /// it names is missing or damaged).
    /// Not thread-safe (the partition's constructor calls it).
    void share(shared_log_link link, bool first, log_position retained_from);

    /// Process-shared logs: where the retained log starts, as the slot says. Call inside
    /// `with_append_lock`. Never throws.
    log_position retained_from() const noexcept;

    /// Process-shared logs: stores where the retained log starts after this process's retention
    /// released segments (the others drop their mappings of them when they next take the lock).
    /// Call inside `with_append_lock`. Never throws.
    void store_retained_from(log_position start) noexcept;

    /// Process-shared logs: the item index where the retained log started when this writer last held
    /// the append lock (0 without `share`). Lock-free.
    std::uint64_t retained_from_items() const noexcept { return retained_items_.load(std::memory_order_acquire); }

    /// Process-shared logs: takes over what other processes appended (mapping the segments they
    /// created) and publishes it, and drops the segments another process's retention released;
    /// returns true when the published end moved. Without `share`, or once
    /// closed: false. Never throws (a failure leaves the view as it was; the next call retries).
    /// Thread-safe; blocks on the writer's mutex and the shared append lock.
    bool refresh() noexcept;

    /// Process-shared logs: a consumer of this process found nothing to read and may wait. Marks
    /// the slot, so that the next append of any process that publishes wakes the watchers (appends
    /// while no consumer waits wake nobody), and wakes this process's watcher itself when another
    /// process published more already. Lock-free; never throws. Without `share`: nothing.
    void note_consumer_waiting() const noexcept;

    /// Runs `work()` holding the writer's mutex and, for a process-shared log, the shared append
    /// lock (the partition creates group folders under it, so two processes never race to make one).
    /// Returns what `work` returns; throws what it throws, and what taking the lock throws.
    template <class Work>
    decltype(auto) with_append_lock(Work&& work)
    {
        std::unique_lock lock(mutex_);
        const shared_hold hold(*this);
        return std::forward<Work>(work)();
    }

    /// As `with_append_lock`, unless a group-commit flush is in flight in this process: then it
    /// returns false without running `work`. Process-shared retention runs so: another process may
    /// have flushed and published the leader's records, and the segment the leader msyncs must stay
    /// mapped until it is done.
    template <class Work>
    bool with_append_lock_unless_flushing(Work&& work)
    {
        std::unique_lock lock(mutex_);
        if (flushing_) {
            return false;
        }
        const shared_hold hold(*this);
        std::forward<Work>(work)();
        return true;
    }

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
        shared_hold hold(*this);
        try {
            while (appended < count) {
                payload_.clear();
                serialize(appended, payload_);
                write_record(lock, hold);
                ++appended;
                if (settings_.flush == flush_strategy::batch && unflushed_records_ >= settings_.flush_batch_size) {
                    if (shared_) {
                        flush_batch_shared(hold);
                    } else {
                        flush_locked(false);
                    }
                }
            }
        } catch (...) {
            publish();
            throw;
        }
        publish();
        const std::uint64_t end = written_end();
        hold.release();
        if (settings_.flush == flush_strategy::immediate) {
            wait_until_durable(lock, end);
        }
    }

    /// A commit is a flush boundary: before a group's checkpoint may point at `next_offset`, the log
    /// up to it is flushed and producer.offset covers it. Throws `closed`, `io_error`. Thread-safe.
    void flush_for_commit(std::uint64_t next_offset);

    /// Waits until no group-commit flush is in flight (`lock` is `lock()`, released while waiting).
    /// Holding the lock afterwards keeps it so: only an append holding it starts a flush.
    void wait_for_idle_flush(std::unique_lock<std::mutex>& lock);

    /// Process-shared logs: flushes what is pending (best effort) under the shared append lock, which
    /// `close_locked` does not take (the partition calls this before it takes its groups mutex: the
    /// shared lock comes before it, as when a group is opened). Caller holds `lock()` and waited with
    /// `wait_for_idle_flush`. Never throws.
    void flush_shared_for_close() noexcept;

    /// Flushes what is pending (best effort; a shared log's was flushed by `flush_shared_for_close`),
    /// settles every waiting append, then closes `segments` and unmaps flush.mark. Caller holds `lock()` and waited
    /// with `wait_for_idle_flush` since taking it. Never throws.
    void close_locked() noexcept;

    /// The logical offset one past the newest published record (acquire). Thread-safe.
    std::uint64_t published_end() const noexcept { return published_end_.load(std::memory_order_acquire); }

    /// Records ever appended to the partition, published ones only (acquire). Thread-safe.
    std::uint64_t end_items() const noexcept { return published_items_.load(std::memory_order_acquire); }

    /// Records ever appended, published or not (under `immediate`, also those whose msync is still
    /// running). Thread-safe; takes the writer's mutex.
    std::uint64_t appended_items() const;

private:
    // Holds the shared append lock of a process-shared log (nothing otherwise) while it lives, having
    // adopted the shared state when it took it; stores this writer's state back, unlocks and wakes
    // the other processes' watchers when released. Used under mutex_.
    class shared_hold {
    public:
        explicit shared_hold(mmap_log_writer& writer) : writer_(writer) { acquire(); }
        ~shared_hold() { release(); }
        shared_hold(const shared_hold&) = delete;
        shared_hold& operator=(const shared_hold&) = delete;

        void acquire()
        {
            // Once closed there is no tail to adopt: the caller's own checks report `closed`.
            if (writer_.shared_ && !held_ && !writer_.segments_.closed()) {
                writer_.lock_shared();
                held_ = true;
            }
        }

        void release() noexcept
        {
            if (held_) {
                held_ = false;
                writer_.unlock_shared();
            }
        }

    private:
        mmap_log_writer& writer_;
        bool held_ = false;
    };

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
    // The longest a leader waits for another process's msync that covers its records before it
    // msyncs itself (that process may have died in it).
    static constexpr std::chrono::milliseconds max_shared_flush_wait{50};

    void require_open() const;
    void publish() noexcept;
    void publish_up_to(std::uint64_t position, std::uint64_t items) noexcept;
    std::uint64_t written_end() const noexcept;
    void write_record(std::unique_lock<std::mutex>& lock, shared_hold& hold);
    void wait_until_durable(std::unique_lock<std::mutex>& lock, std::uint64_t end);
    void gather_followers(std::unique_lock<std::mutex>& lock);
    void lead_flush(std::unique_lock<std::mutex>& lock) noexcept;
    std::uint64_t gather_other_processes(const mmap_segment_file& segment, std::uint64_t claimed) noexcept;
    std::shared_ptr<const flush_failure> flush_tail_range(mmap_segment_file& segment, std::uint64_t from,
                                                          std::uint64_t to, std::uint64_t flush_end) noexcept;
    static std::shared_ptr<const flush_failure> current_failure() noexcept;
    void settle(std::uint64_t flushed_end, const std::shared_ptr<const flush_failure>& failure) noexcept;
    void flushed_tail(std::uint64_t position, std::uint64_t items) noexcept;
    void flushed_through(std::uint64_t flush_end, std::uint64_t items) noexcept;
    // Process-shared logs (mmap_log_sharing.cpp), all under mutex_.
    void lock_shared();
    void unlock_shared() noexcept;
    void store_shared(std::uint64_t pending_end) noexcept;
    void notify_gathering_leader() const noexcept;
    void flush_batch_shared(shared_hold& hold);
    void adopt(const shared_log_state& state);
    void adopt_retained_from(log_position start);
    void retire(std::vector<std::unique_ptr<mmap_segment_file>> released) noexcept;
    void map_segments_up_to(std::uint64_t index, std::uint64_t tail_first_item);
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
    std::condition_variable flush_done_;             // a leader finished; waiters re-check
    std::condition_variable follower_arrived_;       // an append started waiting; the gathering leader re-checks
    std::optional<shared_log_link> shared_;          // set by share() before any other call
    std::uint64_t shared_published_ = 0;             // the slot's published end when last adopted; mutex_
    std::atomic<std::uint64_t> retained_items_{0};   // the slot's retained-from position when last
    std::atomic<std::uint64_t> retained_offset_{0};  // adopted; both written under mutex_
    bool retained_moved_ = false;                    // store_retained_from raised it: unlock wakes the watchers; mutex_
    // Segments another process's retention released while this process's leader msynced one of
    // them without mutex_: kept mapped until that flush ends. Guarded by mutex_.
    std::vector<std::unique_ptr<mmap_segment_file>> retired_segments_;
    // Written together under mutex_ (items first), read by consumers: one cache line of their own.
    alignas(64) std::atomic<std::uint64_t> published_end_{0};
    std::atomic<std::uint64_t> published_items_{0};
};

/// The repair after a writer died holding a partition's shared append lock (the next holder calls it,
/// still holding the lock): zeroes the bytes between the slot's tail position and its pending end
/// in the tail segment, removes a successor file the slot does not name, and stores the repaired
/// slot. Throws `io_error`, `corrupt_data` (the slot holds a state no writer stores, naming
/// `header_path`, check_shared_log_state, and changes nothing; the tail segment is missing or damaged).
void repair_shared_tail(const mmap_partition_files& files, shared_log_slot slot, std::string_view header_path);

}  // namespace bufferqueue::detail
