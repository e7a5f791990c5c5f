// The group commit of a persistent partition's `immediate` appends (group_commit.hpp): leading a
// flush when none is in flight, gathering followers (also those of other processes, for a
// process-shared log) and settling the waiters (see docs/mmap-storage.md, "Group commit").
#include "bufferqueue/mmap/detail/group_commit.hpp"

#include "bufferqueue/detail/message.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

namespace bufferqueue::detail {

void group_commit::wait_for_idle_flush(std::unique_lock<std::mutex>& lock)
{
    while (flushing_) {
        flush_done_.wait(lock);
    }
}

void group_commit::enlist(durability_waiter& waiter)
{
    waiters_.push_back(&waiter);
    follower_arrived_.notify_one();
}

void group_commit::withdraw_closed(durability_waiter& waiter)
{
    std::erase(waiters_, &waiter);
    throw error(errc::closed,
                detail::format_message("{} was closed before the record was flushed", files_.description));
}

// The leader waits (mutex released) until as many appends wait as the last flush settled or left
// waiting - the producers of that flush coming back with their next record - or for half the last
// msync's time (at most max_gather_time). A single producer never waits: it is its own follower.
// Without this, the producers acknowledged by one flush would miss the next (already started by
// the first of them back) and alternate between two half-full flushes.
void group_commit::gather_followers(std::unique_lock<std::mutex>& lock)
{
    if (waiters_.size() >= expected_followers_) {
        return;
    }
    const auto deadline = std::chrono::steady_clock::now() +
                          std::min<std::chrono::steady_clock::duration>(last_flush_time_ / 2, max_gather_time);
    while (waiters_.size() < expected_followers_ &&
           follower_arrived_.wait_until(lock, deadline) != std::cv_status::timeout) {
    }
}

// The leader's msync of `range`, with the mutex released; then the flush is over (the caller settles).
std::shared_ptr<const flush_failure> group_commit::msync_unlocked(std::unique_lock<std::mutex>& lock,
                                                                  const flush_range& range) noexcept
{
    const auto start = std::chrono::steady_clock::now();
    lock.unlock();
    std::shared_ptr<const flush_failure> failure =
        flush_tail_range(*range.segment, range.from, range.to, range.flush_end);
    const auto finish = std::chrono::steady_clock::now();
    lock.lock();
    last_flush_time_ = finish - start;
    flushing_ = false;
    retired_segments_.clear();  // released by another process's retention during the msync
    return failure;
}

void group_commit::finish_flush(std::uint64_t flush_end, const std::shared_ptr<const flush_failure>& failure) noexcept
{
    expected_followers_ = waiters_.size();
    settle(flush_end, failure);
    flush_done_.notify_all();
}

// The msync of bytes [from, to) of `segment` for a leader, without mutex_; the log then ends at
// `flush_end`. For a shared log the processes' leaders coordinate through the slot, one msync in
// flight at a time: a leader waits for the one in flight; then, unless it covered its records, it
// claims the flush target and extends its msync to every record written so far, by any process, in
// the same segment, so the records the processes appended during one msync go out together in the
// next. A leader whose records another process's msync covered returns at once. An msync in flight
// that does not finish within max_shared_flush_wait (its process may have died) is not waited for
// any more: the leader takes its claim over. Returns the failure, if any.
std::shared_ptr<const flush_failure> group_commit::flush_tail_range(mmap_segment_file& segment, std::uint64_t from,
                                                                    std::uint64_t to, std::uint64_t flush_end) noexcept
{
    std::uint64_t claimed_end = 0;
    if (shared_.active()) {
        const shared_log_slot slot = shared_.slot();
        process_shared_event done = slot.flush_event();
        std::uint64_t waited_for = 0;  // the target in flight this leader waits for, and since when
        auto since = std::chrono::steady_clock::now();
        for (;;) {
            if (slot.msynced_end() >= flush_end) {
                return nullptr;  // another process's msync covered it
            }
            const std::uint64_t target = slot.flush_target();
            const auto now = std::chrono::steady_clock::now();
            if (target != waited_for) {
                waited_for = target;
                since = now;
            }
            // A claim older than max_shared_flush_wait is taken over: its process may have died.
            if (target == 0 || now - since >= max_shared_flush_wait) {
                // Every record written so far in this segment goes out with this msync, also those
                // other processes appended while the previous one ran.
                const std::uint64_t end =
                    std::max(flush_end, slot.written_end_in(segment.index, files_.segment_size).value_or(0));
                if (slot.claim_flush(target, end)) {
                    claimed_end = gather_other_processes(segment, end);
                    to = claimed_end - logical_offset(segment.index, 0, files_.segment_size);
                    break;
                }
                continue;
            }
            const std::uint32_t seen = done.sequence();
            if (slot.msynced_end() >= flush_end || slot.flush_target() != target) {
                continue;  // finished (or failed) meanwhile
            }
            done.wait(seen, max_shared_flush_wait - (now - since));
        }
    }
    std::shared_ptr<const flush_failure> failure;
    try {
        segment.region.flush(from, to - from);
    } catch (...) {
        failure = current_failure();
    }
    if (claimed_end != 0) {
        shared_.slot().finish_flush(claimed_end, failure == nullptr);
    }
    return failure;
}

// A leader that claimed a flush up to `claimed` waits, for at most half the last flush's time (and
// max_gather_time), until the log written past the msynced end is as long as the last claimed msync
// covered: the producers of other processes that it acknowledged come back with their next records,
// which would otherwise miss this msync and make a half-full one of their own. Writers notify the
// flush event for each record while it waits. Returns the claimed end, extended to every record
// written by then in `segment`.
std::uint64_t group_commit::gather_other_processes(const mmap_segment_file& segment, std::uint64_t claimed) noexcept
{
    const shared_log_slot slot = shared_.slot();
    const auto written = [&]() -> std::optional<std::uint64_t> {
        return slot.written_end_in(segment.index, files_.segment_size);
    };
    const std::uint64_t wanted = slot.msynced_end() + slot.last_flush_bytes();
    const auto budget = std::min<std::chrono::steady_clock::duration>(last_flush_time_ / 2, max_gather_time);
    if (slot.last_flush_bytes() == 0 || claimed >= wanted || budget <= std::chrono::steady_clock::duration::zero()) {
        return claimed;
    }
    process_shared_event event = slot.flush_event();
    const auto deadline = std::chrono::steady_clock::now() + budget;
    slot.set_gathering(true);
    for (;;) {
        const std::uint32_t seen = event.sequence();
        const std::optional<std::uint64_t> end = written();
        const auto now = std::chrono::steady_clock::now();
        if (!end || *end >= wanted || now >= deadline) {
            break;  // gathered, the tail moved to another segment, or out of time
        }
        event.wait(seen, deadline - now);
    }
    slot.set_gathering(false);
    const std::uint64_t end = std::max(claimed, written().value_or(claimed));
    if (end != claimed) {
        slot.extend_flush(claimed, end);
    }
    return end;
}

// The failure of the exception being handled (call inside a catch block). An `error` keeps its code
// and message; anything else (out of memory) fails the waiting appends with `io_error`.
std::shared_ptr<const flush_failure> group_commit::current_failure() noexcept
{
    try {
        try {
            throw;
        } catch (const error& failure) {
            std::string message = failure.what();
            const std::string code_text = ": " + failure.code().message();
            if (message.size() >= code_text.size() &&
                message.compare(message.size() - code_text.size(), code_text.size(), code_text) == 0) {
                message.resize(message.size() - code_text.size());
            }
            return std::make_shared<const flush_failure>(
                flush_failure{static_cast<errc>(failure.code().value()), std::move(message)});
        } catch (const std::exception& failure) {
            return std::make_shared<const flush_failure>(flush_failure{errc::io_error, failure.what()});
        }
    } catch (...) {
    }
    static const auto unknown = std::make_shared<const flush_failure>(
        flush_failure{errc::io_error, "a flush of a persistent partition failed"});
    return unknown;
}

// Settles the waiting appends whose records end at or before `flushed_end`.
void group_commit::settle(std::uint64_t flushed_end, const std::shared_ptr<const flush_failure>& failure) noexcept
{
    const std::size_t before = waiters_.size();
    std::erase_if(waiters_, [&](durability_waiter* waiter) {
        if (waiter->end > flushed_end) {
            return false;
        }
        waiter->settled = true;
        waiter->failure = failure;
        return true;
    });
    if (waiters_.size() != before) {
        flush_done_.notify_all();
    }
}

void group_commit::settle_closed() noexcept
{
    if (!waiters_.empty()) {  // only when the flush failed before its msync
        settle(UINT64_MAX, std::make_shared<const flush_failure>(flush_failure{
                               errc::closed, detail::format_message("{} was closed before the record was flushed",
                                                                    files_.description)}));
    }
}

void group_commit::keep_mapped(std::vector<std::unique_ptr<mmap_segment_file>> released) noexcept
{
    if (!flushing_) {
        return;  // unmapped as `released` goes
    }
    for (auto& segment : released) {
        try {
            retired_segments_.push_back(std::move(segment));
        } catch (...) {
            // Out of memory: the leader's msync of an unmapped range fails with an error, no crash.
        }
    }
}

}  // namespace bufferqueue::detail
