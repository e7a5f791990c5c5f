// Internal: a consumer group's cursors over every partition of a topic - opened all or nothing,
// and removed - for any `storage_partition` (through `partition_slot_base`; src/topic/group_cursors.cpp).
#pragma once

#include "bufferqueue/consumer/detail/capacity_release.hpp"
#include "bufferqueue/topic/detail/partition_slot.hpp"

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace bufferqueue::detail {

/// A topic's partition slots, by partition number, as the consumer groups see them.
using slot_span = std::span<partition_slot_base* const>;

/// What `open_group_cursors` opened: a cursor per partition, and the partitions where the group is
/// new (created by this call rather than reopened or known from disk).
struct opened_group {
    std::vector<void*> cursors;
    std::vector<std::size_t> created_in;
};

/// Removes `group` again from `partitions` (those `open_group_cursors` created it in), handing
/// what each gives back to `gate` (null: unbounded). Best effort: a leftover is a group at the
/// earliest offset.
void undo_group_cursors(slot_span slots, const std::string& group, const std::vector<std::size_t>& partitions,
                        capacity_release* gate) noexcept;

/// Opens `group`'s cursor in every partition of `slots`, all or nothing: when a partition fails,
/// the partitions that created the group for this call remove it again (their room goes to `gate`),
/// and the failure is rethrown as `bufferqueue::error` naming topic, group and partition (other
/// exceptions as they are). Call with the topic's group registration serialized.
opened_group open_group_cursors(const std::string& topic, slot_span slots, const std::string& group,
                                capacity_release* gate);

/// Removes `group` from every partition of `slots` that holds it, handing what each gives back to
/// `gate`; true when some partition held it. Throws `bufferqueue::error` naming topic, group and
/// partition when a partition fails (the partitions before it no longer hold the group).
bool remove_group_cursors(const std::string& topic, slot_span slots, const std::string& group, capacity_release* gate);

}  // namespace bufferqueue::detail
