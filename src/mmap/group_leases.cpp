#include "bufferqueue/mmap/detail/group_leases.hpp"

#include "bufferqueue/mmap/detail/file_directory.hpp"
#include "bufferqueue/mmap/detail/group_path.hpp"

#include "bufferqueue/detail/message.hpp"

#include <algorithm>
#include <charconv>
#include <utility>

namespace bufferqueue::detail {

namespace {

constexpr std::string_view member_prefix = "member-";
constexpr std::string_view member_suffix = ".lock";

std::string member_path(const std::string& folder, std::size_t slot)
{
    return detail::format_message("{}/{}{:05}{}", folder, member_prefix, slot, member_suffix);
}

// The slot a member lock file's name stands for, or nothing for any other name.
std::optional<std::size_t> member_slot(std::string_view name)
{
    if (!name.starts_with(member_prefix) || !name.ends_with(member_suffix)) {
        return std::nullopt;
    }
    const std::string_view digits =
        name.substr(member_prefix.size(), name.size() - member_prefix.size() - member_suffix.size());
    std::size_t slot = 0;
    const auto [end, failure] = std::from_chars(digits.data(), digits.data() + digits.size(), slot);
    if (failure != std::errc{} || end != digits.data() + digits.size() || digits.empty()) {
        return std::nullopt;
    }
    return slot;
}

}  // namespace

group_leases::group_leases(std::string_view group, const std::string& topic_folder, file_access access)
    : folder_(detail::format_message("{}/{}/{}", topic_folder, group_leases_folder_name, escape_group_name(group))),
      access_(access)
{
    make_directories(folder_, access_);
}

member_lease group_leases::join() const
{
    for (std::size_t slot = 0;; ++slot) {
        if (std::optional<unique_fd> held = try_lock_file(member_path(folder_, slot), access_)) {
            return member_lease{slot, std::move(*held)};
        }
    }
}

std::vector<std::size_t> group_leases::live_members() const
{
    std::vector<std::size_t> live;
    for (const directory_entry& entry : list_directory(folder_)) {
        const std::optional<std::size_t> slot = member_slot(entry.name);
        if (entry.kind != entry_kind::file || !slot) {
            continue;
        }
        // A lock we can take is nobody's: let go of it at once. The entry's own name is probed (a
        // name written another way, such as member-7.lock, is never recreated as member-00007.lock).
        if (!try_lock_file(folder_ + "/" + entry.name, access_)) {
            live.push_back(*slot);
        }
    }
    std::sort(live.begin(), live.end());
    return live;
}

std::optional<unique_fd> group_leases::try_take_partition(std::size_t partition) const
{
    return try_lock_file(detail::format_message("{}/partition-{:05}.lease", folder_, partition), access_);
}

std::vector<std::size_t> member_partitions(std::size_t partitions, std::size_t members, std::size_t rank)
{
    std::vector<std::size_t> owned;
    if (members == 0 || rank >= members) {
        return owned;
    }
    for (std::size_t partition = rank; partition < partitions; partition += members) {
        owned.push_back(partition);
    }
    return owned;
}

}  // namespace bufferqueue::detail
