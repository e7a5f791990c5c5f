// Which consumer of one group reads which partition: topic/detail/partition_owners.hpp.
#include "bufferqueue/topic/detail/partition_owners.hpp"

namespace bufferqueue::detail {

partition_owners::partition_owners(std::vector<std::weak_ptr<consumer_type>> members,
                                   std::vector<std::size_t> initial_owners, std::vector<entry> entries)
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

void partition_owners::assign(std::size_t consumer, std::span<const std::size_t> partitions, keep_alive& alive)
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

void partition_owners::revoke(std::size_t consumer, std::span<const std::size_t> partitions, keep_alive& alive)
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

void partition_owners::partition_released(std::size_t consumer, std::size_t partition, keep_alive& alive)
{
    if (consumer >= members_.size() || partition >= owners_.size()) {
        return;
    }
    std::vector<pending_hand_over> work{{consumer, partition}};
    hand_over(work, alive);
}

std::vector<std::size_t> partition_owners::in_use() const
{
    std::vector<std::size_t> used;
    for (std::size_t partition = 0; partition < owners_.size(); ++partition) {
        if (owners_[partition].owner != none) {
            used.push_back(partition);
        }
    }
    return used;
}

void partition_owners::consumer_released(std::size_t consumer, keep_alive& alive)
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

void partition_owners::publish(std::size_t index, std::span<const entry> added, std::span<const std::size_t> removed,
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

void partition_owners::hand_over(std::vector<pending_hand_over>& work, keep_alive& alive)
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

}  // namespace bufferqueue::detail
