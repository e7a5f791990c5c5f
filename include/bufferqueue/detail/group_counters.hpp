// Internal: what the consumers of each group did that the storage does not record - failed push
// deliveries, given-up batches, dead letters - kept by the queue for `group_stats`.
#pragma once

#include "bufferqueue/stats.hpp"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

namespace bufferqueue::detail {

/// The counters of one group (see `group_stats`). Thread-safe: relaxed atomics, one increment per
/// failure or dead-letter produce, never per delivered item.
struct group_counters {
    std::atomic<std::uint64_t> failed_deliveries{0};  // push handler calls that failed
    std::atomic<std::uint64_t> given_up_batches{0};   // push batches given up after max_attempts
    std::atomic<std::uint64_t> dead_letters{0};       // letters a dead-letter topic acknowledged
};

/// The counters of every group of one queue that has push consumers or a dead-letter topic,
/// by (topic, item type, group). Thread-safe: a lock taken when a consumer is created and when
/// statistics are read, never per batch.
class group_counter_table {
public:
    /// The counters of (topic, item type, group), made on first use and shared with every
    /// consumer of that group. Allocates on first use; throws only `std::bad_alloc`.
    std::shared_ptr<group_counters> of(const std::string& topic, const std::string& item_type, const std::string& group)
    {
        std::lock_guard lock(mutex_);
        std::shared_ptr<group_counters>& found = counters_[{topic, item_type, group}];
        if (!found) {
            found = std::make_shared<group_counters>();
        }
        return found;
    }

    /// Forgets the counters of (topic, item type, group): a group created later under that name
    /// starts at zero (`buffer_queue::remove_group`). Consumers closed before keep the old ones.
    /// Allocates nothing, never throws.
    void forget(const std::string& topic, const std::string& item_type, const std::string& group) noexcept
    {
        std::lock_guard lock(mutex_);
        const auto found = counters_.find(std::tie(topic, item_type, group));
        if (found != counters_.end()) {
            counters_.erase(found);
        }
    }

    /// Adds the counters of every group of `snapshot` that has some. Allocates nothing.
    void add_to(topic_stats& snapshot) const
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

private:
    mutable std::mutex mutex_;
    // guarded by mutex_
    std::map<std::tuple<std::string, std::string, std::string>, std::shared_ptr<group_counters>, std::less<>> counters_;
};

}  // namespace bufferqueue::detail
