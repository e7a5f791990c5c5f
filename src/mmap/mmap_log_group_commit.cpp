// mmap_log_writer, part two: the group commit of `immediate` appends - waiting until a flush covers
// a record, leading the flush when none is in flight, gathering followers and settling the waiters
// (see mmap_log_writer.hpp, "Group commit", and docs/mmap-storage.md). The writing, rollover and
// publishing are in mmap_log_writer.cpp.
#include "bufferqueue/mmap/detail/mmap_log_writer.hpp"

#include "bufferqueue/detail/message.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace bufferqueue::detail {

// After an msync of the log completed: the flush mark vouches for everything before `flushed_end`
// (a store into the mapped flush.mark, never synced; see segment_format.hpp), so recovery reports
// damage there instead of cutting it as a torn tail. No extra system call.
void mmap_log_writer::mark_flushed(std::uint64_t flushed_end) noexcept
{
    if (flush_mark_.data() != nullptr) {
        const auto mark = make_flush_mark(logical_offset(tail_->index, flushed_end, files_.segment_size));
        std::memcpy(flush_mark_.data(), mark.data(), mark.size());
    }
}

void mmap_log_writer::wait_for_idle_flush(std::unique_lock<std::mutex>& lock)
{
    while (flushing_) {
        flush_done_.wait(lock);
    }
}

// Group commit: waits until a flush settled this append, leading one when none is in flight.
void mmap_log_writer::wait_until_durable(std::unique_lock<std::mutex>& lock, std::uint64_t end)
{
    if (logical_offset(tail_->index, flushed_position_, files_.segment_size) >= end) {
        return;
    }
    durability_waiter self{.end = end};
    waiters_.push_back(&self);
    follower_arrived_.notify_one();
    while (!self.settled) {
        if (flushing_) {
            flush_done_.wait(lock);
        } else if (segments_.closed()) {
            // Not reached: close settles every waiter. Kept so a waiter can never touch a closed tail.
            std::erase(waiters_, &self);
            throw error(errc::closed,
                        detail::format_message("{} was closed before the record was flushed", files_.description));
        } else {
            lead_flush(lock);
        }
    }
    if (self.failure) {
        throw error(self.failure->code, self.failure->message);
    }
}

// The leader waits (mutex released) until as many appends wait as the last flush settled or left
// waiting - the producers of that flush coming back with their next record - or for half the last
// msync's time (at most max_gather_time). A single producer never waits: it is its own follower.
// Without this, the producers acknowledged by one flush would miss the next (already started by
// the first of them back) and alternate between two half-full flushes.
void mmap_log_writer::gather_followers(std::unique_lock<std::mutex>& lock)
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

// Flushes everything appended so far with the mutex released, then settles the appends it covered
// and wakes the others. Nothing else flushes, rolls over or closes while flushing_ is set, so the
// tail stays the tail (and mapped) throughout.
void mmap_log_writer::lead_flush(std::unique_lock<std::mutex>& lock) noexcept
{
    flushing_ = true;
    gather_followers(lock);
    mmap_segment_file& segment = *tail_;
    const std::uint64_t from = flushed_position_;
    const std::uint64_t to = tail_position_;
    const std::uint64_t items = items_;
    const std::uint64_t flush_end = logical_offset(segment.index, to, files_.segment_size);
    std::shared_ptr<const flush_failure> failure;
    const auto start = std::chrono::steady_clock::now();
    lock.unlock();
    failure = flush_tail_range(segment, from, to, flush_end);
    const auto finish = std::chrono::steady_clock::now();
    lock.lock();
    last_flush_time_ = finish - start;
    flushing_ = false;
    retired_segments_.clear();  // released by another process's retention during the msync
    if (!failure) {
        try {
            // Process-shared logs: stores what was flushed, so other processes publish it too.
            const shared_hold hold(*this);
            flushed_through(flush_end, items);
            unflushed_records_ = 0;
            if (producer_hint_due()) {
                write_producer_hint();
            }
        } catch (...) {
            // The shared append lock is unusable: this process still publishes its flush.
            flushed_through(flush_end, items);
        }
    }
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
std::shared_ptr<const mmap_log_writer::flush_failure>
mmap_log_writer::flush_tail_range(mmap_segment_file& segment, std::uint64_t from, std::uint64_t to,
                                  std::uint64_t flush_end) noexcept
{
    std::uint64_t claimed_end = 0;
    if (shared_) {
        const shared_log_slot slot = shared_->slot;
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
        shared_->slot.finish_flush(claimed_end, failure == nullptr);
    }
    return failure;
}

// A leader that claimed a flush up to `claimed` waits, for at most half the last flush's time (and
// max_gather_time), until the log written past the msynced end is as long as the last claimed msync
// covered: the producers of other processes that it acknowledged come back with their next records,
// which would otherwise miss this msync and make a half-full one of their own. Writers notify the
// flush event for each record while it waits. Returns the claimed end, extended to every record
// written by then in `segment`.
std::uint64_t mmap_log_writer::gather_other_processes(const mmap_segment_file& segment, std::uint64_t claimed) noexcept
{
    const shared_log_slot slot = shared_->slot;
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
std::shared_ptr<const mmap_log_writer::flush_failure> mmap_log_writer::current_failure() noexcept
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
void mmap_log_writer::settle(std::uint64_t flushed_end, const std::shared_ptr<const flush_failure>& failure) noexcept
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

}  // namespace bufferqueue::detail
