// Internal: the tail of a process-shared partition's log, handed between the writers of the
// processes under the partition's append lock - taking it over as the shared header's slot says
// (mapping the segments other processes rolled over to, dropping those their retention released),
// handing it back, and the `batch` flush with the lock let go (see docs/mmap-storage.md,
// "Process-shared topics").
#pragma once

#include "bufferqueue/mmap/detail/group_commit.hpp"
#include "bufferqueue/mmap/detail/mmap_segment_list.hpp"
#include "bufferqueue/mmap/detail/segment_appender.hpp"
#include "bufferqueue/mmap/detail/shared_append.hpp"

#include <cstdint>

namespace bufferqueue::detail {

/// Keeps this process's `segment_appender` on the tail of a log that the writers of several
/// processes append to. Taking the append lock (`hold`) adopts the slot's tail: another process may
/// have appended, rolled over (this one maps the segments it created), flushed, or released segments
/// by retention (this one drops its mappings of them, kept mapped by the `group_commit` while its
/// leader msyncs one); letting go stores the appender's tail back and wakes the other processes'
/// watchers (`shared_append`). For a log that is not shared (`active()` false) a hold takes nothing
/// and `flush_batch` is the appender's own flush.
///
/// Thread-safety: part of `mmap_log_writer`; every member is called holding the writer's mutex,
/// which guards the parts it works on. Allocation: adopting maps the segments other processes
/// created; a failure's message. Completion: every call is synchronous and blocks on the append
/// lock (bounded by `process_shared_mutex::max_wait`) and the disk. Errors: as each member says.
class shared_tail {
public:
    /// `files`, `segments`, `commit`, `shared` and `appender` must outlive this. Never throws.
    shared_tail(const mmap_partition_files& files, mmap_segment_list& segments, group_commit& commit,
                shared_append& shared, segment_appender& appender) noexcept
        : files_(files), segments_(segments), commit_(commit), shared_(shared), appender_(appender)
    {
    }

    shared_tail(const shared_tail&) = delete;
    shared_tail& operator=(const shared_tail&) = delete;

    /// Holds the append lock of a process-shared log (nothing otherwise) while it lives, having
    /// adopted the slot's tail when it took it; stores the appender's tail back, unlocks and wakes
    /// the other processes' watchers when released. Used under the writer's mutex. `acquire`
    /// throws what `shared_tail::lock` throws; once the partition closed it takes nothing.
    class hold {
    public:
        explicit hold(shared_tail& tail) : tail_(tail) { acquire(); }
        ~hold() { release(); }
        hold(const hold&) = delete;
        hold& operator=(const hold&) = delete;

        void acquire()
        {
            // Once closed there is no tail to adopt: the caller's own checks report `closed`.
            if (tail_.active() && !held_ && !tail_.segments_.closed()) {
                tail_.lock();
                held_ = true;
            }
        }

        void release() noexcept
        {
            if (held_) {
                held_ = false;
                tail_.unlock();
            }
        }

    private:
        shared_tail& tail_;
        bool held_ = false;
    };

    /// Whether the log is shared (`shared_append::attach` was called). Never throws.
    bool active() const noexcept { return shared_.active(); }

    /// The first process to open the topic: writes the slot from the appender's recovered state and
    /// `retained_from`. Throws what taking the append lock throws (`io_error`, `timed_out`).
    void initialize(log_position retained_from);

    /// A later process to open the topic: adopts the slot's tail under the append lock, repairing
    /// what a writer that died holding it left, then publishes what the slot says is published
    /// (every process's). Throws what `lock` throws.
    void join();

    /// Takes the append lock (which checks the slot and repairs after a dead holder), then adopts the
    /// slot's tail. Throws `io_error`, `timed_out`, `corrupt_data` (the slot holds a state no writer
    /// stores, or a segment it names is missing or damaged); then the lock is not held. Use `hold`.
    void lock();

    /// Stores the appender's tail into the slot, lets go of the append lock and wakes the other
    /// processes' watchers when it published records (`shared_append::unlock`). Never throws.
    void unlock() noexcept;

    /// The `batch` flush of the pending records. For a shared log the msync runs with `held` let go,
    /// so the other processes append meanwhile (the writer's mutex stays held: nothing in this
    /// process unmaps the segment); taking the lock again adopts what they did, and the flushed end
    /// moves only if no other process's flush or rollover covered more meanwhile. Throws `io_error`
    /// (a shared log's with the lock taken again), and what `lock` throws.
    void flush_batch(hold& held);

private:
    void adopt(const shared_log_state& state);
    void adopt_retained_from(log_position start);
    void map_segments_up_to(std::uint64_t index, std::uint64_t tail_first_item);

    const mmap_partition_files& files_;
    mmap_segment_list& segments_;
    group_commit& commit_;
    shared_append& shared_;
    segment_appender& appender_;
};

}  // namespace bufferqueue::detail
