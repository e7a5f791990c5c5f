// Internal: a topic's consumer groups - creating their consumers, counting the open ones, and which
// consumer reads which partition (fixed shares, or assigned and revoked by a group protocol).
#pragma once

#include "bufferqueue/consumer/detail/consumer_context.hpp"
#include "bufferqueue/consumer/detail/shared_consumer.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/options.hpp"
#include "bufferqueue/topic/detail/group_cursors.hpp"

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
/// many of its consumers are open and an owner for each partition: the consumer reading it, or
/// none. A partition moves between consumers only through `consumer_membership`: revoked from its
/// owner first, handed to the next one once the owner let go (its operation ended and it holds no
/// batch of it), so one cursor is never used by two consumers at once.
///
/// Thread-safety: every member is thread-safe; one mutex guards the groups (registration and
/// reassignment only, never a data path). Consumers are called under it only through
/// `shared_consumer::reassign`, which never calls back.
template <class T, class Partition>
class consumer_groups final : public consumer_membership {
public:
    using consumer_type = shared_consumer<T, Partition>;
    using entry = partition_assignment<Partition>;

    /// Creates `count` consumers of a new group, or of one whose consumers are all closed; each gets
    /// a contiguous share of the partitions (the first ones one more). `base` is the topic's part of
    /// every consumer's context. Throws `bufferqueue::error`: `too_many_consumers`, `closed`,
    /// `group_exists`, or what opening a cursor threw (then no partition keeps the new group).
    template <class Slots>
    std::vector<std::shared_ptr<consumer_base<T>>> create(const std::string& topic, const Slots& slots,
                                                          const pull_consumer_options& options, std::size_t count,
                                                          const consumer_context& base)
    {
        const std::size_t partitions = slots.size();
        if (count < 1 || count > partitions) {
            throw error(errc::too_many_consumers,
                        "topic '" + topic + "' group '" + options.group + "': " + std::to_string(count) +
                            " consumers requested, but the count must be between 1 and the topic's " +
                            std::to_string(partitions) + " partitions");
        }
        std::lock_guard lock(mutex_);
        if (base.topic_closed->load(std::memory_order_acquire)) {
            throw error(errc::closed, "topic '" + topic + "' is closed");
        }
        if (const auto found = groups_.find(options.group); found != groups_.end() && found->second.open != 0) {
            throw error(errc::group_exists, "topic '" + topic + "': consumer group '" + options.group +
                                                "' already exists and " + std::to_string(found->second.open) +
                                                " of its consumers are open");
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
            std::vector<member> members;
            std::vector<partition_owner> owners(partitions);
            std::vector<std::shared_ptr<consumer_type>> made;
            const std::size_t base_share = partitions / count;
            const std::size_t larger_shares = partitions % count;
            std::size_t next_partition = 0;
            for (std::size_t index = 0; index < count; ++index) {
                const std::size_t share = base_share + (index < larger_shares ? 1 : 0);
                std::vector<entry> assignments;
                for (std::size_t i = 0; i < share; ++i, ++next_partition) {
                    assignments.push_back(entries[next_partition]);
                    owners[next_partition].owner = index;
                }
                consumer_context context = base;
                context.membership = this;
                context.index = index;
                made.push_back(std::make_shared<consumer_type>(
                    std::move(context), options,
                    std::make_shared<const assignment_set<Partition>>(std::move(assignments))));
                members.push_back({made.back()});
            }
            std::vector<std::shared_ptr<consumer_base<T>>> created(made.begin(), made.end());
            // Nothing throws from here on.
            for (const auto& each : made) {
                each->mark_counted();
            }
            group = group_state{count, std::move(members), std::move(owners), std::move(entries), baseline};
            return created;
        } catch (...) {
            if (!known) {
                groups_.erase(options.group);
            }
            undo_group_cursors(slots, options.group, opened.created_in, release);
            throw;
        }
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
            throw error(errc::closed, "topic '" + topic + "' is closed: cannot remove consumer group '" + group + "'");
        }
        const auto found = groups_.find(group);
        if (found != groups_.end() && found->second.open != 0) {
            throw error(errc::group_in_use, "topic '" + topic + "': cannot remove consumer group '" + group +
                                                "': " + std::to_string(found->second.open) +
                                                " of its consumers are still open (close them first)");
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
            visit(name, std::span<const entry>(group.entries), consumed_since_opened(group));
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
                for (const member& each : group.members) {
                    if (auto consumer = each.consumer.lock()) {
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
        std::vector<std::shared_ptr<consumer_type>> alive;  // released after the lock
        std::lock_guard lock(mutex_);
        group_state& state = require_member(topic, group, consumer, partitions, alive);
        std::vector<entry> taken;
        std::vector<std::vector<std::size_t>> revoked(state.members.size());
        for (const std::size_t partition : partitions) {
            partition_owner& owner = state.owners[partition];
            if (owner.owner == consumer) {
                if (owner.releasing) {  // revoked and not let go yet: it simply stays
                    owner.releasing = false;
                    owner.next_owner = none;
                    taken.push_back(state.entries[partition]);
                }
            } else if (owner.owner == none) {
                owner.owner = consumer;
                taken.push_back(state.entries[partition]);
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
                publish(state, index, {}, revoked[index], work, alive);
            }
        }
        publish(state, consumer, taken, {}, work, alive);
        hand_over(state, work, alive);
    }

    /// See `topic::revoke_partitions`. Partitions the consumer does not own are skipped; one it was
    /// to receive once another consumer let go of it is not handed to it.
    void revoke(const std::string& topic, const std::string& group, std::size_t consumer,
                std::span<const std::size_t> partitions)
    {
        std::vector<std::shared_ptr<consumer_type>> alive;  // released after the lock
        std::lock_guard lock(mutex_);
        group_state& state = require_member(topic, group, consumer, partitions, alive);
        std::vector<std::size_t> removed;
        for (const std::size_t partition : partitions) {
            partition_owner& owner = state.owners[partition];
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
        publish(state, consumer, {}, removed, work, alive);
        hand_over(state, work, alive);
    }

    void partition_released(const std::string& group, std::size_t consumer, std::size_t partition) noexcept override
    {
        std::vector<std::shared_ptr<consumer_type>> alive;  // released after the lock
        std::lock_guard lock(mutex_);
        const auto found = groups_.find(group);
        if (found == groups_.end() || partition >= found->second.owners.size()) {
            return;
        }
        try {
            std::vector<pending_hand_over> work{{consumer, partition}};
            hand_over(found->second, work, alive);
        } catch (...) {
            // No memory for the next owner's set: the partition stays with nobody until reassigned.
        }
    }

    void consumer_released(const std::string& group, std::size_t consumer) noexcept override
    {
        std::vector<std::shared_ptr<consumer_type>> alive;  // released after the lock
        std::lock_guard lock(mutex_);
        const auto found = groups_.find(group);
        if (found == groups_.end() || consumer >= found->second.members.size()) {
            return;
        }
        group_state& state = found->second;
        if (state.open != 0) {
            --state.open;
        }
        state.members[consumer].released = true;
        try {
            std::vector<pending_hand_over> work;
            for (std::size_t partition = 0; partition < state.owners.size(); ++partition) {
                if (state.owners[partition].next_owner == consumer) {
                    state.owners[partition].next_owner = none;
                }
                if (state.owners[partition].owner == consumer) {
                    state.owners[partition].releasing = true;
                    work.push_back({consumer, partition});
                }
            }
            hand_over(state, work, alive);
        } catch (...) {
            // No memory: the partitions stay with nobody until reassigned.
        }
    }

private:
    static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();

    struct member {
        std::weak_ptr<consumer_type> consumer;
        bool released = false;  // detached: owns nothing any more
    };
    struct partition_owner {
        std::size_t owner = none;       // the consumer reading the partition (or letting it go)
        std::size_t next_owner = none;  // who gets it once `owner` let go
        bool releasing = false;         // revoked from `owner`, which has not let go yet
    };
    struct group_state {
        std::size_t open = 0;  // consumers not detached
        std::vector<member> members;
        std::vector<partition_owner> owners;
        std::vector<entry> entries;           // every partition's storage, signal and the group's cursor
        std::uint64_t consumed_baseline = 0;  // committed items, summed, when first opened here
    };

    static std::uint64_t consumed_since_opened(const group_state& group) noexcept
    {
        std::uint64_t committed = 0;
        for (const entry& each : group.entries) {
            committed += each.storage->committed_items(*each.cursor);
        }
        return committed > group.consumed_baseline ? committed - group.consumed_baseline : 0;
    }
    struct pending_hand_over {
        std::size_t from;
        std::size_t partition;
    };

    group_state& require_member(const std::string& topic, const std::string& group, std::size_t consumer,
                                std::span<const std::size_t> partitions,
                                std::vector<std::shared_ptr<consumer_type>>& alive)
    {
        const auto found = groups_.find(group);
        const std::string where = "topic '" + topic + "' group '" + group + "'";
        if (found == groups_.end() || found->second.open == 0) {
            throw error(errc::invalid_argument, where + ": no open consumer of the group to assign partitions to");
        }
        group_state& state = found->second;
        if (consumer >= state.members.size()) {
            throw error(errc::invalid_argument, where + ": there is no consumer " + std::to_string(consumer) +
                                                    " (the group has " + std::to_string(state.members.size()) + ")");
        }
        auto target = state.members[consumer].consumer.lock();
        if (!target || state.members[consumer].released || target->is_closed()) {
            throw error(errc::closed, where + ": consumer " + std::to_string(consumer) + " is closed");
        }
        alive.push_back(std::move(target));
        for (const std::size_t partition : partitions) {
            if (partition >= state.entries.size()) {
                throw error(errc::invalid_argument, where + ": there is no partition " + std::to_string(partition) +
                                                        " (the topic has " + std::to_string(state.entries.size()) +
                                                        ")");
            }
        }
        return state;
    }

    // Publishes consumer `index`'s latest set with `added` and without `removed`; what it let go at
    // once joins `work`. A consumer gone (or detached) lets go of everything at once.
    void publish(group_state& state, std::size_t index, std::span<const entry> added,
                 std::span<const std::size_t> removed, std::vector<pending_hand_over>& work,
                 std::vector<std::shared_ptr<consumer_type>>& alive)
    {
        if (added.empty() && removed.empty()) {
            return;
        }
        auto consumer = state.members[index].consumer.lock();
        if (!consumer || state.members[index].released) {
            for (const entry& each : added) {
                state.owners[each.partition].owner = none;
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
    void hand_over(group_state& state, std::vector<pending_hand_over>& work,
                   std::vector<std::shared_ptr<consumer_type>>& alive)
    {
        while (!work.empty()) {
            const pending_hand_over next = work.back();
            work.pop_back();
            partition_owner& owner = state.owners[next.partition];
            if (owner.owner != next.from || !owner.releasing) {
                continue;  // assigned back to it meanwhile, or already handed over
            }
            owner.releasing = false;
            owner.owner = std::exchange(owner.next_owner, none);
            if (owner.owner != none) {
                publish(state, owner.owner, std::span<const entry>(&state.entries[next.partition], 1), {}, work, alive);
            }
        }
    }

    std::mutex mutex_;  // registration and reassignment only, never on a data path
    // Each group created in this process.
    std::map<std::string, group_state, std::less<>> groups_;  // guarded by mutex_
    std::uint64_t removed_consumed_ = 0;                      // what removed groups had committed; mutex_
};

}  // namespace bufferqueue::detail
