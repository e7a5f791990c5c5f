// bufferqueue: how a backend that owns consumer-group membership (a broker's group protocol, other
// processes sharing a topic) gives a topic's partitions to this process's consumers and takes them
// back (rebalances).
#pragma once

#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/error.hpp"

#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace bufferqueue {

namespace detail {

/// The topic layer's side of a `membership_port`: the topic's consumer groups. Both calls are
/// thread-safe and throw `bufferqueue::error` as `membership_port` says.
class membership_target {
public:
    virtual void assign_partitions(const std::string& group, std::size_t consumer,
                                   std::span<const std::size_t> partitions) = 0;
    virtual void revoke_partitions(const std::string& group, std::size_t consumer,
                                   std::span<const std::size_t> partitions) = 0;
    virtual std::vector<std::size_t> partitions_in_use(const std::string& group) = 0;

protected:
    membership_target() = default;
    membership_target(const membership_target&) = default;
    membership_target& operator=(const membership_target&) = default;
    ~membership_target() = default;
};

/// What a port points through: the topic clears it when it closes, so a port used later reports
/// `errc::closed` instead of reaching a topic that is gone. Thread-safe.
class membership_link {
public:
    explicit membership_link(membership_target& target) noexcept : target_(&target) {}

    template <class Call>
    void call(const std::string& group, Call&& call)
    {
        const std::lock_guard lock(mutex_);
        if (target_ == nullptr) {
            throw error(errc::closed, format_message("consumer group '{}': its topic is closed", group));
        }
        std::forward<Call>(call)(*target_);
    }

    void clear() noexcept
    {
        const std::lock_guard lock(mutex_);
        target_ = nullptr;
    }

private:
    std::mutex mutex_;           // held across a call, so `clear` waits for the calls in progress
    membership_target* target_;  // guarded by mutex_; null once the topic closed
};

}  // namespace detail

/// The port through which a `group_membership` moves a topic's partitions among this process's
/// consumers of a group. Consumer `consumer` is the index of one of the consumers that one
/// `create_pull_consumers` call made (0 for `create_pull_consumer`), in the order it returned them.
///
/// - `assign` adds `partitions` to the consumer's set: a partition another consumer of the group
///   holds is revoked from that one first and handed over once it let go (its consume ended and it
///   holds no batch of it), so one partition is never read by two consumers at once.
/// - `revoke` takes `partitions` away: a batch of them delivered before and committed after fails
///   with `errc::partition_revoked` (nothing is committed); the next owner resumes from the group's
///   last commit, so uncommitted items are delivered again (at-least-once).
///
/// A consumer that owns nothing waits in `consume()` until it is given something. Both return at
/// once (they never wait for a consume), from any thread, also while the consumer's `consume()`
/// runs or waits, and may be called under the backend's own locks (they never call the backend).
/// Throw `bufferqueue::error`: `errc::invalid_argument` for an unknown group, consumer index or
/// partition (or a port never bound), `errc::closed` when the topic or that consumer is closed.
/// Copyable; valid as long as any copy exists (after the topic closed every call throws `closed`).
class membership_port {
public:
    /// A port bound to no topic: `assign`, `revoke` and `partitions_in_use` throw
    /// `errc::invalid_argument`. The topic binds its own port through `group_membership::bind`.
    membership_port() = default;

    /// Gives consumer `consumer` of `group` the `partitions` (see the class comment: a partition held
    /// by another consumer of the group is handed over once that one let go). Returns at once; never
    /// waits for a consume. Throws `bufferqueue::error`: `errc::invalid_argument` for an unknown group,
    /// consumer index or partition, or an unbound port; `errc::closed` when the topic or the consumer
    /// is closed. Thread-safe.
    void assign(const std::string& group, std::size_t consumer, std::span<const std::size_t> partitions) const
    {
        link(group).call(
            group, [&](detail::membership_target& target) { target.assign_partitions(group, consumer, partitions); });
    }

    /// Takes the `partitions` away from consumer `consumer` of `group` (see the class comment: a batch
    /// of them delivered before and committed after fails with `errc::partition_revoked`). Returns at
    /// once; never waits for a consume. Throws `bufferqueue::error`: `errc::invalid_argument` for an
    /// unknown group, consumer index or partition, or an unbound port; `errc::closed` when the topic or
    /// the consumer is closed. Thread-safe.
    void revoke(const std::string& group, std::size_t consumer, std::span<const std::size_t> partitions) const
    {
        link(group).call(
            group, [&](detail::membership_target& target) { target.revoke_partitions(group, consumer, partitions); });
    }

    /// The partitions of `group` that a consumer of this process reads, or was revoked from and has
    /// not let go yet (its consume runs, or it holds a batch of them), ascending. A partition not
    /// listed is read by nobody here until assigned again: a membership that shares partitions with
    /// other processes may hand it over to them. Exact at the moment of the call; thread-safe, never
    /// waits for a consume. Throws `errc::invalid_argument` when no consumer of `group` was created,
    /// `errc::closed` when the topic is closed.
    std::vector<std::size_t> partitions_in_use(const std::string& group) const
    {
        std::vector<std::size_t> used;
        link(group).call(group, [&](detail::membership_target& target) { used = target.partitions_in_use(group); });
        return used;
    }

    /// For the topic layer: the port over `link`.
    explicit membership_port(std::shared_ptr<detail::membership_link> link) noexcept : link_(std::move(link)) {}

private:
    detail::membership_link& link(const std::string& group) const
    {
        if (!link_) {
            throw error(
                errc::invalid_argument,
                detail::format_message("consumer group '{}': the membership port is not bound to a topic", group));
        }
        return *link_;
    }

    std::shared_ptr<detail::membership_link> link_;
};

/// Group membership owned outside this process's topic: a broker's group protocol (Kafka), or the
/// other processes sharing a topic. A backend that has it hands one to its topic
/// (`topic_settings::membership`); the topic then gives new consumers no partitions (no contiguous
/// split) and tells the membership about its consumers, and the membership assigns and revokes
/// partitions through the `membership_port` it was bound to (see docs/backends.md).
///
/// Threads: `consumers_created`, `consumer_closed`, `remove_group`, `refresh_statistics` and
/// `consumer_problem` may be called from different threads at once; `bind` comes first. `consumer_closed` may still
/// come after `close` (the topic closes its consumers after leaving the groups): it then has nothing to do.
/// `consumers_created` and `consumer_closed` come one at a time, in the order the consumers were
/// created and closed: a group's consumer `i` that closed is reported before the group is created
/// again, so (group, index) names one consumer at a time.
class group_membership {
public:
    group_membership(const group_membership&) = delete;
    group_membership& operator=(const group_membership&) = delete;
    /// Virtual: the topic holds the membership as a `std::shared_ptr<group_membership>`
    /// (`topic_settings::membership`) and may be its last owner.
    virtual ~group_membership() = default;

    /// Called once, when the topic is built, before any consumer exists: where to assign partitions.
    virtual void bind(membership_port port) noexcept = 0;

    /// `count` consumers of `group` were created in this process (indexes 0 to count - 1); they own
    /// no partition until the membership assigns some, which it may do before returning (the port
    /// may be called from here). Throws to fail the creation: the consumers are closed and
    /// `create_pull_consumers` throws it.
    virtual void consumers_created(const std::string& group, std::size_t count) = 0;

    /// Consumer `consumer` of `group` closed and let go of its partitions: they are nobody's in this
    /// process until assigned again. Called once per consumer; never throws, never blocks on I/O.
    virtual void consumer_closed(const std::string& group, std::size_t consumer) noexcept = 0;

    /// Optional: a partition of `group` became nobody's in this process - a consumer let go of a
    /// partition the membership had revoked (its consume ended and it held no batch of it), and no
    /// other consumer here was to get it; also when a consumer closes (then before `consumer_closed`).
    /// A hint: ask `membership_port::partitions_in_use` for the partitions (it is exact; what a
    /// `revoke` let go at once is not hinted, ask after it). Never called from inside a port call and
    /// never under the topic's locks; the port may be called from it. Never throws, never blocks on I/O.
    virtual void partitions_let_go(const std::string& group) noexcept { static_cast<void>(group); }

    /// The topic closes: leave every group (never blocking on the network); the port throws
    /// `errc::closed` from now on. Called once, before the consumers are closed.
    virtual void close() noexcept = 0;

    /// Optional: refresh what the partitions report to the statistics from the storage (a broker's
    /// offsets) before `buffer_queue::stats` takes its snapshot. Blocks at most as long as the backend
    /// allows itself; must not throw (a snapshot never fails: keep the last numbers known).
    virtual void refresh_statistics() noexcept {}

    /// Optional: `buffer_queue::remove_group` removed `group` in this process; remove what the
    /// storage keeps of it elsewhere (a broker's committed offsets). Returns whether it held
    /// something. Throws `bufferqueue::error` naming the group (`group_in_use`, `io_error`,
    /// `timed_out`); the group stays removed here, so calling again retries the storage.
    virtual bool remove_group(const std::string& /*group*/) { return false; }

    /// Optional: what keeps consumer `consumer` of `group` from being given or reading anything
    /// without failing an operation (a broker client that cannot reach its cluster), or empty.
    /// `pull_consumer::last_error` shows it while the consumer's latest operation failed nothing.
    /// Thread-safe; never blocks on I/O; may throw only `std::bad_alloc`.
    virtual std::string consumer_problem(const std::string& /*group*/, std::size_t /*consumer*/) const { return {}; }

protected:
    /// For the backend's implementation; never throws.
    group_membership() = default;
};

}  // namespace bufferqueue
