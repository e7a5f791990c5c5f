// bufferqueue: how a storage partition wakes the consumers waiting on it when data arrives from
// outside the process's producers (a broker, another process), and learns that one is about to wait.
#pragma once

#include "bufferqueue/detail/partition_signal.hpp"

#include <concepts>

namespace bufferqueue {

/// Wakes the consumers waiting on one partition of a topic. The topic hands one to each partition
/// that declares `void bind_waker(partition_waker) noexcept` (see `storage_partition` in
/// storage/storage.hpp), once, when the partition joins the topic and before any consumer exists.
/// Appends made through `append` need no waker: the topic wakes the waiters after every append
/// itself. A partition uses it for records that reach it any other way.
///
/// Copyable; a default-constructed waker does nothing. Valid while the partition object lives: the
/// topic destroys a partition before the state the waker points to.
class partition_waker {
public:
    /// A waker bound to no partition: `notify()` does nothing. Never throws.
    partition_waker() noexcept = default;

    /// Wakes every consumer waiting on the partition; each then calls `has_data` / `pull` again on
    /// its own executor (or the topic's blocking pool), never inside this call. Call it after the new
    /// records are visible to `has_data` and `pull`: a consumer that starts waiting concurrently
    /// either sees the records or is woken. Thread-safe, from any thread; never blocks beyond a short
    /// internal lock, never allocates while four or fewer consumers wait, never throws. It may be
    /// called while the partition holds its own lock (it never calls back into the partition).
    void notify() const noexcept
    {
        if (signal_ != nullptr) {
            signal_->notify();
        }
    }

    /// For the topic layer: the waker of the partition waiting on `signal`.
    explicit partition_waker(detail::partition_signal& signal) noexcept : signal_(&signal) {}

private:
    detail::partition_signal* signal_ = nullptr;
};

/// A partition told when a consumer is about to wait on one of its cursors, optional.
/// `prepare_wait(cursor)` (noexcept, never blocks beyond a short lock) is called on the consumer's
/// path after the consumer registered with the partition's waker and before it parks (also for each
/// partition a ring scan found empty and will watch): the partition arranges that records arriving
/// from outside from now on are followed by a `partition_waker::notify` (a process-shared mmap
/// partition marks its shared slot, so that the next append of another process wakes this process's
/// watcher, and wakes it itself when another process published more already), then returns
/// `has_data(cursor)`. A consumer that gets false may sleep: it is woken for every record
/// published after the call. Storage whose outside records always notify (a broker's fetch thread)
/// and storage without outside records need not declare it; `prepare_wait(partition, cursor)`
/// below then asks `has_data`. Called as often as `has_data` on a waiting consumer's path, so it
/// costs no more than a few atomic operations when nothing changed.
template <class Partition>
concept waiting_partition = requires(Partition& partition, const typename Partition::cursor& cursor)
{
    {
        partition.prepare_wait(cursor)
    }
    noexcept->std::same_as<bool>;
};

/// A consumer of `cursor` is about to wait on `partition`: `partition.prepare_wait(cursor)` for a
/// `waiting_partition`, else `partition.has_data(cursor)`. Returns whether `pull` would return
/// something now. Noexcept; thread-safety and cost those of the member it calls.
template <class Partition>
bool prepare_wait(Partition& partition, const typename Partition::cursor& cursor) noexcept
{
    if constexpr (waiting_partition<Partition>) {
        return partition.prepare_wait(cursor);
    } else {
        return partition.has_data(cursor);
    }
}

}  // namespace bufferqueue
