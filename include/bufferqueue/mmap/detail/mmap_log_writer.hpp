// Internal: the writer of a persistent partition's log - a thin composition of its jobs under one
// mutex: segment_appender.hpp (appending into the tail segment, rollover, flushes, publishing,
// producer.offset), group_commit.hpp (batching the msyncs of `immediate` appends and acknowledging
// them), and for a process-shared log shared_append.hpp (the append lock and slot) and
// shared_tail.hpp (taking over the tail other processes moved). See docs/mmap-storage.md,
// "Writing", "Flushing", "Group commit" and "Process-shared topics".
#pragma once

#include "bufferqueue/error.hpp"
#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/group_commit.hpp"
#include "bufferqueue/mmap/detail/mmap_recovery.hpp"
#include "bufferqueue/mmap/detail/mmap_segment_list.hpp"
#include "bufferqueue/mmap/detail/segment_appender.hpp"
#include "bufferqueue/mmap/detail/shared_append.hpp"
#include "bufferqueue/mmap/detail/shared_tail.hpp"
#include "bufferqueue/options.hpp"

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace bufferqueue::detail {

/// Appends records to a partition's log and publishes them. Appends are serialized by the writer's
/// mutex, which guards the state of its parts: the `segment_appender` checks the size of each
/// serialized record, rolls over, reserves, encodes and flushes by strategy; under `immediate` the
/// append then waits in the `group_commit` until a flush covered its records; for a process-shared
/// log (`share`) the partition's shared append lock (`shared_append`, taken after the mutex) is held
/// while it writes, rolls over or flushes (`shared_tail::hold`, adopting what other processes
/// appended), and the appender stores its tail into the slot around every record.
/// `published_end()` and `end_items()` are lock-free. Lock order: the writer's mutex, then the
/// shared append lock (then the checkpoint store's groups mutex, then the segment list's).
///
/// Thread-safety: as each member says. Allocation: the appender's reused payload buffer, a
/// rollover's new segment, a failure's message. Completion: synchronous; `append` blocks (never call
/// it on an executor thread). Errors: as each member says.
class mmap_log_writer {
public:
    /// The chunk of disk blocks reserved at a time (also when recovery creates a segment).
    static constexpr std::uint64_t reservation_chunk = segment_appender::reservation_chunk;

    using settings = segment_appender::settings;
    using shared_log_link = detail::shared_log_link;

    /// Continues the log in `segments` (whose last segment is the tail) from the recovered `tail`.
    /// `files` and `segments` must outlive the writer. Never throws.
    mmap_log_writer(const mmap_partition_files& files, settings configuration, mmap_segment_list& segments,
                    const mmap_recovered_tail& tail, mapped_region flush_mark) noexcept;

    mmap_log_writer(const mmap_log_writer&) = delete;
    mmap_log_writer& operator=(const mmap_log_writer&) = delete;

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
    log_position retained_from() const noexcept { return shared_.retained_from(); }

    /// Process-shared logs: stores where the retained log starts after this process's retention
    /// released segments (the others drop their mappings of them when they next take the lock).
    /// Call inside `with_append_lock`. Never throws.
    void store_retained_from(log_position start) noexcept { shared_.store_retained_from(start); }

    /// Process-shared logs: the item index where the retained log started when this writer last held
    /// the append lock (0 without `share`). Lock-free.
    std::uint64_t retained_from_items() const noexcept { return shared_.retained_items(); }

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
    void note_consumer_waiting() const noexcept { shared_.note_consumer_waiting(published_end()); }

    /// Runs `work()` holding the writer's mutex and, for a process-shared log, the shared append
    /// lock (the partition creates group folders under it, so two processes never race to make one).
    /// Returns what `work` returns; throws what it throws, and what taking the lock throws.
    template <class Work>
    decltype(auto) with_append_lock(Work&& work)
    {
        std::unique_lock lock(mutex_);
        const shared_hold hold(tail_);
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
        if (commit_.flushing()) {
            return false;
        }
        const shared_hold hold(tail_);
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
        appender_.require_open();
        shared_hold hold(tail_);
        std::vector<std::byte>& payload = appender_.payload();
        try {
            while (appended < count) {
                payload.clear();
                serialize(appended, payload);
                while (!appender_.write_record()) {
                    wait_for_rollover(lock, hold);
                }
                ++appended;
                if (appender_.batch_flush_due()) {
                    tail_.flush_batch(hold);
                }
            }
        } catch (...) {
            appender_.publish();
            throw;
        }
        appender_.publish();
        const std::uint64_t end = appender_.written_end();
        hold.release();
        if (immediate_) {
            wait_until_durable(lock, end);
        }
    }

    /// A commit is a flush boundary: before a group's checkpoint may point at `next_offset`, the log
    /// up to it is flushed and producer.offset covers it. Throws `closed`, `io_error`. Thread-safe.
    void flush_for_commit(std::uint64_t next_offset);

    /// Waits until no group-commit flush is in flight (`lock` is `lock()`, released while waiting).
    /// Holding the lock afterwards keeps it so: only an append holding it starts a flush.
    void wait_for_idle_flush(std::unique_lock<std::mutex>& lock) { commit_.wait_for_idle_flush(lock); }

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
    std::uint64_t published_end() const noexcept { return appender_.published_end(); }

    /// Records ever appended to the partition, published ones only (acquire). Thread-safe.
    std::uint64_t end_items() const noexcept { return appender_.end_items(); }

private:
    using shared_hold = shared_tail::hold;

    void wait_for_rollover(std::unique_lock<std::mutex>& lock, shared_hold& hold);
    void wait_until_durable(std::unique_lock<std::mutex>& lock, std::uint64_t end);
    void leader_flushed(const group_commit::flush_range& range) noexcept;

    const bool immediate_;      // flush_strategy::immediate: appends wait in the group commit
    mutable std::mutex mutex_;  // guards the state of the parts below
    shared_append shared_;
    group_commit commit_;
    segment_appender appender_;
    shared_tail tail_;
};

}  // namespace bufferqueue::detail
