// A topic's consumer groups: topic/detail/consumer_groups.hpp.
#include "bufferqueue/topic/detail/consumer_groups.hpp"

#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/error.hpp"

#include <algorithm>

namespace bufferqueue::detail {

std::vector<std::shared_ptr<consumer_base>> consumer_groups::create(const std::string& topic, slot_span slots,
                                                                    const pull_consumer_options& options,
                                                                    std::size_t count, const consumer_context& base)
{
    if (outside_ == nullptr) {
        return create_consumers(topic, slots, options, count, base);
    }
    const std::lock_guard order(membership_calls_mutex_);
    std::vector<std::shared_ptr<consumer_base>> made = create_consumers(topic, slots, options, count, base);
    try {
        outside_->consumers_created(options.group, made.size());
    } catch (...) {
        for (const auto& each : made) {
            each->close();  // reports consumer_closed: the mutex is recursive
        }
        throw;
    }
    return made;
}

bool consumer_groups::has_group(slot_span slots, const std::string& group)
{
    std::lock_guard lock(mutex_);
    return groups_.contains(group) || std::any_of(slots.begin(), slots.end(), [&](const partition_slot_base* slot) {
               return slot->has_group(group);
           });
}

bool consumer_groups::remove(const std::string& topic, slot_span slots, const std::string& group,
                             const std::atomic<bool>& topic_closed, capacity_release* gate)
{
    std::lock_guard lock(mutex_);
    if (topic_closed.load(std::memory_order_acquire)) {
        throw error(errc::closed,
                    format_message("topic '{}' is closed: cannot remove consumer group '{}'", topic, group));
    }
    const auto found = groups_.find(group);
    if (found != groups_.end() && found->second.open != 0) {
        throw error(errc::group_in_use, format_message("topic '{}': cannot remove consumer group '{}': {} of its "
                                                       "consumers are still open (close them first)",
                                                       topic, group, found->second.open));
    }
    const std::uint64_t consumed = found != groups_.end() ? consumed_since_opened(found->second) : 0;
    const bool held = remove_group_cursors(topic, slots, group, gate);
    const bool known = held || found != groups_.end();
    if (found != groups_.end()) {
        removed_consumed_ += consumed;
        groups_.erase(found);
    }
    return known;
}

void consumer_groups::close_all() noexcept
{
    std::vector<std::shared_ptr<consumer_type>> alive;  // released after the lock
    {
        std::lock_guard lock(mutex_);
        for (const auto& [name, group] : groups_) {
            for (std::size_t index = 0; index < group.owners.consumers(); ++index) {
                if (auto consumer = group.owners.attached(index)) {
                    alive.push_back(std::move(consumer));
                }
            }
        }
    }
    for (const auto& consumer : alive) {
        consumer->close();
    }
}

void consumer_groups::assign(const std::string& topic, const std::string& group, std::size_t consumer,
                             std::span<const std::size_t> partitions)
{
    keep_alive alive;  // released after the lock
    std::lock_guard lock(mutex_);
    require_member(topic, group, consumer, partitions, alive).owners.assign(consumer, partitions, alive);
}

void consumer_groups::revoke(const std::string& topic, const std::string& group, std::size_t consumer,
                             std::span<const std::size_t> partitions)
{
    keep_alive alive;  // released after the lock
    std::lock_guard lock(mutex_);
    auto& owners = require_member(topic, group, consumer, partitions, alive).owners;
    owners.revoke(consumer, partitions, alive);
    owners.take_let_go();  // what revoke let go at once, the membership learns from partitions_in_use
}

std::vector<std::size_t> consumer_groups::partitions_in_use(const std::string& topic, const std::string& group)
{
    const std::lock_guard lock(mutex_);
    const auto found = groups_.find(group);
    if (found == groups_.end()) {
        throw error(errc::invalid_argument,
                    format_message("topic '{}' group '{}': no consumer of the group was created", topic, group));
    }
    return found->second.owners.in_use();
}

void consumer_groups::partition_released(const std::string& group, std::size_t consumer, std::size_t partition) noexcept
{
    bool let_go = false;
    {
        keep_alive alive;  // released after the lock
        std::lock_guard lock(mutex_);
        if (const auto found = groups_.find(group); found != groups_.end()) {
            try {
                found->second.owners.partition_released(consumer, partition, alive);
            } catch (...) {
                // No memory for the next owner's set: the partition stays with nobody until reassigned.
            }
            let_go = found->second.owners.take_let_go();
        }
    }
    if (let_go && outside_ != nullptr) {
        outside_->partitions_let_go(group);  // without the lock: it may ask partitions_in_use at once
    }
}

void consumer_groups::consumer_released(const std::string& group, std::size_t consumer) noexcept
{
    // Under outside membership, held until the membership heard of it (see `create`).
    std::unique_lock order(membership_calls_mutex_, std::defer_lock);
    if (outside_ != nullptr) {
        order.lock();
    }
    bool let_go = false;
    {
        keep_alive alive;  // released after the lock
        std::lock_guard lock(mutex_);
        const auto found = groups_.find(group);
        if (found == groups_.end() || consumer >= found->second.owners.consumers()) {
            return;
        }
        group_state& state = found->second;
        if (state.open != 0) {
            --state.open;
        }
        try {
            state.owners.consumer_released(consumer, alive);
        } catch (...) {
            // No memory: the partitions stay with nobody until reassigned.
        }
        let_go = state.owners.take_let_go();
    }
    if (outside_ != nullptr) {
        if (let_go) {
            outside_->partitions_let_go(group);
        }
        outside_->consumer_closed(group, consumer);  // without the lock: it may assign at once
    }
}

std::string consumer_groups::consumer_problem(const std::string& group, std::size_t consumer) const
{
    return outside_ != nullptr ? outside_->consumer_problem(group, consumer) : std::string();
}

std::vector<std::shared_ptr<consumer_base>> consumer_groups::create_consumers(const std::string& topic, slot_span slots,
                                                                              const pull_consumer_options& options,
                                                                              std::size_t count,
                                                                              const consumer_context& base)
{
    const std::size_t partitions = slots.size();
    if (count < 1 || count > partitions) {
        throw error(errc::too_many_consumers,
                    format_message("topic '{}' group '{}': {} consumers requested, but the count must be between "
                                   "1 and the topic's {} partitions",
                                   topic, options.group, count, partitions));
    }
    std::lock_guard lock(mutex_);
    if (base.topic_closed->load(std::memory_order_acquire)) {
        throw error(errc::closed, format_message("topic '{}' is closed", topic));
    }
    if (const auto found = groups_.find(options.group); found != groups_.end() && found->second.open != 0) {
        throw error(errc::group_exists,
                    format_message("topic '{}': consumer group '{}' already exists and {} of its consumers are open",
                                   topic, options.group, found->second.open));
    }
    // All or nothing (group_cursors.hpp); a group reopened or known from disk is kept as it was.
    const bool known = groups_.contains(options.group);
    opened_group opened = open_group_cursors(topic, slots, options.group, base.gate);
    try {
        group_state& group = groups_[options.group];
        std::uint64_t baseline = group.consumed_baseline;  // kept when reopened in this process
        for (std::size_t partition = 0; !known && partition < partitions; ++partition) {
            baseline += slots[partition]->committed_items(opened.cursors[partition]);
        }
        std::vector<entry> entries;
        entries.reserve(partitions);
        for (std::size_t partition = 0; partition < partitions; ++partition) {
            entries.push_back({partition, slots[partition], &slots[partition]->signal, opened.cursors[partition]});
        }
        std::vector<std::weak_ptr<consumer_type>> members;
        std::vector<std::size_t> owners(partitions);
        std::vector<std::shared_ptr<consumer_type>> made;
        const std::size_t base_share = partitions / count;
        const std::size_t larger_shares = partitions % count;
        std::size_t next_partition = 0;
        if (outside_ != nullptr) {
            std::fill(owners.begin(), owners.end(), owners_type::no_owner);  // the membership assigns
        }
        for (std::size_t index = 0; index < count; ++index) {
            const std::size_t share = outside_ != nullptr ? 0 : base_share + (index < larger_shares ? 1 : 0);
            std::vector<entry> assignments;
            for (std::size_t i = 0; i < share; ++i, ++next_partition) {
                assignments.push_back(entries[next_partition]);
                owners[next_partition] = index;
            }
            consumer_context context = base;
            context.membership = this;
            context.index = index;
            made.push_back(std::make_shared<consumer_type>(
                std::move(context), options, std::make_shared<const assignment_set>(std::move(assignments))));
            members.push_back(made.back());
        }
        std::vector<std::shared_ptr<consumer_base>> created(made.begin(), made.end());
        // Nothing throws from here on.
        for (const auto& each : made) {
            each->mark_counted();
        }
        group = group_state{count, {std::move(members), std::move(owners), std::move(entries)}, baseline};
        return created;
    } catch (...) {
        if (!known) {
            groups_.erase(options.group);
        }
        undo_group_cursors(slots, options.group, opened.created_in, base.gate);
        throw;
    }
}

std::uint64_t consumer_groups::consumed_since_opened(const group_state& group) noexcept
{
    std::uint64_t committed = 0;
    for (const entry& each : group.owners.entries()) {
        committed += each.storage->committed_items(each.cursor);
    }
    return committed > group.consumed_baseline ? committed - group.consumed_baseline : 0;
}

consumer_groups::group_state& consumer_groups::require_member(const std::string& topic, const std::string& group,
                                                              std::size_t consumer,
                                                              std::span<const std::size_t> partitions,
                                                              keep_alive& alive)
{
    const auto found = groups_.find(group);
    const std::string where = format_message("topic '{}' group '{}'", topic, group);
    if (found == groups_.end() || found->second.open == 0) {
        throw error(errc::invalid_argument,
                    format_message("{}: no open consumer of the group to assign partitions to", where));
    }
    group_state& state = found->second;
    if (consumer >= state.owners.consumers()) {
        throw error(errc::invalid_argument, format_message("{}: there is no consumer {} (the group has {})", where,
                                                           consumer, state.owners.consumers()));
    }
    auto target = state.owners.attached(consumer);
    if (!target || target->is_closed()) {
        throw error(errc::closed, format_message("{}: consumer {} is closed", where, consumer));
    }
    alive.push_back(std::move(target));
    for (const std::size_t partition : partitions) {
        if (partition >= state.owners.entries().size()) {
            throw error(errc::invalid_argument, format_message("{}: there is no partition {} (the topic has {})", where,
                                                               partition, state.owners.entries().size()));
        }
    }
    return state;
}

}  // namespace bufferqueue::detail
