// Internal: a typed topic's statistics snapshot, built from the storage concept's statistics members
// (end_items, earliest_items, committed_items) for any backend.
#pragma once

#include "bufferqueue/detail/partition_signal.hpp"
#include "bufferqueue/stats.hpp"
#include "bufferqueue/storage/storage.hpp"
#include "bufferqueue/topic/detail/capacity_gate.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace bufferqueue::detail {

/// Builds the `topic_stats` of a topic over `slots` (pointers to `partition_slot<Partition>`).
/// `groups` is its `consumer_groups` (whose `visit_groups` lists the groups created in this
/// process with their cursors); a `group_listing_partition` adds the groups it holds that no
/// consumer of this process opened. `gate` is null for an unbounded topic. Takes the group lock and
/// each signal's lock briefly, never a lock of the produce path; allocates the snapshot. Thread-safe.
template <class Partition, class Slots, class Groups>
topic_stats collect_topic_stats(std::string topic, std::string item_type, Slots& slots, Groups& groups,
                                const capacity_gate* gate)
{
    topic_stats stats{.topic = std::move(topic),
                      .item_type = std::move(item_type),
                      .backend = std::string(storage_backend_name<Partition>())};
    const std::size_t count = slots.size();
    stats.partitions.reserve(count);
    std::vector<const data_waiter*> waiters;
    for (std::size_t partition = 0; partition < count; ++partition) {
        const Partition& storage = slots[partition]->storage;
        stats.partitions.push_back(
            {.partition = partition, .end = storage.end_items(), .earliest = storage.earliest_items()});
        if constexpr (requires { storage.maintenance_failures(); }) {  // optional in the storage concept
            stats.partitions.back().maintenance_failures = storage.maintenance_failures();
        }
        stats.produced += stats.partitions.back().end;
        slots[partition]->signal.append_waiters(waiters);
    }
    std::sort(waiters.begin(), waiters.end());
    stats.waiting_consumers = static_cast<std::size_t>(std::unique(waiters.begin(), waiters.end()) - waiters.begin());
    stats.waiting_producers = gate != nullptr ? gate->waiting() : 0;

    // By name; a group's committed position per partition, read from the partition's listing where
    // it lists the group (a process-shared partition lists what every process committed, where the
    // cursors of this process may lag), else from the group's cursor in this process.
    std::map<std::string, std::vector<group_partition_stats>, std::less<>> positions;
    const auto position = [&](const std::string& name, std::size_t partition, std::uint64_t committed) {
        auto& partitions = positions[name];
        if (partitions.empty()) {
            partitions.resize(count);
            for (std::size_t each = 0; each < count; ++each) {
                partitions[each].partition = each;
                partitions[each].committed = stats.partitions[each].earliest;  // not held there: nothing to read
            }
        }
        partitions[partition].committed = committed;
    };
    const std::uint64_t removed_groups_consumed =
        groups.visit_groups([&](const std::string& name, auto entries, std::uint64_t consumed) {
            stats.consumed += consumed;
            for (const auto& each : entries) {
                position(name, each.partition, each.storage->committed_items(*each.cursor));
            }
        });
    stats.consumed += removed_groups_consumed;
    if constexpr (group_listing_partition<Partition>) {
        for (std::size_t partition = 0; partition < count; ++partition) {
            for (const stored_group& listed : slots[partition]->storage.stored_groups()) {
                position(listed.name, partition, listed.committed_items);
            }
        }
    }
    stats.groups.reserve(positions.size());
    for (auto& [name, partitions] : positions) {
        group_stats group{.name = name, .lag = 0, .partitions = std::move(partitions), .oldest_uncommitted_age = {}};
        for (group_partition_stats& each : group.partitions) {
            const std::uint64_t end = stats.partitions[each.partition].end;
            each.lag = end > each.committed ? end - each.committed : 0;
            group.lag += each.lag;
        }
        stats.groups.push_back(std::move(group));
    }
    return stats;
}

}  // namespace bufferqueue::detail
