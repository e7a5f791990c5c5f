// Internal: which consumer of one group reads which partition, and the hand-over of a partition
// from one consumer to the next (revoked from its owner first, given to the next once it let go).
#pragma once

#include "bufferqueue/consumer/detail/shared_consumer.hpp"

#include <cstddef>
#include <limits>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace bufferqueue::detail {

/// One consumer group's partition owners: for each partition the consumer reading it, or none, and
/// the consumer that gets it once its owner let go (its operation ended and it holds no batch of
/// it), so one cursor is never used by two consumers at once.
///
/// Thread-safety: none of its own; every member is called under the group lock of the topic's
/// `consumer_groups`. It calls consumers only through `shared_consumer::reassign`, which never
/// calls back. Allocation: the members allocate (the consumers' new assignment sets); a
/// `std::bad_alloc` leaves a partition with nobody until it is reassigned.
class partition_owners {
public:
    using consumer_type = shared_consumer;
    using entry = partition_assignment;
    /// Consumers to keep alive until the group lock is released (their last reference may go there).
    using keep_alive = std::vector<std::shared_ptr<consumer_type>>;
    /// An initial owner meaning "nobody reads the partition yet".
    static constexpr std::size_t no_owner = std::numeric_limits<std::size_t>::max();

    partition_owners() = default;
    /// `members[i]` is consumer i; `initial_owners[p]` the consumer reading partition p, which is
    /// already in that consumer's assignment, or `no_owner`; `entries[p]` partition p's storage, signal and cursor.
    partition_owners(std::vector<std::weak_ptr<consumer_type>> members, std::vector<std::size_t> initial_owners,
                     std::vector<entry> entries);

    /// Every partition's storage, signal and the group's cursor, by partition number.
    std::span<const entry> entries() const noexcept { return entries_; }
    std::size_t consumers() const noexcept { return members_.size(); }

    /// Consumer `index` if it is alive and not detached, else null.
    std::shared_ptr<consumer_type> attached(std::size_t index) const
    {
        auto consumer = members_[index].consumer.lock();
        return members_[index].released ? nullptr : consumer;
    }

    /// Gives `partitions` to `consumer`: at once when nobody owns them (or it owns them), else once
    /// their owners let go. Indexes are valid (the caller checked them).
    void assign(std::size_t consumer, std::span<const std::size_t> partitions, keep_alive& alive);

    /// Takes `partitions` from `consumer`. Partitions it does not own are skipped; one it was to
    /// receive once another consumer let go of it is not handed to it.
    void revoke(std::size_t consumer, std::span<const std::size_t> partitions, keep_alive& alive);

    /// `consumer` let go of `partition` (see `consumer_membership::partition_released`).
    void partition_released(std::size_t consumer, std::size_t partition, keep_alive& alive);

    /// The partitions some consumer reads or is letting go of (revoked, not let go yet), ascending.
    std::vector<std::size_t> in_use() const;

    /// Whether a partition became nobody's (let go with no next owner) since the last call. Never throws.
    bool take_let_go() noexcept { return std::exchange(let_go_, false); }

    /// `consumer` detached: it owns nothing any more and gets nothing it was waiting for.
    void consumer_released(std::size_t consumer, keep_alive& alive);

private:
    static constexpr std::size_t none = no_owner;

    struct member {
        std::weak_ptr<consumer_type> consumer;
        bool released = false;  // detached: owns nothing any more
    };
    struct owner_state {
        std::size_t owner = none;       // the consumer reading the partition (or letting it go)
        std::size_t next_owner = none;  // who gets it once `owner` let go
        bool releasing = false;         // revoked from `owner`, which has not let go yet
    };
    struct pending_hand_over {
        std::size_t from;
        std::size_t partition;
    };

    // Publishes consumer `index`'s latest set with `added` and without `removed`; what it let go at
    // once joins `work`. A consumer gone (or detached) lets go of everything at once.
    void publish(std::size_t index, std::span<const entry> added, std::span<const std::size_t> removed,
                 std::vector<pending_hand_over>& work, keep_alive& alive);

    // Gives each partition let go to its next owner, which may let go of others in turn.
    void hand_over(std::vector<pending_hand_over>& work, keep_alive& alive);

    std::vector<member> members_;      // by consumer index
    std::vector<owner_state> owners_;  // by partition
    std::vector<entry> entries_;       // by partition
    bool let_go_ = false;              // a partition became nobody's since `take_let_go`
};

}  // namespace bufferqueue::detail
