// Internal: a topic's consumer groups - creating their consumers, counting the open ones, and which
// consumer reads which partition (fixed shares, or assigned and revoked by a group protocol).
// Compiled once, for every item type and backend: src/topic/consumer_groups.cpp.
#pragma once

#include "bufferqueue/consumer/detail/consumer_context.hpp"
#include "bufferqueue/consumer/detail/shared_consumer.hpp"
#include "bufferqueue/options.hpp"
#include "bufferqueue/storage/group_membership.hpp"
#include "bufferqueue/topic/detail/group_cursors.hpp"
#include "bufferqueue/topic/detail/partition_owners.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace bufferqueue::detail {

/// The consumer groups of one topic over its partition slots (`slot_span`, by partition number).
/// Each group created in this process keeps how many of its consumers are open and its
/// `partition_owners` (who reads which partition; a partition moves between consumers only through
/// them, so one cursor is never used by two consumers at once).
///
/// Thread-safety: every member is thread-safe; one mutex guards the groups (registration and
/// reassignment only, never a data path). Consumers are called under it only through
/// `shared_consumer::reassign`, which never calls back.
class consumer_groups final : public consumer_membership {
public:
    using consumer_type = shared_consumer;
    using entry = partition_assignment;

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
    std::vector<std::shared_ptr<consumer_base>> create(const std::string& topic, slot_span slots,
                                                       const pull_consumer_options& options, std::size_t count,
                                                       const consumer_context& base);

    /// True when some partition holds a position for `group`, or a consumer of it was created.
    bool has_group(slot_span slots, const std::string& group);

    /// See `buffer_queue::remove_group`. Throws `closed` (`topic_closed` set), `group_in_use`, or
    /// what a partition threw. Room the group held goes back to `gate` (null: unbounded).
    bool remove(const std::string& topic, slot_span slots, const std::string& group,
                const std::atomic<bool>& topic_closed, capacity_release* gate);

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
    void close_all() noexcept;

    /// See `membership_port::assign`.
    void assign(const std::string& topic, const std::string& group, std::size_t consumer,
                std::span<const std::size_t> partitions);

    /// See `membership_port::revoke` and `partition_owners::revoke`.
    void revoke(const std::string& topic, const std::string& group, std::size_t consumer,
                std::span<const std::size_t> partitions);

    /// See `membership_port::partitions_in_use`.
    std::vector<std::size_t> partitions_in_use(const std::string& topic, const std::string& group);

    void partition_released(const std::string& group, std::size_t consumer, std::size_t partition) noexcept override;
    void consumer_released(const std::string& group, std::size_t consumer) noexcept override;
    std::string consumer_problem(const std::string& group, std::size_t consumer) const override;

private:
    using owners_type = partition_owners;
    using keep_alive = owners_type::keep_alive;

    struct group_state {
        std::size_t open = 0;                 // consumers not detached
        owners_type owners;                   // who reads which partition; every partition's entry
        std::uint64_t consumed_baseline = 0;  // committed items, summed, when first opened here
    };

    // `create` without telling the membership.
    std::vector<std::shared_ptr<consumer_base>> create_consumers(const std::string& topic, slot_span slots,
                                                                 const pull_consumer_options& options,
                                                                 std::size_t count, const consumer_context& base);

    static std::uint64_t consumed_since_opened(const group_state& group) noexcept;
    group_state& require_member(const std::string& topic, const std::string& group, std::size_t consumer,
                                std::span<const std::size_t> partitions, keep_alive& alive);

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
