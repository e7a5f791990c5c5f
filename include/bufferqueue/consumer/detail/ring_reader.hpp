// Internal: the ring scan over a consumer's partitions, and the commit of what it delivered.
#pragma once

#include "bufferqueue/consumer/detail/assignment_set.hpp"
#include "bufferqueue/consumer/detail/consumer_context.hpp"
#include "bufferqueue/consumer/detail/partition_reader.hpp"
#include "bufferqueue/consumer/detail/ready_set.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/skipped_record.hpp"

#include <boost/system/error_code.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace bufferqueue::detail {

/// Reads a consumer's partitions as a ring, so each readable partition gets one pull per rotation,
/// and commits what it delivered; it takes no part in who owns the consumer's operation
/// (`operation_state`, held by its consumer). Belongs to the thread owning that operation, except
/// `assignment()`'s thread-safe members. The scan allocates nothing and takes no lock while the
/// set does not change (one atomic load per rotation), except on sets of `ready_set::threshold`
/// partitions or more: there it pulls only the partitions its `ready_set` marks, and partitions it
/// finds empty cost a short lock each (registering with the partition's signal) and one
/// `heavy_fence` per `ready_set::settle_after` of them (or per scan that found nothing). Compiled
/// once (src/consumer/ring_reader.cpp): the items it delivers are erased (`untyped_batch`).
class ring_reader {
public:
    using entry = partition_assignment;
    using set_pointer = consumer_assignment::set_pointer;

    /// `context` must outlive the reader (it is the consumer's own).
    ring_reader(const consumer_context& context, std::string group, bool auto_commit, std::size_t batch_size,
                set_pointer assignments);

    /// From now on released partitions are reported to the membership (see `consumer_membership`).
    void start_reporting() noexcept { reporting_ = true; }
    /// The consumer detached: nothing more is reported (the group may be reopened under its index).
    void stop_reporting() noexcept { reporting_ = false; }

    const std::string& group() const noexcept { return group_; }
    bool auto_commit() const noexcept { return auto_commit_; }
    consumer_assignment& assignment() noexcept { return assignment_; }
    const consumer_assignment& assignment() const noexcept { return assignment_; }
    const assignment_set& current() const noexcept { return assignment_.current(); }

    /// One rotation over the current partitions, starting after the last one that delivered: true
    /// when it delivered, the batch written into `delivered` (empty on entry; it stays empty
    /// otherwise). A failed pull or auto-commit sets `error` (and `failure_detail`) and hands out
    /// nothing.
    bool scan(untyped_batch& delivered, boost::system::error_code& error);

    /// Any thread: the last scan delivered a batch from a partition that held more (its pull's
    /// `more_ready`), so the next scan will probably deliver without waiting. A hint only.
    bool more_ready() const noexcept { return more_ready_.load(std::memory_order_relaxed); }

    /// Any thread owning the operation: the consumer saw data in entry `index` of the current set
    /// (its park re-check), so the next scan pulls it even before the producer's notify marks it.
    void note_data(std::size_t index) noexcept
    {
        if (ready_) {
            ready_->mark(index);
        }
    }

    /// Commits the last delivered batch (manual commit): `errc::nothing_to_commit` when none is
    /// left uncommitted, `errc::partition_revoked` when its partition was revoked since.
    boost::system::error_code commit();

    /// The record the last scan's failed pull stopped at, as `skip` would step past it, without
    /// committing: `errc::nothing_to_skip` when the last scan did not fail on a record its storage
    /// can step past, `errc::partition_revoked` when that partition was revoked since. Allocates
    /// the payload's copy.
    boost::system::error_code unreadable(skipped_record& record);

    /// Commits past the record the last scan's failed pull stopped at (`pull_consumer::skip`),
    /// filling `skipped` on success; the errors of `unreadable`, else the commit's result.
    boost::system::error_code skip(skipped_record& skipped);

    /// Releases the batch the consumer still holds, if any.
    void release_held_batch() noexcept
    {
        if (const std::optional<std::size_t> released = assignment_.release_held()) {
            report_released(*released);
        }
    }

    /// Takes a set published since the last scan; partitions let go go to the membership. Holding
    /// no lock.
    void adopt_if_reassigned() noexcept
    {
        if (assignment_.reassigned()) {
            adopt_latest([this](std::size_t partition) { report_released(partition); });
        }
    }

    /// Makes the latest published set current and restarts the ring at its first partition (the
    /// old position may lie past the new set's end); `released(partition)` gets each partition let
    /// go. The only way the reader's set changes, so the position always matches the set.
    template <class Released>
    void adopt_latest(Released&& released) noexcept
    {
        assignment_.adopt(std::forward<Released>(released));
        ring_position_ = 0;
        rebuild_ready_set();
    }

    /// What the storage said about the last failure (empty: the code says it all).
    std::string& failure_detail() noexcept { return failure_detail_; }

private:
    // `scan` over a set with a ready set: the same rotation from `ring_position_`, visiting only the
    // marked partitions. A partition found empty is unmarked at a settle, which re-checks it after
    // registering its watcher, so a partition that receives records is pulled within the next
    // rotation after they arrive.
    bool scan_marked(untyped_batch& delivered, boost::system::error_code& error);

    // Pulls `each` into `pulled`; false when the pull failed. The partition reports its failure and
    // its turn passes (the caller moves the ring past it), so one bad record cannot stall the
    // consumer's other partitions.
    bool try_pull(const entry& each, untyped_batch& pulled, boost::system::error_code& error);

    // Inside a catch handler: the pull of `each` threw; records why (`error`, `failure_detail`) and
    // which partition (for `unreadable` and `skip`).
    void record_failed_pull(const entry& each, boost::system::error_code& error);

    // Hands out what `each` pulled into `pulled` (naming its partition): commits it first under auto
    // commit; false, `pulled` emptied, when that commit failed.
    bool deliver(const entry& each, untyped_batch& pulled, boost::system::error_code& error);

    // A set of `ready_set::threshold` partitions or more gets a ready set (all marked); a smaller
    // one, or one whose allocation failed, is scanned whole.
    void rebuild_ready_set() noexcept;

    boost::system::error_code commit_position(const entry& each, std::uint64_t next_offset);

    void report_released(std::size_t partition) noexcept
    {
        if (reporting_ && context_.membership != nullptr) {
            context_.membership->partition_released(group_, context_.index, partition);
        }
    }

    const consumer_context& context_;
    const std::string group_;
    const bool auto_commit_;
    const std::size_t batch_size_;
    consumer_assignment assignment_;
    std::unique_ptr<ready_set> ready_;  // over the current set's entries, when it is large; after assignment_
    std::size_t ring_position_ = 0;     // < the current set's size (or 0): reset by every adoption
    bool uncommitted_ = false;
    entry failed_{};  // the partition whose pull failed in the last scan (when failed_pull_)
    bool failed_pull_ = false;
    bool reporting_ = false;               // set before the consumer is shared
    std::string failure_detail_;           // the message of the last failure, for try_consume's exception
    std::atomic<bool> more_ready_{false};  // written by the operation's thread, read by any (a hint)
};

}  // namespace bufferqueue::detail
