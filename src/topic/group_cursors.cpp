// A consumer group's cursors over every partition of a topic: topic/detail/group_cursors.hpp.
#include "bufferqueue/topic/detail/group_cursors.hpp"

#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/error.hpp"

namespace bufferqueue::detail {
namespace {

void give_back(capacity_release* gate, std::uint64_t items) noexcept
{
    if (gate != nullptr) {
        gate->release(static_cast<std::size_t>(items));
    }
}

}  // namespace

void undo_group_cursors(slot_span slots, const std::string& group, const std::vector<std::size_t>& partitions,
                        capacity_release* gate) noexcept
{
    for (const std::size_t each : partitions) {
        try {
            give_back(gate, slots[each]->remove_group(group));
        } catch (...) {
            // The caller reports the original failure.
        }
    }
}

opened_group open_group_cursors(const std::string& topic, slot_span slots, const std::string& group,
                                capacity_release* gate)
{
    opened_group opened;
    std::size_t partition = 0;
    try {
        opened.cursors.reserve(slots.size());
        opened.created_in.reserve(slots.size());
        for (; partition < slots.size(); ++partition) {
            partition_slot_base& slot = *slots[partition];
            const bool existed = slot.has_group(group);
            opened.cursors.push_back(slot.open_cursor(group));
            if (!existed) {
                opened.created_in.push_back(partition);
            }
        }
    } catch (const error& failure) {
        undo_group_cursors(slots, group, opened.created_in, gate);
        throw error(static_cast<errc>(failure.code().value()),
                    format_message("topic '{}': creating consumer group '{}' failed in partition {}, so it was "
                                   "created in no partition: {}",
                                   topic, group, partition, failure.what()));
    } catch (...) {
        undo_group_cursors(slots, group, opened.created_in, gate);
        throw;
    }
    return opened;
}

bool remove_group_cursors(const std::string& topic, slot_span slots, const std::string& group, capacity_release* gate)
{
    bool held = false;
    for (std::size_t partition = 0; partition < slots.size(); ++partition) {
        partition_slot_base& slot = *slots[partition];
        try {
            if (slot.has_group(group)) {
                held = true;
                give_back(gate, slot.remove_group(group));
            }
        } catch (const error& failure) {
            throw error(static_cast<errc>(failure.code().value()),
                        format_message("topic '{}': removing consumer group '{}' failed in partition {} (earlier "
                                       "partitions no longer hold it; call remove_group again): {}",
                                       topic, group, partition, failure.what()));
        }
    }
    return held;
}

}  // namespace bufferqueue::detail
