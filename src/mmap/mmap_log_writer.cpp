// The writer of a persistent partition's log (mmap_log_writer.hpp): the composition of the segment
// appender, the group commit and the sharing with other processes, and the calls that take the
// writer's mutex to use them together (sharing, refreshing, a rollover's wait, committing, closing).
#include "bufferqueue/mmap/detail/mmap_log_writer.hpp"

#include <cstddef>
#include <utility>
#include <vector>

namespace bufferqueue::detail {

mmap_log_writer::mmap_log_writer(const mmap_partition_files& files, settings configuration, mmap_segment_list& segments,
                                 const mmap_recovered_tail& tail, mapped_region flush_mark) noexcept
    : immediate_(configuration.flush == flush_strategy::immediate), shared_(files), commit_(files, segments, shared_),
      appender_(files, configuration, segments, tail, std::move(flush_mark), commit_, shared_),
      tail_(files, segments, commit_, shared_, appender_)
{
}

void mmap_log_writer::share(shared_log_link link, bool first, log_position retained_from)
{
    shared_.attach(std::move(link));
    const std::unique_lock lock(mutex_);
    if (first) {
        // The recovered state is the log's: nobody else has the folder open, and the header (with
        // its lock) was made anew.
        tail_.initialize(retained_from);
    } else {
        tail_.join();
    }
}

bool mmap_log_writer::refresh() noexcept
{
    try {
        // Without any lock first: nothing to do unless another process published more (the own
        // process's appends, which wake this process's watcher too, are published already) or
        // released segments.
        if (!shared_.moved_on(published_end())) {
            return false;
        }
        const std::unique_lock lock(mutex_);
        if (appender_.closed()) {
            return false;
        }
        const std::uint64_t before = published_end();
        const shared_hold hold(tail_);
        appender_.publish();
        return published_end() != before;
    } catch (...) {
        return false;
    }
}

// A rollover waits for the leader's msync of the tail (which retention may delete once it is no
// longer the tail). Others append meanwhile: this record's payload is kept aside. The shared append
// lock is let go meanwhile (the leader takes it to store what it flushed); taking it again adopts
// what other processes appended.
void mmap_log_writer::wait_for_rollover(std::unique_lock<std::mutex>& lock, shared_hold& hold)
{
    std::vector<std::byte> record = std::move(appender_.payload());
    hold.release();
    commit_.wait_for_idle_flush(lock);
    appender_.payload() = std::move(record);
    appender_.require_open();
    hold.acquire();
}

// Group commit: waits until a flush settled this append, leading one when none is in flight.
void mmap_log_writer::wait_until_durable(std::unique_lock<std::mutex>& lock, std::uint64_t end)
{
    if (appender_.durable_end() >= end) {
        return;
    }
    commit_.wait_until_durable(
        lock, end, [&]() noexcept { return appender_.unflushed(); },
        [&](const group_commit::flush_range& range) noexcept { leader_flushed(range); });
}

// A leader's msync succeeded: a process-shared log stores it under the append lock, so other
// processes publish it too.
void mmap_log_writer::leader_flushed(const group_commit::flush_range& range) noexcept
{
    try {
        const shared_hold hold(tail_);
        appender_.flushed(range);
    } catch (...) {
        // The shared append lock is unusable: this process still publishes its flush.
        appender_.publish_flushed(range);
    }
}

void mmap_log_writer::flush_for_commit(std::uint64_t next_offset)
{
    std::unique_lock lock(mutex_);
    appender_.require_open();
    commit_.wait_for_idle_flush(lock);
    appender_.require_open();
    const shared_hold hold(tail_);
    if (appender_.checkpoint_behind(next_offset)) {
        appender_.flush_locked(true);
    }
}

void mmap_log_writer::flush_shared_for_close() noexcept
{
    if (!shared_.active() || appender_.closed()) {
        return;
    }
    try {
        const shared_hold hold(tail_);
        appender_.flush_locked(true);
    } catch (...) {
        // Closing releases resources whatever happens; the next open recovers from disk.
    }
}

void mmap_log_writer::close_locked() noexcept
{
    if (appender_.closed()) {
        return;
    }
    if (!shared_.active()) {  // a shared log flushed in flush_shared_for_close
        try {
            appender_.flush_locked(true);
        } catch (...) {
            // Closing releases resources whatever happens; the next open recovers from disk.
        }
    }
    commit_.settle_closed();
    appender_.close();
}

}  // namespace bufferqueue::detail
