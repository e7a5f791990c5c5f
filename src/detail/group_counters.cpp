// The queue's table of group counters: detail/group_counters.hpp.
#include "bufferqueue/detail/group_counters.hpp"

namespace bufferqueue::detail {

std::shared_ptr<group_counters> group_counter_table::of(const std::string& topic, const std::string& item_type,
                                                        const std::string& group)
{
    std::lock_guard lock(mutex_);
    std::shared_ptr<group_counters>& found = counters_[{topic, item_type, group}];
    if (!found) {
        found = std::make_shared<group_counters>();
    }
    return found;
}

void group_counter_table::forget(const std::string& topic, const std::string& item_type,
                                 const std::string& group) noexcept
{
    std::lock_guard lock(mutex_);
    const auto found = counters_.find(std::tie(topic, item_type, group));
    if (found != counters_.end()) {
        counters_.erase(found);
    }
}

void group_counter_table::add_to(topic_stats& snapshot) const
{
    std::lock_guard lock(mutex_);
    for (group_stats& group : snapshot.groups) {
        const auto found = counters_.find(std::tie(snapshot.topic, snapshot.item_type, group.name));
        if (found != counters_.end()) {
            group.push_failed_deliveries += found->second->failed_deliveries.load(std::memory_order_relaxed);
            group.push_given_up_batches += found->second->given_up_batches.load(std::memory_order_relaxed);
            group.dead_letters += found->second->dead_letters.load(std::memory_order_relaxed);
        }
    }
}

}  // namespace bufferqueue::detail
