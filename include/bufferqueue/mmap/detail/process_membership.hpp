// Internal: consumer-group membership shared by the processes that have one topic open (issue 27):
// a `group_membership` that shares each group's partitions among the live consumers of every
// process, through the lease files of group_leases.hpp, and re-shares them when a consumer joins,
// closes or its process dies. See docs/design/process-shared-topics.md.
#pragma once

#include "bufferqueue/mmap/detail/file_handle.hpp"
#include "bufferqueue/mmap/detail/group_leases.hpp"
#include "bufferqueue/mmap/detail/process_shared_sync.hpp"
#include "bufferqueue/mmap/detail/shared_topic_watcher.hpp"
#include "bufferqueue/storage/group_membership.hpp"

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace bufferqueue::detail {

/// Shares each group's `partitions` among the live consumers of all processes: every consumer holds
/// a member slot (`group_leases::join`); consumers are ranked by slot, and the one at rank r reads
/// the partitions `member_partitions` gives it. A process reads a partition only while it holds the
/// partition's lease: it takes the lease before assigning the partition to its consumer, and
/// releases it once no consumer here uses the partition any more (`partitions_in_use`), so two
/// processes never read one partition at once. `consumers_created` rebalances the group before it
/// returns, taking every lease of the new consumers' share that no live process holds (all of it
/// when the group has no other live member; a dead process's leases the kernel released), so they
/// own that share when their creation returns. Later rebalances run on one watcher thread, after
/// every join, close, let-go and notification of `event` by any process, and at least once per
/// `period` - the bound on how long a dead process's partitions (whose leases the kernel released)
/// wait, and how a share that live members of other processes still held arrives once they let go.
///
/// Thread-safety: every member may be called from any thread; one mutex guards the state, and the
/// port is called under it (the port never calls back). Nothing notifies `event` once `close()`
/// returned (the topic unmaps it then): consumers that close or let go after it change nothing. `before_assign(group,
/// partition)` runs on the watcher thread or in `consumers_created`, under that mutex, after the lease was taken and
/// before the partition is assigned (the mmap topic re-reads the group's committed position there); it must not throw.
/// The lease files and folders it creates are made for `access` (group_leases.hpp).
class process_group_membership final : public group_membership {
public:
    process_group_membership(std::string topic_folder, std::size_t partitions, process_shared_event event,
                             std::chrono::nanoseconds period,
                             std::function<void(const std::string& group, std::size_t partition)> before_assign = {},
                             file_access access = file_access::owner);

    /// Stops the watcher and lets go of every slot and lease.
    ~process_group_membership() override;

    void bind(membership_port port) noexcept override;
    /// Joins `count` member slots and rebalances `group` at once (see the class comment). Throws
    /// `bufferqueue::error`: `closed` after `close()`, `io_error` naming the lease file or folder
    /// that could not be read, opened or locked (the creation fails; the leases it took are let go
    /// by the watcher, or kept for the group's next creation here).
    void consumers_created(const std::string& group, std::size_t count) override;
    void consumer_closed(const std::string& group, std::size_t consumer) noexcept override;
    void partitions_let_go(const std::string& group) noexcept override;
    void close() noexcept override;

    /// The partitions whose leases this process holds for `group`, ascending (for tests and tools).
    std::vector<std::size_t> leased_partitions(const std::string& group) const;

private:
    struct group_state {
        explicit group_state(group_leases files) : leases(std::move(files)) {}
        group_leases leases;
        std::map<std::size_t, member_lease> members;        // by consumer index: its slot
        std::map<std::size_t, unique_fd> partition_leases;  // by partition: held by this process
        std::map<std::size_t, std::size_t> assigned;        // by partition: the consumer given it
    };

    void notify_while_open() noexcept;  // caller holds mutex_; notifies `event_` unless closed
    void rebalance_all() noexcept;
    bool rebalance(const std::string& name, group_state& group);  // caller holds mutex_; true when it let go of a lease

    const std::string topic_folder_;
    const std::size_t partitions_;
    process_shared_event event_;
    const std::function<void(const std::string&, std::size_t)> before_assign_;
    const file_access access_;
    mutable std::mutex mutex_;
    membership_port port_;                                        // guarded by mutex_
    std::map<std::string, std::unique_ptr<group_state>> groups_;  // guarded by mutex_
    bool closed_ = false;                                         // guarded by mutex_
    std::optional<shared_topic_watcher> watcher_;                 // last: stopped first
};

}  // namespace bufferqueue::detail
