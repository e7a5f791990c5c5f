// Internal: the leases through which the processes sharing a persistent topic share a consumer
// group's partitions (issue 27): a lock file per member of the group and one per partition, each
// held with an exclusive flock that the kernel releases when its process dies.
//
// Files, in `{topic}/groups/{escaped group}/` (group_path.hpp escapes the name), all empty and never
// removed (removing a lock file races with a process about to lock it):
//
//   member-{slot:05}.lock      held by a live member of the group, one slot per consumer
//   partition-{id:05}.lease    held by the process whose consumer reads the partition
#pragma once

#include "bufferqueue/mmap/detail/file_handle.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bufferqueue::detail {

/// The folder of a process-shared topic that holds every group's lease files.
inline constexpr std::string_view group_leases_folder_name = "groups";

/// A member slot of a group, held while the object lives (or until its process dies).
struct member_lease {
    std::size_t slot = 0;
    unique_fd file;  ///< holds the flock
};

/// The lease files of one consumer group of a process-shared topic. Thread-safe (it holds only
/// paths); every call does file I/O. Throws `bufferqueue::error`: `invalid_argument` for a group name
/// that cannot name a folder, `io_error` naming the file for OS failures.
class group_leases {
public:
    /// The leases of `group` of the topic in `topic_folder`; creates their folder when missing. The
    /// folders and lease files it creates get `folder_permissions` and `file_permissions(access)`.
    group_leases(std::string_view group, const std::string& topic_folder, file_access access = file_access::owner);

    /// Takes the lowest member slot nobody holds (no limit on their number).
    member_lease join() const;

    /// The slots held now by live members, in this process or others (this one's included), sorted.
    /// A slot is probed by trying its lock, so a concurrent `join` may pass over it to the next one.
    std::vector<std::size_t> live_members() const;

    /// The lease of `partition` unless another open file description holds it: keep the descriptor
    /// while a consumer of this process reads the partition, close it once that consumer let go.
    std::optional<unique_fd> try_take_partition(std::size_t partition) const;

private:
    std::string folder_;
    file_access access_;
};

/// The partitions the member at `rank` (its position among `members` live members sorted by slot)
/// reads: those whose index modulo `members` is `rank`. Every partition has exactly one member, and
/// the members' shares differ by at most one. Empty when `members` is 0 or `rank >= members`.
std::vector<std::size_t> member_partitions(std::size_t partitions, std::size_t members, std::size_t rank);

}  // namespace bufferqueue::detail
