// Internal: the ring scan over a consumer's partitions, and the commit of what it delivered.
#pragma once

#include "bufferqueue/batch.hpp"
#include "bufferqueue/consumer/detail/assignment_set.hpp"
#include "bufferqueue/consumer/detail/consumer_context.hpp"
#include "bufferqueue/consumer/detail/operation_flag.hpp"
#include "bufferqueue/consumer/detail/ready_set.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/skipped_record.hpp"
#include "bufferqueue/storage/storage.hpp"

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
/// and commits what it delivered. Belongs to the thread owning the consumer's operation, except
/// `assignment()`'s thread-safe members. The scan allocates nothing and takes no lock while the
/// set does not change (one atomic load per rotation), except on sets of `ready_set::threshold`
/// partitions or more: there it pulls only the partitions its `ready_set` marks, and partitions it
/// finds empty cost a short lock each (registering with the partition's signal) and one
/// `heavy_fence` per `ready_set::settle_after` of them (or per scan that found nothing).
template <class T, class Partition>
class ring_reader {
public:
    using entry = partition_assignment<Partition>;
    using set_pointer = typename consumer_assignment<Partition>::set_pointer;

    /// `context` must outlive the reader (it is the consumer's own).
    ring_reader(const consumer_context& context, std::string group, bool auto_commit, std::size_t batch_size,
                set_pointer assignments)
        : context_(context), group_(std::move(group)), auto_commit_(auto_commit), batch_size_(batch_size),
          assignment_(std::move(assignments))
    {
        rebuild_ready_set();
    }

    /// From now on released partitions are reported to the membership (see `consumer_membership`).
    void start_reporting() noexcept { reporting_ = true; }
    /// The consumer detached: nothing more is reported (the group may be reopened under its index).
    void stop_reporting() noexcept { reporting_ = false; }

    const std::string& group() const noexcept { return group_; }
    bool auto_commit() const noexcept { return auto_commit_; }
    consumer_assignment<Partition>& assignment() noexcept { return assignment_; }
    const consumer_assignment<Partition>& assignment() const noexcept { return assignment_; }
    const assignment_set<Partition>& current() const noexcept { return assignment_.current(); }

    /// One rotation over the current partitions, starting after the last one that delivered. A
    /// failed pull or auto-commit sets `error` (and `failure_detail`) and hands out nothing.
    std::optional<batch<T>> scan(boost::system::error_code& error)
    {
        failure_detail_.clear();  // a detail left by an earlier (awaited) scan must not describe this one
        failed_pull_ = false;
        more_ready_.store(false, std::memory_order_relaxed);
        adopt_if_reassigned();
        if (ready_) {
            return scan_marked(error);
        }
        const std::span<const entry> entries = assignment_.current().entries();
        const std::size_t count = entries.size();
        for (std::size_t step = 0; step < count; ++step) {
            std::size_t index = ring_position_ + step;  // ring_position_ < count: no division needed
            if (index >= count) {
                index -= count;
            }
            const entry& each = entries[index];
            pull_result<T> pulled;
            if (!try_pull(each, pulled, error)) {
                ring_position_ = index + 1 == count ? 0 : index + 1;
                return std::nullopt;
            }
            if (pulled.items.empty()) {
                continue;
            }
            ring_position_ = index + 1 == count ? 0 : index + 1;
            return deliver(each, pulled, error);
        }
        return std::nullopt;
    }

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
    boost::system::error_code commit()
    {
        if (!uncommitted_) {
            return errc::nothing_to_commit;
        }
        failure_detail_.clear();
        adopt_if_reassigned();
        if (assignment_.last_revoked()) {
            return errc::partition_revoked;
        }
        const boost::system::error_code result = commit_position(assignment_.last(), assignment_.last_next_offset());
        if (!result) {
            uncommitted_ = false;
        }
        return result;
    }

    /// The record the last scan's failed pull stopped at, as `skip` would step past it, without
    /// committing: `errc::nothing_to_skip` when the last scan did not fail on a record its storage
    /// can step past, `errc::partition_revoked` when that partition was revoked since. Allocates
    /// the payload's copy.
    boost::system::error_code unreadable(skipped_record& record)
    {
        failure_detail_.clear();
        if (!failed_pull_) {
            return errc::nothing_to_skip;
        }
        adopt_if_reassigned();
        if (!assignment_.current().contains(failed_.partition)) {
            failed_pull_ = false;
            return errc::partition_revoked;
        }
        std::optional<unreadable_record> found;
        if constexpr (skipping_partition<Partition>) {
            found = failed_.storage->unreadable(*failed_.cursor);
        }
        if (!found) {
            return errc::nothing_to_skip;
        }
        record.partition = failed_.partition;
        record.offset = found->offset;
        record.next_offset = found->next_offset;
        record.payload.assign(found->payload.begin(), found->payload.end());
        return {};
    }

    /// Commits past the record the last scan's failed pull stopped at (`pull_consumer::skip`),
    /// filling `skipped` on success; the errors of `unreadable`, else the commit's result.
    boost::system::error_code skip(skipped_record& skipped)
    {
        skipped_record found;
        if (const boost::system::error_code missing = unreadable(found)) {
            return missing;
        }
        const boost::system::error_code result = commit_position(failed_, found.next_offset);
        if (!result) {
            failed_pull_ = false;
            skipped = std::move(found);
        }
        return result;
    }

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

    /// On the reassigning thread, for a consumer with no operation in progress: adopts sets
    /// published for it while `busy` is free, taking `busy` for each adoption (`try_adopt`);
    /// appends the partitions let go to `released` (the caller hands them on, outside this call).
    void adopt_while_idle(operation_flag& busy, std::vector<std::size_t>& released)
    {
        while (assignment_.reassigned() && busy.try_adopt()) {
            adopt_latest([&released](std::size_t partition) { released.push_back(partition); });
            busy.end();
        }
    }

    /// Right after an operation gave `busy` back: adopts a set published while it ran, as an
    /// operation of its own, so the membership hears at once of the partitions let go (that may
    /// take the group lock: an adoption never blocks). Gives way to any other holder of `busy`.
    void adopt_between_operations(operation_flag& busy) noexcept
    {
        while (assignment_.reassigned() && busy.try_begin_once() == operation_flag::attempt::taken) {
            adopt_if_reassigned();
            busy.end();
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
    std::optional<batch<T>> scan_marked(boost::system::error_code& error)
    {
        const std::span<const entry> entries = assignment_.current().entries();
        const std::size_t count = entries.size();
        const auto has_data = [entries](std::size_t index) noexcept {
            return entries[index].storage->has_data(*entries[index].cursor);
        };
        std::size_t position = ring_position_;
        std::size_t passed = 0;  // positions of this rotation behind the scan
        while (passed < count) {
            const std::size_t index = ready_->next(position);
            if (index == ready_set::none) {
                break;
            }
            passed += (index >= position ? index - position : index + count - position) + 1;
            if (passed > count) {
                break;  // before where the rotation began: the next scan's
            }
            position = index + 1 == count ? 0 : index + 1;
            const entry& each = entries[index];
            pull_result<T> pulled;
            if (!try_pull(each, pulled, error)) {
                ring_position_ = position;
                ready_->settle(has_data, false);
                return std::nullopt;
            }
            if (pulled.items.empty()) {
                ready_->found_empty(index);
                continue;
            }
            ring_position_ = position;
            ready_->settle(has_data, false);
            return deliver(each, pulled, error);
        }
        ready_->settle(has_data, true);
        return std::nullopt;
    }

    // Pulls `each` into `pulled`; false when the pull failed. The partition reports its failure and
    // its turn passes (the caller moves the ring past it), so one bad record cannot stall the
    // consumer's other partitions.
    bool try_pull(const entry& each, pull_result<T>& pulled, boost::system::error_code& error)
    {
        try {
            pulled = each.storage->pull(*each.cursor, batch_size_);
            return true;
        } catch (...) {
            error = current_exception_code(errc::corrupt_data);
            failure_detail_ = exception_message();
            failed_ = each;
            failed_pull_ = true;
            return false;
        }
    }

    // Hands out what `each` pulled: commits it first under auto commit.
    std::optional<batch<T>> deliver(const entry& each, const pull_result<T>& pulled, boost::system::error_code& error)
    {
        assignment_.delivered(each, pulled.next_offset);
        more_ready_.store(pulled.more_ready, std::memory_order_relaxed);
        if (auto_commit_) {
            error = commit_position(each, pulled.next_offset);
            if (error) {
                release_held_batch();
                return std::nullopt;
            }
        } else {
            uncommitted_ = true;
        }
        return batch<T>(pulled.items, each.partition, pulled.offsets);
    }

    // A set of `ready_set::threshold` partitions or more gets a ready set (all marked); a smaller
    // one, or one whose allocation failed, is scanned whole.
    void rebuild_ready_set() noexcept
    {
        ready_.reset();
        const std::span<const entry> entries = assignment_.current().entries();
        if (entries.size() < ready_set::threshold) {
            return;
        }
        try {
            std::vector<partition_signal*> signals;
            signals.reserve(entries.size());
            for (const entry& each : entries) {
                signals.push_back(each.signal);
            }
            ready_ = std::make_unique<ready_set>(signals);
        } catch (...) {  // NOLINT(bugprone-empty-catch): without one, every scan visits every partition
        }
    }

    boost::system::error_code commit_position(const entry& each, std::uint64_t next_offset)
    {
        try {
            const std::uint64_t released = each.storage->commit(*each.cursor, next_offset);
            if (released != 0 && context_.gate != nullptr) {  // one virtual call, only when room came free
                context_.gate->release(static_cast<std::size_t>(released));
            }
        } catch (...) {
            failure_detail_ = exception_message();
            return current_exception_code(errc::io_error);
        }
        return {};
    }

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
    consumer_assignment<Partition> assignment_;
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
