// Internal: one consumer group's read position in a partition of a Kafka topic - the group member
// that owns the partition now, and the records read from the committed position on (see
// kafka_partition.hpp, which is the only code that reads or writes its private state).
#pragma once

#include "bufferqueue/kafka/detail/kafka_group_member.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace bufferqueue::detail {

template <class T>
class kafka_partition;

/// `kafka_partition<T>::cursor`: set_owner / clear_owner run on the members' executor (the
/// rebalance listener) while the cursor's consumer pulls; the owner is guarded by a mutex of the
/// cursor, never held across a network call. Everything else is the partition's, used by the one
/// consumer holding the partition.
template <class T>
class kafka_partition_cursor {
public:
    /// The member that owns the partition for this group from now on (rebalance listener).
    void set_owner(std::shared_ptr<kafka_group_member> member)
    {
        const std::lock_guard lock(owner_mutex_);
        owner_ = std::move(member);
        ++generation_;
    }

    /// `member` lost the partition: nothing more is read through it.
    void clear_owner(const kafka_group_member* member)
    {
        const std::lock_guard lock(owner_mutex_);
        if (owner_.get() == member) {
            owner_.reset();
            ++generation_;
        }
    }

private:
    friend class kafka_partition<T>;

    std::shared_ptr<kafka_group_member> owner(std::uint64_t& generation) const
    {
        const std::lock_guard lock(owner_mutex_);
        generation = generation_;
        return owner_;
    }

    mutable std::mutex owner_mutex_;
    std::shared_ptr<kafka_group_member> owner_;  // guarded by owner_mutex_
    std::uint64_t generation_ = 0;               // guarded by owner_mutex_: changes with the owner
    // The group's committed offset: the highest of this process's commits and what the brokers
    // reported to the last statistics snapshot (`kafka_partition::record_committed`).
    std::atomic<std::uint64_t> committed_{0};
    // Used by the one consumer holding the partition (the topic layer hands cursors over):
    std::uint64_t seen_generation_ = 0;
    std::uint64_t read_assignment_ = 0;               // the owner's assignment items_ and raw_ were read from
    std::weak_ptr<kafka_group_member> floor_member_;  // the member that made the last commit,
    std::uint64_t floor_ = 0;                         // and the offset it committed
    std::vector<T> items_;                            // decoded records from the committed position on
    std::vector<std::uint64_t> offsets_;              // each item's offset
    std::size_t committed_prefix_ = 0;                // items_ a commit passed, dropped at the next pull
    std::vector<kafka_record> raw_;                   // read, not decoded yet (after a record failed to decode)
    std::size_t raw_next_ = 0;
    bool undecodable_ = false;  // raw_[raw_next_] failed to decode: every pull stops there until a
                                // commit (`skip()`) passes it
};

}  // namespace bufferqueue::detail
