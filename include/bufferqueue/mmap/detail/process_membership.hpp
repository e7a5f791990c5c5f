// Internal: consumer-group membership shared by the processes that have one topic open (issue 27):
// a `group_membership` that shares each group's partitions among the live consumers of every
// process, through the lease files of group_leases.hpp, and re-shares them when a consumer joins,
// closes or its process dies. See docs/design/process-shared-topics.md.
#pragma once

#include "bufferqueue/mmap/detail/file_handle.hpp"
#include "bufferqueue/mmap/detail/group_leases.hpp"
#include "bufferqueue/mmap/detail/shared_topic_watcher.hpp"
#include "bufferqueue/storage/group_membership.hpp"

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
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
/// own that share when their creation returns. Later rebalances run in `rebalance_all`, which the
/// topic's one watcher (shared_topic_watcher.hpp, driven by shared_topic_runtime) calls after every
/// membership notification by any process - each join, close and let-go advances the membership
/// sequence of `wakeups` (`notify_membership`), and so does a rebalance that released a lease - and at
/// least once per `shared_topic_runtime::period` - the bound on how long a dead process's partitions
/// (whose leases the kernel released) wait, and how a share that live members of other processes
/// still held arrives once they let go. Appends do not rebalance (they move the wake-up sequence only).
///
/// Thread-safety: every member may be called from any thread; one mutex guards the state, and the
/// port is called under it (the port never calls back). Nothing notifies `wakeups` once `close()`
/// returned (the topic unmaps them then): consumers that close or let go after it change nothing.
/// `before_assign(group, partition)` runs in `rebalance_all` or `consumers_created`, under that mutex,
/// after the lease was taken and before the partition is assigned (the mmap topic re-reads the
/// group's committed position there); it must not throw. The lease files and folders it creates are
/// made for `access` (group_leases.hpp).
class process_group_membership final : public group_membership {
public:
    process_group_membership(std::string topic_folder, std::size_t partitions, shared_wakeups wakeups,
                             std::function<void(const std::string& group, std::size_t partition)> before_assign = {},
                             file_access access = file_access::owner);

    /// Lets go of every slot and lease (`close`).
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

    /// Re-shares every group (see the class comment): revokes what is no longer this process's,
    /// releases the leases nobody here uses any more (then notifies a membership change), takes the
    /// leases of this process's share that no live process holds and assigns them. A group whose
    /// lease files fail is tried again on the next call. Does nothing after `close`. Called by the
    /// topic's watcher thread; waits for the mutex. Never throws.
    void rebalance_all() noexcept;

private:
    struct group_state {
        explicit group_state(group_leases files) : leases(std::move(files)) {}
        group_leases leases;
        std::map<std::size_t, member_lease> members;        // by consumer index: its slot
        std::map<std::size_t, unique_fd> partition_leases;  // by partition: held by this process
        std::map<std::size_t, std::size_t> assigned;        // by partition: the consumer given it
    };

    void notify_while_open() noexcept;  // caller holds mutex_; notifies a membership change unless closed
    bool rebalance(const std::string& name, group_state& group);  // caller holds mutex_; true when it let go of a lease

    const std::string topic_folder_;
    const std::size_t partitions_;
    const shared_wakeups wakeups_;
    const std::function<void(const std::string&, std::size_t)> before_assign_;
    const file_access access_;
    mutable std::mutex mutex_;
    membership_port port_;                                        // guarded by mutex_
    std::map<std::string, std::unique_ptr<group_state>> groups_;  // guarded by mutex_
    bool closed_ = false;                                         // guarded by mutex_
};

}  // namespace bufferqueue::detail
