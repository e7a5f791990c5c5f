// bufferqueue: how a storage partition wakes the consumers waiting on it when data arrives from
// outside the process's producers (a broker, another process).
#pragma once

#include "bufferqueue/detail/partition_signal.hpp"

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

}  // namespace bufferqueue
