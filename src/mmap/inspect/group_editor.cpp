#include "bufferqueue/mmap/inspect/group_editor.hpp"

#include "bufferqueue/error.hpp"
#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/group_path.hpp"
#include "bufferqueue/mmap/detail/mmap_group_folder.hpp"
#include "bufferqueue/mmap/inspect/folder_reader.hpp"

#include "bufferqueue/detail/message.hpp"

#include <algorithm>
#include <optional>

namespace bufferqueue::inspect {

namespace detail = bufferqueue::detail;

namespace {

// Reads every partition of the topic and plans the change of `group` in those that hold it; a
// partition without the group is left alone. `target` empty: a deletion.
group_change_plan plan(const std::string& data_directory, const std::string& topic, const std::string& group,
                       std::optional<reset_target> target, std::uint64_t offset)
{
    group_change_plan result{.topic = topic, .group = group, .changes = {}};
    for (const std::size_t partition : list_partitions(data_directory, topic)) {
        const partition_reader reader(data_directory, topic, partition);
        const partition_summary& summary = reader.summary();
        if (summary.problem) {
            throw error(errc::corrupt_data,
                        detail::format_message("refusing to change group '{}': {} (run bufferqueue-inspect "
                                               "verify)",
                                               group, *summary.problem));
        }
        const auto found = std::find_if(summary.groups.begin(), summary.groups.end(),
                                        [&](const group_position& each) { return each.group == group; });
        if (found == summary.groups.end()) {
            continue;
        }
        group_change change{.partition = partition,
                            .current = found->committed,
                            .target = found->committed,
                            .end = summary.end,
                            .target_log_offset = found->committed_log_offset,
                            .checkpoint_path = found->checkpoint_path};
        if (target) {
            change.target = *target == reset_target::earliest ? summary.earliest
                            : *target == reset_target::latest ? summary.end
                                                              : offset;
            if (change.target < summary.earliest || change.target > summary.end) {
                throw error(errc::invalid_argument,
                            detail::format_message(
                                "topic '{}' group '{}' partition {}: offset {} is outside the valid range {} "
                                "to {} (earliest to log end, in records)",
                                topic, group, partition, change.target, summary.earliest, summary.end));
            }
            change.target_log_offset = reader.log_offset_of(change.target);
        }
        result.changes.push_back(std::move(change));
    }
    if (result.changes.empty()) {
        std::string known;
        for (const std::size_t partition : list_partitions(data_directory, topic)) {
            const partition_reader reader(data_directory, topic, partition);
            for (const group_position& each : reader.summary().groups) {
                if (known.find("'" + each.group + "'") == std::string::npos) {
                    known += detail::format_message("{}'{}'", known.empty() ? "" : ", ", each.group);
                }
            }
        }
        throw error(errc::invalid_argument,
                    detail::format_message("no group '{}' in topic '{}' (its groups: {})", group, topic,
                                           known.empty() ? std::string("none") : known));
    }
    return result;
}

// Who may read what the tool writes into the topic: what the topic folder grants its group (the
// tool does not know the topic's options), so an owner-only topic stays owner-only.
file_access topic_access(const std::string& data_directory, const std::string& topic)
{
    return detail::access_granted_by(detail::ownership_of(topic_folder(data_directory, topic)).permissions);
}

// The topic's lock, as a queue takes it; a clear refusal while a queue holds it.
detail::directory_lock lock_topic(const std::string& data_directory, const std::string& topic)
{
    const std::string folder = topic_folder(data_directory, topic);
    try {
        return detail::directory_lock(folder, topic_access(data_directory, topic));
    } catch (const error& failure) {
        throw error(errc::io_error,
                    detail::format_message("refusing to change topic '{}': {}; close the queue that has it open "
                                           "and try again",
                                           topic, failure.what()));
    }
}

}  // namespace

group_change_plan plan_reset(const std::string& data_directory, const std::string& topic, const std::string& group,
                             reset_target target, std::uint64_t offset)
{
    return plan(data_directory, topic, group, target, offset);
}

group_change_plan execute_reset(const std::string& data_directory, const std::string& topic, const std::string& group,
                                reset_target target, std::uint64_t offset)
{
    list_partitions(data_directory, topic);  // an unknown topic is reported before anything is locked
    const detail::directory_lock lock = lock_topic(data_directory, topic);
    group_change_plan planned = plan(data_directory, topic, group, target, offset);
    const file_access access = topic_access(data_directory, topic);
    for (const group_change& change : planned.changes) {
        if (change.target != change.current) {
            detail::write_checkpoint(change.checkpoint_path, change.target_log_offset, access);
        }
    }
    return planned;
}

group_change_plan plan_delete(const std::string& data_directory, const std::string& topic, const std::string& group)
{
    return plan(data_directory, topic, group, std::nullopt, 0);
}

group_change_plan execute_delete(const std::string& data_directory, const std::string& topic, const std::string& group)
{
    list_partitions(data_directory, topic);
    const detail::directory_lock lock = lock_topic(data_directory, topic);
    group_change_plan planned = plan(data_directory, topic, group, std::nullopt, 0);
    const std::string escaped = detail::escape_group_name(group);
    for (const group_change& change : planned.changes) {
        detail::remove_group_folder(partition_folder(data_directory, topic, change.partition) + "/offsets", escaped);
    }
    return planned;
}

}  // namespace bufferqueue::inspect
