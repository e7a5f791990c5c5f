// Internal: a topic's consumer groups - creating their consumers, counting the open ones, and which
// consumer reads which partition (fixed shares, or assigned and revoked by a group protocol).
#pragma once

#include "bufferqueue/consumer/detail/consumer_context.hpp"
#include "bufferqueue/consumer/detail/shared_consumer.hpp"
#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/options.hpp"
#include "bufferqueue/storage/group_membership.hpp"
#include "bufferqueue/topic/detail/group_cursors.hpp"
#include "bufferqueue/topic/detail/partition_owners.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace bufferqueue::detail {

/// The consumer groups of one topic over its partition slots (`Slots`: a random-access range of
/// pointers to objects with `storage` and `signal`). Each group created in this process keeps how
/// many of its consumers are open and its `partition_owners` (who reads which partition; a
/// partition moves between consumers only through them, so one cursor is never used by two
/// consumers at once).
///
/// Thread-safety: every member is thread-safe; one mutex guards the groups (registration and
/// reassignment only, never a data path). Consumers are called under it only through
/// `shared_consumer::reassign`, which never calls back.
template <class T, class Partition>
class consumer_groups final : public consumer_membership {
public:
    using consumer_type = shared_consumer<T, Partition>;
    using entry = partition_assignment<Partition>;

    /// From now on, consumers start with no partitions and `membership` hears of every consumer that
    /// closes (outside membership: it assigns them). Call once, before any consumer is created.
    void use_outside_membership(group_membership& membership) noexcept { outside_ = &membership; }

    /// Creates `count` consumers of a new group, or of one whose consumers are all closed; each gets
    /// a contiguous share of the partitions (the first ones one more), or none under outside
    /// membership (`use_outside_membership`). `base` is the topic's part of
    /// every consumer's context. Throws `bufferqueue::error`: `too_many_consumers`, `closed`,
    /// `group_exists`, or what opening a cursor threw (then no partition keeps the new group).
    ///
    /// Under outside membership, the membership then hears `consumers_created` (if it throws, the
    /// new consumers are closed and it is rethrown). A group's creations and its consumers'
    /// `consumer_closed` reach the membership one at a time, in the order they happened here: the
    /// close of a group's last consumer is reported before the group's next creation.
    template <class Slots>
    std::vector<std::shared_ptr<consumer_base<T>>> create(const std::string& topic, const Slots& slots,
                                                          const pull_consumer_options& options, std::size_t count,
                                                          const consumer_context& base)
    {
        if (outside_ == nullptr) {
            return create_consumers(topic, slots, options, count, base);
        }
        const std::lock_guard order(membership_calls_mutex_);
        std::vector<std::shared_ptr<consumer_base<T>>> made = create_consumers(topic, slots, options, count, base);
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

    /// True when some partition holds a position for `group`, or a consumer of it was created.
    template <class Slots>
    bool has_group(const Slots& slots, const std::string& group)
    {
        std::lock_guard lock(mutex_);
        return groups_.contains(group) || std::any_of(slots.begin(), slots.end(),
                                                      [&](const auto& slot) { return slot->storage.has_group(group); });
    }

    /// See `buffer_queue::remove_group`. Throws `closed` (`topic_closed` set), `group_in_use`, or
    /// what a partition threw.
    template <class Slots>
    bool remove(const std::string& topic, const Slots& slots, const std::string& group,
                const std::atomic<bool>& topic_closed, capacity_gate* gate)
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
        const bool held = remove_group_cursors(topic, slots, group, [gate](std::uint64_t items) {
            if (gate != nullptr) {
                gate->release(static_cast<std::size_t>(items));
            }
        });
        const bool known = held || found != groups_.end();
        if (found != groups_.end()) {
            removed_consumed_ += consumed;
            groups_.erase(found);
        }
        return known;
    }

    /// Statistics: calls `visit(name, entries, consumed)` for every group created in this process,
    /// under the group lock (no cursor goes away meanwhile); `consumed` counts the items the group
    /// committed since this process first opened it. Returns what removed groups had committed.
    template <class Visit>
    std::uint64_t visit_groups(Visit&& visit)
    {
        std::lock_guard lock(mutex_);
        for (const auto& [name, group] : groups_) {
            visit(name, group.owners.entries(), consumed_since_opened(group));
        }
        return removed_consumed_;
    }

    /// Closes every consumer still alive (the topic closes). Call without holding the group lock.
    void close_all() noexcept
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

    /// See `topic::assign_partitions`.
    void assign(const std::string& topic, const std::string& group, std::size_t consumer,
                std::span<const std::size_t> partitions)
    {
        keep_alive alive;  // released after the lock
        std::lock_guard lock(mutex_);
        require_member(topic, group, consumer, partitions, alive).owners.assign(consumer, partitions, alive);
    }

    /// See `topic::revoke_partitions` and `partition_owners::revoke`.
    void revoke(const std::string& topic, const std::string& group, std::size_t consumer,
                std::span<const std::size_t> partitions)
    {
        keep_alive alive;  // released after the lock
        std::lock_guard lock(mutex_);
        auto& owners = require_member(topic, group, consumer, partitions, alive).owners;
        owners.revoke(consumer, partitions, alive);
        owners.take_let_go();  // what revoke let go at once, the membership learns from partitions_in_use
    }

    /// See `membership_port::partitions_in_use`.
    std::vector<std::size_t> partitions_in_use(const std::string& topic, const std::string& group)
    {
        const std::lock_guard lock(mutex_);
        const auto found = groups_.find(group);
        if (found == groups_.end()) {
            throw error(errc::invalid_argument,
                        format_message("topic '{}' group '{}': no consumer of the group was created", topic, group));
        }
        return found->second.owners.in_use();
    }

    void partition_released(const std::string& group, std::size_t consumer, std::size_t partition) noexcept override
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

    void consumer_released(const std::string& group, std::size_t consumer) noexcept override
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

    std::string consumer_problem(const std::string& group, std::size_t consumer) const override
    {
        return outside_ != nullptr ? outside_->consumer_problem(group, consumer) : std::string();
    }

private:
    using owners_type = partition_owners<T, Partition>;
    using keep_alive = typename owners_type::keep_alive;

    struct group_state {
        std::size_t open = 0;                 // consumers not detached
        owners_type owners;                   // who reads which partition; every partition's entry
        std::uint64_t consumed_baseline = 0;  // committed items, summed, when first opened here
    };

    // `create` without telling the membership.
    template <class Slots>
    std::vector<std::shared_ptr<consumer_base<T>>> create_consumers(const std::string& topic, const Slots& slots,
                                                                    const pull_consumer_options& options,
                                                                    std::size_t count, const consumer_context& base)
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
            throw error(
                errc::group_exists,
                format_message("topic '{}': consumer group '{}' already exists and {} of its consumers are open", topic,
                               options.group, found->second.open));
        }
        // All or nothing (group_cursors.hpp); a group reopened or known from disk is kept as it was.
        const auto release = [gate = base.gate](std::uint64_t items) {
            if (gate != nullptr) {
                gate->release(static_cast<std::size_t>(items));
            }
        };
        const bool known = groups_.contains(options.group);
        auto opened = open_group_cursors<typename Partition::cursor>(topic, slots, options.group, release);
        try {
            group_state& group = groups_[options.group];
            std::uint64_t baseline = group.consumed_baseline;  // kept when reopened in this process
            for (std::size_t partition = 0; !known && partition < partitions; ++partition) {
                baseline += slots[partition]->storage.committed_items(*opened.cursors[partition]);
            }
            std::vector<entry> entries;
            entries.reserve(partitions);
            for (std::size_t partition = 0; partition < partitions; ++partition) {
                entries.push_back(
                    {partition, &slots[partition]->storage, &slots[partition]->signal, opened.cursors[partition]});
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
                    std::move(context), options,
                    std::make_shared<const assignment_set<Partition>>(std::move(assignments))));
                members.push_back(made.back());
            }
            std::vector<std::shared_ptr<consumer_base<T>>> created(made.begin(), made.end());
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
            undo_group_cursors(slots, options.group, opened.created_in, release);
            throw;
        }
    }

    static std::uint64_t consumed_since_opened(const group_state& group) noexcept
    {
        std::uint64_t committed = 0;
        for (const entry& each : group.owners.entries()) {
            committed += each.storage->committed_items(*each.cursor);
        }
        return committed > group.consumed_baseline ? committed - group.consumed_baseline : 0;
    }
    group_state& require_member(const std::string& topic, const std::string& group, std::size_t consumer,
                                std::span<const std::size_t> partitions, keep_alive& alive)
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
                throw error(errc::invalid_argument, format_message("{}: there is no partition {} (the topic has {})",
                                                                   where, partition, state.owners.entries().size()));
            }
        }
        return state;
    }

    std::mutex mutex_;  // registration and reassignment only, never on a data path
    // Orders the calls to the outside membership (`create`); taken before mutex_, never under it.
    // Recursive: a creation the membership refused closes its consumers, which report their close.
    std::recursive_mutex membership_calls_mutex_;
    // Each group created in this process.
    std::map<std::string, group_state, std::less<>> groups_;  // guarded by mutex_
    std::uint64_t removed_consumed_ = 0;                      // what removed groups had committed; mutex_
    group_membership* outside_ = nullptr;                     // set once, before any consumer; owned by the topic
};

}  // namespace bufferqueue::detail
