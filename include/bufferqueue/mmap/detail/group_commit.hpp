// Internal: the group commit of a persistent partition's `immediate` appends - an append waits until
// a flush covered its records, one waiter leads the flush when none is in flight, and the flush
// settles every waiter it covered (see docs/mmap-storage.md, "Group commit").
#pragma once

#include "bufferqueue/error.hpp"
#include "bufferqueue/mmap/detail/mmap_segment_list.hpp"
#include "bufferqueue/mmap/detail/shared_append.hpp"

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace bufferqueue::detail {

/// Why a flush failed, shared (read-only) by the waiting appends it settled: each throws an `error`
/// of its own built from it, so no exception object is shared between threads.
struct flush_failure {
    errc code = errc::io_error;
    std::string message;  ///< the `error` message, without the code's own text
};

/// Batches the msyncs of `immediate` appends and acknowledges them. An append whose records are not
/// durable yet waits (`wait_until_durable`: the writer's mutex released, on a condition variable;
/// callers are blocking-pool or user threads, never executor threads) until a flush covered its last
/// record. When no flush is in flight one waiter becomes the leader: it waits briefly for the
/// producers of the previous flush to append again (gather_followers), msyncs everything appended so
/// far with the mutex released, then settles every waiter the flush covered - with success, or with
/// the flush's error - and wakes the others. At most one msync of the log runs at a time: rollovers,
/// commits and close wait for the leader (`wait_for_idle_flush`). For a process-shared log the
/// leaders of the processes coordinate through the slot (one claimed msync at a time, extended to
/// every process's records), and segments another process's retention released stay mapped while
/// this process's leader msyncs (`keep_mapped`).
///
/// Thread-safety: part of `mmap_log_writer`; every member is called holding the writer's mutex (the
/// `lock` passed in), which guards every field. Allocation: a failure's message; `keep_mapped` grows
/// a vector; a waiter lives on its thread's stack, registered in a vector that keeps its capacity.
/// Completion: an append completes (returns or throws) on its own thread once settled.
/// Errors: as each member says; a failed msync's `error` reaches every append it covered.
class group_commit {
public:
    /// The tail's bytes a leader msyncs: [from, to) of `segment`, holding the log up to the logical
    /// offset `flush_end` and `items` records before it.
    struct flush_range {
        mmap_segment_file* segment = nullptr;
        std::uint64_t from = 0;
        std::uint64_t to = 0;
        std::uint64_t items = 0;
        std::uint64_t flush_end = 0;
    };

    /// `files`, `segments` and `shared` must outlive this. Never throws.
    group_commit(const mmap_partition_files& files, const mmap_segment_list& segments,
                 const shared_append& shared) noexcept
        : files_(files), segments_(segments), shared_(shared)
    {
    }

    group_commit(const group_commit&) = delete;
    group_commit& operator=(const group_commit&) = delete;

    /// Whether a leader is gathering or msyncing (then nothing else flushes, rolls over or closes).
    bool flushing() const noexcept { return flushing_; }

    /// Waits until no flush is in flight (`lock` released while waiting). Holding the lock afterwards
    /// keeps it so: only an append holding it starts a flush. Never throws.
    void wait_for_idle_flush(std::unique_lock<std::mutex>& lock);

    /// Waits until a flush settled the append whose records end at the logical offset `end` (not
    /// durable yet), leading one when none is in flight: `take_range()` returns what to msync (called
    /// once the leader gathered its followers), `flushed(range)` records a successful msync (both
    /// under the mutex, neither may throw). Throws the `error` of the flush that covered it (`io_error`,
    /// or `closed` when the partition closed before its flush).
    template <class TakeRange, class Flushed>
    void wait_until_durable(std::unique_lock<std::mutex>& lock, std::uint64_t end, TakeRange&& take_range,
                            Flushed&& flushed)
    {
        durability_waiter self{.end = end};
        enlist(self);
        while (!self.settled) {
            if (flushing_) {
                flush_done_.wait(lock);
            } else if (segments_.closed()) {
                // Not reached: close settles every waiter. Kept so a waiter can never touch a closed tail.
                withdraw_closed(self);
            } else {
                lead_flush(lock, take_range, flushed);
            }
        }
        if (self.failure) {
            throw error(self.failure->code, self.failure->message);
        }
    }

    /// Settles the waiting appends whose records end at or before `flushed_end`, with `failure`
    /// (nullptr: success); an msync the writer ran itself (no leader in flight). Never throws.
    void settle(std::uint64_t flushed_end, const std::shared_ptr<const flush_failure>& failure) noexcept;

    /// Settles every waiting append with `closed` (the partition closes; its flush failed before its
    /// msync). Never throws.
    void settle_closed() noexcept;

    /// The failure of the exception being handled (call inside a catch block). An `error` keeps its
    /// code and message; anything else (out of memory) fails the waiting appends with `io_error`.
    static std::shared_ptr<const flush_failure> current_failure() noexcept;

    /// Segments another process's retention released: unmapped at once (as `released` goes), unless
    /// a leader of this process msyncs without the mutex now - it may msync one of them (its records,
    /// flushed and published by another process meanwhile, were committed past) - then kept mapped
    /// until that flush ends. Never throws.
    void keep_mapped(std::vector<std::unique_ptr<mmap_segment_file>> released) noexcept;

private:
    // An append waiting for its records to be durable; lives on the waiting thread's stack,
    // registered in waiters_ until a flush settles it. Fields guarded by the writer's mutex.
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

    // Flushes everything appended so far with the mutex released, then settles the appends it covered
    // and wakes the others. Nothing else flushes, rolls over or closes while flushing_ is set, so the
    // tail stays the tail (and mapped) throughout.
    template <class TakeRange, class Flushed>
    void lead_flush(std::unique_lock<std::mutex>& lock, TakeRange& take_range, Flushed& flushed) noexcept
    {
        flushing_ = true;
        gather_followers(lock);
        const flush_range range = take_range();
        const std::shared_ptr<const flush_failure> failure = msync_unlocked(lock, range);
        if (!failure) {
            flushed(range);
        }
        finish_flush(range.flush_end, failure);
    }

    void enlist(durability_waiter& waiter);
    [[noreturn]] void withdraw_closed(durability_waiter& waiter);
    void gather_followers(std::unique_lock<std::mutex>& lock);
    std::shared_ptr<const flush_failure> msync_unlocked(std::unique_lock<std::mutex>& lock,
                                                        const flush_range& range) noexcept;
    std::shared_ptr<const flush_failure> flush_tail_range(mmap_segment_file& segment, std::uint64_t from,
                                                          std::uint64_t to, std::uint64_t flush_end) noexcept;
    std::uint64_t gather_other_processes(const mmap_segment_file& segment, std::uint64_t claimed) noexcept;
    void finish_flush(std::uint64_t flush_end, const std::shared_ptr<const flush_failure>& failure) noexcept;

    const mmap_partition_files& files_;
    const mmap_segment_list& segments_;
    const shared_append& shared_;
    // All guarded by the writer's mutex: a leader is gathering or msyncing; the appends waiting to
    // be durable; how many appends the last leader's flush settled or left waiting (the followers
    // the next leader waits for), and how long its msync took (bounds that wait).
    bool flushing_ = false;
    std::vector<durability_waiter*> waiters_;
    std::size_t expected_followers_ = 0;
    std::chrono::steady_clock::duration last_flush_time_{};
    std::condition_variable flush_done_;        // a leader finished; waiters re-check
    std::condition_variable follower_arrived_;  // an append started waiting; the gathering leader re-checks
    // Segments another process's retention released while this process's leader msynced one of
    // them without the mutex: kept mapped until that flush ends. Guarded by the writer's mutex.
    std::vector<std::unique_ptr<mmap_segment_file>> retired_segments_;
};

}  // namespace bufferqueue::detail
