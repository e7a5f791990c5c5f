// A typed topic's statistics snapshot: topic/detail/topic_statistics.hpp.
#include "bufferqueue/topic/detail/topic_statistics.hpp"

#include <algorithm>
#include <map>
#include <vector>

namespace bufferqueue::detail {

topic_stats collect_topic_stats(std::string topic, std::string item_type, std::string_view backend, slot_span slots,
                                consumer_groups& groups, const capacity_gate* gate)
{
    topic_stats stats{.topic = std::move(topic), .item_type = std::move(item_type), .backend = std::string(backend)};
    const std::size_t count = slots.size();
    stats.partitions.reserve(count);
    std::vector<const data_waiter*> waiters;
    for (std::size_t partition = 0; partition < count; ++partition) {
        const partition_slot_base& slot = *slots[partition];
        stats.partitions.push_back(
            {.partition = partition, .end = slot.end_items(), .earliest = slot.earliest_items()});
        stats.partitions.back().maintenance_failures = slot.maintenance_failures();
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
    const std::uint64_t removed_groups_consumed = groups.visit_groups(
        [&](const std::string& name, std::span<const partition_assignment> entries, std::uint64_t consumed) {
            stats.consumed += consumed;
            for (const partition_assignment& each : entries) {
                position(name, each.partition, each.storage->committed_items(each.cursor));
            }
        });
    stats.consumed += removed_groups_consumed;
    for (std::size_t partition = 0; partition < count; ++partition) {
        for (const stored_group& listed : slots[partition]->stored_groups()) {
            position(listed.name, partition, listed.committed_items);
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
