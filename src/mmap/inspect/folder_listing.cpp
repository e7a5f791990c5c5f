#include "bufferqueue/mmap/inspect/folder_listing.hpp"

#include "bufferqueue/error.hpp"
#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/group_leases.hpp"
#include "bufferqueue/mmap/detail/mmap_partition.hpp"
#include "bufferqueue/mmap/detail/shared_topic_header.hpp"
#include "bufferqueue/mmap/detail/topic_options_format.hpp"

#include "bufferqueue/detail/message.hpp"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string_view>
#include <system_error>

namespace bufferqueue::inspect {

namespace detail = bufferqueue::detail;

namespace {

constexpr std::string_view partition_prefix = "partition-";

// The number in a name `partition-{digits}`, whether canonical or not; nothing for any other name.
std::optional<std::size_t> partition_number(const std::string& name)
{
    if (!name.starts_with(partition_prefix)) {
        return std::nullopt;
    }
    const std::string number = name.substr(partition_prefix.size());
    if (number.empty() || number.size() > 18 || number.find_first_not_of("0123456789") != std::string::npos) {
        return std::nullopt;
    }
    return static_cast<std::size_t>(std::stoull(number));
}

// The name of the folder of partition `partition`, as `detail::partition_folder` writes it.
std::string canonical_name(std::size_t partition)
{
    return detail::partition_folder("", partition).substr(1);
}

// The number of a partition folder's name: `partition-{id:05}` exactly as `detail::partition_folder`
// writes it; nothing for any other name (`partition-000001`, `partition-1`, `partition-x`).
std::optional<std::size_t> parse_partition_folder(const std::string& name)
{
    const std::optional<std::size_t> partition = partition_number(name);
    return partition && canonical_name(*partition) == name ? partition : std::nullopt;
}

// True when `entry` of `folder` is a folder or a symbolic link to one (a queue follows such links).
bool leads_to_folder(const std::string& folder, const detail::directory_entry& entry)
{
    if (entry.kind != detail::entry_kind::other) {
        return entry.kind == detail::entry_kind::directory;
    }
    std::error_code failure;
    return std::filesystem::is_directory(folder + "/" + entry.name, failure);
}

// True when `entry` of a topic folder is one of the files a queue keeps beside the partitions: the
// directory lock, the topic options (and the leftover of an interrupted write of them; verify notes
// it) and, for process-shared topics, the opening lock, the shared header and the
// folder of the groups' lease files. None of them holds data.
bool is_topic_bookkeeping(const detail::directory_entry& entry)
{
    if (entry.kind == detail::entry_kind::file) {
        const std::string options(detail::topic_options_layout::file_name);
        return entry.name == detail::lock_file_name || entry.name == detail::open_lock_file_name ||
               entry.name == detail::shared_header_layout::file_name || entry.name == options ||
               entry.name == options + std::string(detail::temporary_suffix);
    }
    return entry.kind == detail::entry_kind::directory && entry.name == detail::group_leases_folder_name;
}

// True when `entry` of `folder` is a symbolic link whose target is missing or cannot be reached.
bool is_broken_link(const std::string& folder, const detail::directory_entry& entry)
{
    if (entry.kind != detail::entry_kind::other) {
        return false;
    }
    const std::filesystem::path path = folder + "/" + entry.name;
    std::error_code failure;
    return std::filesystem::is_symlink(path, failure) && !std::filesystem::exists(path, failure);
}

std::vector<std::size_t> partitions_in(const std::string& folder)
{
    std::vector<std::size_t> partitions;
    for (const detail::directory_entry& entry : detail::list_directory(folder)) {
        if (const auto partition = parse_partition_folder(entry.name); partition && leads_to_folder(folder, entry)) {
            partitions.push_back(*partition);
        }
    }
    std::sort(partitions.begin(), partitions.end());
    return partitions;
}

// Why `entry` of the folder of `topic` is not read.
std::string unexpected_in_topic(const std::string& folder, const std::string& topic,
                                const detail::directory_entry& entry)
{
    constexpr std::string_view not_checked = "; it was not checked";
    if (is_broken_link(folder, entry)) {
        return detail::format_message("is a symbolic link whose target is missing or cannot be reached{}", not_checked);
    }
    if (const auto partition = partition_number(entry.name); partition && leads_to_folder(folder, entry)) {
        return detail::format_message(
            "is not a partition folder of topic '{}': its name is not canonical (partition {} is {}){}", topic,
            *partition, canonical_name(*partition), not_checked);
    }
    return detail::format_message("is not a partition folder (partition-NNNNN) of topic '{}'{}", topic, not_checked);
}

// True unless `path` (which exists) is known to be something other than a folder: its entry in the
// parent folder says so. (A folder whose parent cannot be listed counts as a folder; listing it
// then reports the real error.)
bool is_folder(const std::string& path)
{
    const std::filesystem::path location = std::filesystem::path(path).lexically_normal();
    const std::string name = location.filename().string();
    if (name.empty() || name == "." || name == "..") {
        return true;
    }
    const std::string parent = location.has_parent_path() ? location.parent_path().string() : std::string(".");
    try {
        for (const detail::directory_entry& entry : detail::list_directory(parent)) {
            if (entry.name == name) {
                return entry.kind != detail::entry_kind::file;
            }
        }
    } catch (const error&) {
        // Listing `path` itself reports what is wrong.
    }
    return true;
}

}  // namespace

std::string topic_folder(const std::string& data_directory, const std::string& topic)
{
    return data_directory + "/" + topic;
}

std::string partition_folder(const std::string& data_directory, const std::string& topic, std::size_t partition)
{
    return detail::partition_folder(topic_folder(data_directory, topic), partition);
}

std::vector<std::string> list_topics(const std::string& data_directory)
{
    if (!detail::path_exists(data_directory)) {
        throw error(errc::invalid_argument, detail::format_message("the folder {} does not exist", data_directory));
    }
    if (!is_folder(data_directory)) {
        throw error(errc::invalid_argument, detail::format_message("{} is not a folder", data_directory));
    }
    std::vector<std::string> topics;
    for (const detail::directory_entry& entry : detail::list_directory(data_directory)) {
        if (leads_to_folder(data_directory, entry) &&
            !partitions_in(topic_folder(data_directory, entry.name)).empty()) {
            topics.push_back(entry.name);
        }
    }
    if (topics.empty()) {
        throw error(
            errc::invalid_argument,
            detail::format_message("{} is not a bufferqueue data folder: no subfolder holds partition-NNNNN folders "
                                   "(give the data_directory of the mmap topics)",
                                   data_directory));
    }
    return topics;
}

std::vector<std::size_t> list_partitions(const std::string& data_directory, const std::string& topic)
{
    const std::vector<std::string> topics = list_topics(data_directory);
    if (std::find(topics.begin(), topics.end(), topic) == topics.end()) {
        std::string known;
        for (const std::string& each : topics) {
            known += detail::format_message("{}'{}'", known.empty() ? "" : ", ", each);
        }
        throw error(errc::invalid_argument,
                    detail::format_message("no topic '{}' in {} (its topics: {})", topic, data_directory, known));
    }
    return partitions_in(topic_folder(data_directory, topic));
}

std::vector<unexpected_entry> list_unexpected_entries(const std::string& data_directory)
{
    const std::vector<std::string> topics = list_topics(data_directory);
    std::vector<unexpected_entry> found;
    for (const detail::directory_entry& entry : detail::list_directory(data_directory)) {
        if (is_broken_link(data_directory, entry)) {
            found.push_back({.path = topic_folder(data_directory, entry.name),
                             .text = "is a symbolic link whose target is missing or cannot be reached (a topic "
                                     "folder moved elsewhere?); it was not checked"});
        }
    }
    for (const std::string& topic : topics) {
        const std::string folder = topic_folder(data_directory, topic);
        for (const detail::directory_entry& entry : detail::list_directory(folder)) {
            if (!is_topic_bookkeeping(entry) &&
                !(parse_partition_folder(entry.name) && leads_to_folder(folder, entry))) {
                found.push_back({.path = folder + "/" + entry.name, .text = unexpected_in_topic(folder, topic, entry)});
            }
        }
    }
    std::sort(found.begin(), found.end(),
              [](const unexpected_entry& left, const unexpected_entry& right) { return left.path < right.path; });
    return found;
}

}  // namespace bufferqueue::inspect
