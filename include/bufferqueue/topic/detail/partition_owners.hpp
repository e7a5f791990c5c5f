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
template <class T, class Partition>
class partition_owners {
public:
    using consumer_type = shared_consumer<T, Partition>;
    using entry = partition_assignment<Partition>;
    /// Consumers to keep alive until the group lock is released (their last reference may go there).
    using keep_alive = std::vector<std::shared_ptr<consumer_type>>;
    /// An initial owner meaning "nobody reads the partition yet".
    static constexpr std::size_t no_owner = std::numeric_limits<std::size_t>::max();

    partition_owners() = default;
    /// `members[i]` is consumer i; `initial_owners[p]` the consumer reading partition p, which is
    /// already in that consumer's assignment, or `no_owner`; `entries[p]` partition p's storage, signal and cursor.
    partition_owners(std::vector<std::weak_ptr<consumer_type>> members, std::vector<std::size_t> initial_owners,
                     std::vector<entry> entries)
        : entries_(std::move(entries))
    {
        for (auto& consumer : members) {
            members_.push_back({std::move(consumer)});
        }
        owners_.resize(entries_.size());
        for (std::size_t partition = 0; partition < owners_.size(); ++partition) {
            owners_[partition].owner = initial_owners[partition];
        }
    }

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
    void assign(std::size_t consumer, std::span<const std::size_t> partitions, keep_alive& alive)
    {
        std::vector<entry> taken;
        std::vector<std::vector<std::size_t>> revoked(members_.size());
        for (const std::size_t partition : partitions) {
            owner_state& owner = owners_[partition];
            if (owner.owner == consumer) {
                if (owner.releasing) {  // revoked and not let go yet: it simply stays
                    owner.releasing = false;
                    owner.next_owner = none;
                    taken.push_back(entries_[partition]);
                }
            } else if (owner.owner == none) {
                owner.owner = consumer;
                taken.push_back(entries_[partition]);
            } else {
                owner.next_owner = consumer;
                if (!owner.releasing) {
                    owner.releasing = true;
                    revoked[owner.owner].push_back(partition);
                }
            }
        }
        std::vector<pending_hand_over> work;
        for (std::size_t index = 0; index < revoked.size(); ++index) {
            if (!revoked[index].empty()) {
                publish(index, {}, revoked[index], work, alive);
            }
        }
        publish(consumer, taken, {}, work, alive);
        hand_over(work, alive);
    }

    /// Takes `partitions` from `consumer`. Partitions it does not own are skipped; one it was to
    /// receive once another consumer let go of it is not handed to it.
    void revoke(std::size_t consumer, std::span<const std::size_t> partitions, keep_alive& alive)
    {
        std::vector<std::size_t> removed;
        for (const std::size_t partition : partitions) {
            owner_state& owner = owners_[partition];
            if (owner.next_owner == consumer) {
                owner.next_owner = none;  // it was to get the partition once its holder let go
            }
            if (owner.owner == consumer && !owner.releasing) {
                owner.releasing = true;
                owner.next_owner = none;
                removed.push_back(partition);
            }
        }
        std::vector<pending_hand_over> work;
        publish(consumer, {}, removed, work, alive);
        hand_over(work, alive);
    }

    /// `consumer` let go of `partition` (see `consumer_membership::partition_released`).
    void partition_released(std::size_t consumer, std::size_t partition, keep_alive& alive)
    {
        if (consumer >= members_.size() || partition >= owners_.size()) {
            return;
        }
        std::vector<pending_hand_over> work{{consumer, partition}};
        hand_over(work, alive);
    }

    /// The partitions some consumer reads or is letting go of (revoked, not let go yet), ascending.
    std::vector<std::size_t> in_use() const
    {
        std::vector<std::size_t> used;
        for (std::size_t partition = 0; partition < owners_.size(); ++partition) {
            if (owners_[partition].owner != none) {
                used.push_back(partition);
            }
        }
        return used;
    }

    /// Whether a partition became nobody's (let go with no next owner) since the last call. Never throws.
    bool take_let_go() noexcept { return std::exchange(let_go_, false); }

    /// `consumer` detached: it owns nothing any more and gets nothing it was waiting for.
    void consumer_released(std::size_t consumer, keep_alive& alive)
    {
        members_[consumer].released = true;
        std::vector<pending_hand_over> work;
        for (std::size_t partition = 0; partition < owners_.size(); ++partition) {
            if (owners_[partition].next_owner == consumer) {
                owners_[partition].next_owner = none;
            }
            if (owners_[partition].owner == consumer) {
                owners_[partition].releasing = true;
                work.push_back({consumer, partition});
            }
        }
        hand_over(work, alive);
    }

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
                 std::vector<pending_hand_over>& work, keep_alive& alive)
    {
        if (added.empty() && removed.empty()) {
            return;
        }
        auto consumer = attached(index);
        if (!consumer) {
            for (const entry& each : added) {
                owners_[each.partition].owner = none;
            }
            for (const std::size_t partition : removed) {
                work.push_back({index, partition});
            }
            return;
        }
        auto next = consumer->assignment();
        if (!removed.empty()) {
            next = next->without(removed);
        }
        if (!added.empty()) {
            next = next->with(added);
        }
        std::vector<std::size_t> released;
        consumer->reassign(std::move(next), released);
        for (const std::size_t partition : released) {
            work.push_back({index, partition});
        }
        alive.push_back(std::move(consumer));
    }

    // Gives each partition let go to its next owner, which may let go of others in turn.
    void hand_over(std::vector<pending_hand_over>& work, keep_alive& alive)
    {
        while (!work.empty()) {
            const pending_hand_over next = work.back();
            work.pop_back();
            owner_state& owner = owners_[next.partition];
            if (owner.owner != next.from || !owner.releasing) {
                continue;  // assigned back to it meanwhile, or already handed over
            }
            owner.releasing = false;
            owner.owner = std::exchange(owner.next_owner, none);
            if (owner.owner != none) {
                publish(owner.owner, std::span<const entry>(&entries_[next.partition], 1), {}, work, alive);
            } else {
                let_go_ = true;
            }
        }
    }

    std::vector<member> members_;      // by consumer index
    std::vector<owner_state> owners_;  // by partition
    std::vector<entry> entries_;       // by partition
    bool let_go_ = false;              // a partition became nobody's since `take_let_go`
};

}  // namespace bufferqueue::detail
