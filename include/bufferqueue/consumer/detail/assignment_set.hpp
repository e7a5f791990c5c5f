// Internal: the partitions one consumer reads - an immutable set, and the consumer's view of it
// that changes only between its operations.
#pragma once

#include "bufferqueue/consumer/detail/partition_reader.hpp"
#include "bufferqueue/detail/partition_signal.hpp"
#include "bufferqueue/detail/spin_mutex.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace bufferqueue::detail {

/// An immutable set of assignments, ascending by partition. Shared between the consumer's
/// operations and whoever publishes the next set, so a scan never sees it change.
class assignment_set {
public:
    using entry = partition_assignment;

    /// Sorts `entries` by partition; a partition given twice is kept once. Allocates.
    explicit assignment_set(std::vector<entry> entries);

    std::span<const entry> entries() const noexcept { return entries_; }
    const std::vector<std::size_t>& partitions() const noexcept { return partitions_; }

    /// Items of these partitions their group has not committed (`lag_items` summed). Lock-free.
    std::uint64_t lag() const noexcept;

    bool contains(std::size_t partition) const noexcept
    {
        return std::binary_search(partitions_.begin(), partitions_.end(), partition);
    }

    /// This set and `added`. Allocates.
    std::shared_ptr<const assignment_set> with(std::span<const entry> added) const;

    /// This set without `removed`. Allocates.
    std::shared_ptr<const assignment_set> without(std::span<const std::size_t> removed) const;

private:
    std::vector<entry> entries_;
    std::vector<std::size_t> partitions_;
};

/// A consumer's partitions: the set its operations scan (`current`, changed only by `adopt`, by
/// the thread owning the consumer's operation) and the latest set published for it from any
/// thread. While nobody publishes, the scan pays one atomic load per rotation and nothing else.
/// Also tracks the delivered batch: the one still held (its items stay valid) and the one a
/// commit applies to, which a revoke makes uncommittable.
class consumer_assignment {
public:
    using entry = partition_assignment;
    using set_pointer = std::shared_ptr<const assignment_set>;

    explicit consumer_assignment(set_pointer initial) : current_(initial), latest_(std::move(initial)) {}

    /// Any thread: makes `next` the consumer's set from its next `adopt` on. Then `reassigned()`
    /// is true (a seq_cst store, for the consumer's idle check).
    /// A partition in the replaced latest set but not in `next` is remembered until `adopt`, which
    /// lets it go even if the consumer never adopted the set that held it. Allocates.
    void publish(set_pointer next);

    /// Any thread: the latest published set.
    set_pointer latest() const;

    /// Any thread: a set was published since the last `adopt`.
    bool reassigned() const noexcept { return reassigned_.load(std::memory_order_seq_cst); }

    // The members below belong to the thread owning the consumer's operation.

    const assignment_set& current() const noexcept { return *current_; }

    /// Called only through `ring_reader::adopt_latest`, which restarts the ring with the set.
    /// Makes the latest set current and calls `released(partition)` for each partition the consumer
    /// stops using: left out of the new set, and no batch of it held (that one goes when the batch
    /// is released). A delivered batch of a partition left out can no longer be committed.
    template <class Released>
    void adopt(Released&& released) noexcept
    {
        set_pointer next;
        std::vector<std::size_t> dropped;
        {
            std::lock_guard lock(mutex_);
            next = latest_;
            dropped.swap(dropped_);
            reassigned_.store(false, std::memory_order_relaxed);
        }
        const set_pointer previous = std::exchange(current_, std::move(next));
        const auto is_held = [this](std::size_t partition) { return holding_ && last_.partition == partition; };
        for (const std::size_t partition : previous->partitions()) {
            if (!current_->contains(partition)) {
                if (has_last_ && last_.partition == partition) {
                    last_revoked_ = true;
                }
                if (!is_held(partition)) {
                    released(partition);
                }
            }
        }
        // Published to this consumer and taken away again before it adopted them: never read
        // here, so let go at once (the membership ignores a partition reported twice). The held
        // batch's partition goes only when the batch is released.
        std::sort(dropped.begin(), dropped.end());
        dropped.erase(std::unique(dropped.begin(), dropped.end()), dropped.end());
        for (const std::size_t partition : dropped) {
            if (!previous->contains(partition) && !current_->contains(partition) && !is_held(partition)) {
                released(partition);
            }
        }
        // Decided here, once per adoption, so releasing the batch costs no look-up.
        held_left_ = holding_ && !current_->contains(last_.partition);
    }

    /// A pull of `delivered` handed out a batch ending at `next_offset`.
    void delivered(const entry& delivered, std::uint64_t next_offset) noexcept
    {
        last_ = delivered;
        last_next_offset_ = next_offset;
        has_last_ = true;
        holding_ = true;
        held_left_ = false;
        last_revoked_ = false;
    }

    /// Releases the held batch, if any; returns its partition when the consumer no longer reads it
    /// (revoked while the batch was held), for the caller to report as released.
    std::optional<std::size_t> release_held() noexcept;

    /// The partition of the last delivered batch (valid after a delivery).
    const entry& last() const noexcept { return last_; }
    std::uint64_t last_next_offset() const noexcept { return last_next_offset_; }
    /// The last delivered batch's partition was revoked since: committing it must fail.
    bool last_revoked() const noexcept { return last_revoked_; }

private:
    set_pointer current_;  // owned by the consumer's operation, like the members up to mutex_
    entry last_{};         // the last delivered batch's partition (when has_last_)
    std::uint64_t last_next_offset_ = 0;
    bool has_last_ = false;
    bool holding_ = false;       // the batch of last_ is still held (its items valid)
    bool held_left_ = false;     // holding_, and its partition is no longer in current_
    bool last_revoked_ = false;  // last_'s partition left an adopted set since its delivery

    mutable spin_mutex mutex_;
    set_pointer latest_;                   // guarded by mutex_
    std::vector<std::size_t> dropped_;     // guarded by mutex_: left out of a latest set since adopt
    std::atomic<bool> reassigned_{false};  // written under mutex_
};

}  // namespace bufferqueue::detail
