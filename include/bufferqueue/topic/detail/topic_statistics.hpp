// Internal: a typed topic's statistics snapshot, built from the storage concept's statistics members
// (end_items, earliest_items, committed_items) for any backend (src/topic/topic_statistics.cpp).
#pragma once

#include "bufferqueue/stats.hpp"
#include "bufferqueue/topic/detail/capacity_gate.hpp"
#include "bufferqueue/topic/detail/consumer_groups.hpp"
#include "bufferqueue/topic/detail/group_cursors.hpp"

#include <string>
#include <string_view>

namespace bufferqueue::detail {

/// Builds the `topic_stats` of a topic over `slots` whose storage reports itself as `backend`.
/// `groups` is its `consumer_groups` (whose `visit_groups` lists the groups created in this process
/// with their cursors); a `group_listing_partition` adds the groups it holds that no consumer of
/// this process opened. `gate` is null for an unbounded topic. Takes the group lock and each
/// signal's lock briefly, never a lock of the produce path; allocates the snapshot. Thread-safe.
topic_stats collect_topic_stats(std::string topic, std::string item_type, std::string_view backend, slot_span slots,
                                consumer_groups& groups, const capacity_gate* gate);

}  // namespace bufferqueue::detail
