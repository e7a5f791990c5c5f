// Internal: what the consumers of each group did that the storage does not record - failed push
// deliveries, given-up batches, dead letters - kept by the queue for `group_stats`. The table's
// bodies are compiled once (src/detail/group_counters.cpp).
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
    std::shared_ptr<group_counters> of(const std::string& topic, const std::string& item_type,
                                       const std::string& group);

    /// Forgets the counters of (topic, item type, group): a group created later under that name
    /// starts at zero (`buffer_queue::remove_group`). Consumers closed before keep the old ones.
    /// Allocates nothing, never throws.
    void forget(const std::string& topic, const std::string& item_type, const std::string& group) noexcept;

    /// Adds the counters of every group of `snapshot` that has some. Allocates nothing.
    void add_to(topic_stats& snapshot) const;

private:
    mutable std::mutex mutex_;
    // guarded by mutex_
    std::map<std::tuple<std::string, std::string, std::string>, std::shared_ptr<group_counters>, std::less<>> counters_;
};

}  // namespace bufferqueue::detail
