// Internal: the persistent storage partition - memory-mapped segment files of checksummed records,
// with durable producer, earliest and consumer-group checkpoints. A thin composition of its jobs:
// mmap_segment_list.hpp (the retained segments), mmap_log_writer.hpp (appends, rollover, flushes,
// group commit, sharing with other processes), mmap_log_reader.hpp (cursors and pulls),
// mmap_checkpoint_store.hpp (groups, commits, retention through mmap_retention.hpp) and
// mmap_recovery.hpp (opening from disk).
#pragma once

#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/mmap/detail/mmap_checkpoint_store.hpp"
#include "bufferqueue/mmap/detail/mmap_log_reader.hpp"
#include "bufferqueue/mmap/detail/mmap_log_writer.hpp"
#include "bufferqueue/mmap/detail/mmap_recovery.hpp"
#include "bufferqueue/mmap/detail/mmap_segment_list.hpp"
#include "bufferqueue/mmap/detail/shared_topic_runtime.hpp"
#include "bufferqueue/options.hpp"
#include "bufferqueue/serialization/any_serializer.hpp"
#include "bufferqueue/storage/storage.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace bufferqueue::detail {

/// The folder of partition `partition` of a topic folder: `{topic}/partition-{partition:05}`.
inline std::string partition_folder(const std::string& topic_folder, std::size_t partition)
{
    std::string number = std::to_string(partition);
    if (number.size() < 5) {
        number.insert(0, 5 - number.size(), '0');
    }
    return topic_folder + "/partition-" + number;
}

/// A persistent storage partition (see docs/mmap-storage.md).
///
/// Files in the partition folder: segment files `{index:020}.log` of `segment_size` bytes,
/// `producer.offset`, `earliest.offset` and `offsets/{escaped group}/consumer.offset`, each
/// checkpoint an 8-byte little-endian log position with a CRC, `earliest.items` (the item index at
/// earliest.offset, written by retention) and `flush.mark` (how far the log was flushed, stored
/// through a mapping after every msync and never synced). Offsets are `segment index *
/// segment_size + byte position` of a record boundary, normalized by `normalize_offset`
/// (segment_format.hpp) when written.
///
/// Statistics count items: `end_items()` (records ever appended, recovered at open),
/// `earliest_items()` (the index of the first record still held) and `committed_items(cursor)`
/// (the group's committed position); all lock-free. Lock order: the writer's mutex, then the
/// checkpoint store's groups mutex, then the segment list's mutex.
template <class T>
class mmap_partition final : public shared_partition_hooks {
public:
    struct settings {
        std::string topic;
        std::size_t partition = 0;
        std::string folder;
        std::uint64_t segment_size = 0;
        flush_strategy flush = flush_strategy::immediate;
        std::size_t flush_batch_size = 100;
        std::optional<std::size_t> max_retained_consumed_segments{};
        any_serializer<T> serializer;
        file_access access = file_access::owner;  ///< who may read and change what the partition creates
    };

    /// A consumer group's progress; its batch is decoded into `decoded`.
    using cursor = mmap_cursor<T>;

    /// The chunk of disk blocks reserved at a time (also when recovery creates a segment).
    static constexpr std::uint64_t reservation_chunk = mmap_log_writer::reservation_chunk;

    /// Opens (and recovers) or creates the partition. Throws `bufferqueue::error`: `corrupt_data`
    /// naming the file and offset for inconsistent state (then no file was changed), `io_error`
    /// for OS failures.
    explicit mmap_partition(settings configuration) : mmap_partition(open(std::move(configuration))) {}

    /// Takes over a partition that `recover_mmap_partition` recovered and `apply_mmap_recovery`
    /// repaired (the topic recovers every partition before it repairs any). Never throws for the
    /// state itself.
    mmap_partition(settings configuration, mmap_recovered_state recovered)
        : settings_(std::move(configuration)), files_(partition_files(settings_)),
          segments_(files_, std::move(recovered.segments), recovered.first_segment_index),
          writer_(files_, {settings_.flush, settings_.flush_batch_size}, segments_, recovered.tail,
                  std::move(recovered.flush_mark)),
          reader_(files_, segments_, writer_, settings_.serializer),
          checkpoints_(files_, segments_, std::move(recovered.groups), recovered.earliest,
                       settings_.max_retained_consumed_segments)
    {
    }

    /// The file layout and error prefix of the partition `configuration` describes.
    static mmap_partition_files partition_files(const settings& configuration)
    {
        return {format_message("topic '{}' partition {}", configuration.topic, configuration.partition),
                configuration.folder, configuration.segment_size, configuration.access};
    }

    mmap_partition(const mmap_partition&) = delete;
    mmap_partition& operator=(const mmap_partition&) = delete;

    ~mmap_partition() { close(); }

    void append(const item_source<T>& source, std::size_t& appended)
    {
        writer_.append(source.count, appended, [&](std::size_t index, std::vector<std::byte>& payload) {
            settings_.serializer.serialize(source[index], payload);
        });
    }

    /// Process-shared topics: shares the log with the other processes that have the topic open (see
    /// `mmap_log_writer::share`) and attaches to `runtime`'s watcher until `close`. Call once, right
    /// after construction; `runtime` must outlive the partition's `close`.
    void share(shared_topic_runtime& runtime, bool first)
    {
        writer_.share(runtime.link(settings_.partition), first, checkpoints_.earliest());
        checkpoints_.share();
        shared_ = true;
        runtime.attach(settings_.partition, *this);
        runtime_ = &runtime;
    }

    /// The waker of the consumers waiting on this partition (called once by the topic).
    void bind_waker(partition_waker waker) noexcept { waker_ = waker; }

    /// Process-shared topics: publishes what other processes appended and wakes the waiting
    /// consumers when there is more. Never throws; thread-safe.
    void refresh() noexcept override
    {
        if (writer_.refresh()) {
            waker_.notify();
        }
    }

    /// Process-shared topics: re-reads the group's committed position before the partition is given
    /// to a consumer of this process (see `mmap_checkpoint_store::reload_group`). Never throws.
    void reload_group(std::string_view group) noexcept override
    {
        writer_.refresh();
        checkpoints_.reload_group(group);
    }

    cursor& open_cursor(std::string_view group)
    {
        if (!shared_) {
            return checkpoints_.open_cursor(group);
        }
        // Under the shared append lock: two processes never race to make the group's folder.
        return writer_.with_append_lock(
            [&]() -> cursor& { return checkpoints_.open_cursor(group, writer_.retained_from()); });
    }

    pull_result<T> pull(cursor& reader, std::size_t max_items) { return reader_.pull(reader, max_items); }

    /// The record the cursor's last pull could not decode, while the group stands at it
    /// (`skipping_partition`); a record whose frame failed its checksum has no known end: nothing.
    std::optional<unreadable_record> unreadable(const cursor& reader) const noexcept
    {
        if (reader.undecodable && reader.undecodable->offset == reader.committed.load(std::memory_order_relaxed)) {
            return reader.undecodable;
        }
        return std::nullopt;
    }

    std::uint64_t commit(cursor& reader, std::uint64_t next_offset)
    {
        // A commit is a flush boundary: the group's checkpoint never points past flushed data, and
        // producer.offset covers it.
        writer_.flush_for_commit(next_offset);
        checkpoints_.commit(reader, next_offset, writer_.published_end());
        retain_shared();
        return 0;
    }

    bool has_group(std::string_view group) const { return checkpoints_.has_group(group); }

    /// Every group with a checkpoint, also those no consumer opened (`group_listing_partition`).
    std::vector<stored_group> stored_groups() const { return checkpoints_.stored_groups(); }

    /// Deletes the group's folder atomically (mmap_group_folder.hpp), then applies retention.
    std::uint64_t remove_group(std::string_view group)
    {
        checkpoints_.remove_group(group, writer_.published_end());
        retain_shared();
        return 0;
    }

    /// Runs retention for the groups found on disk (called once every partition of the topic has
    /// opened), so segments no known group pins any more are reclaimed without waiting for a
    /// commit. Never throws.
    void retain_at_open() noexcept
    {
        checkpoints_.retain_at_open(writer_.published_end());
        retain_shared();
    }

    void release_batch(cursor&) noexcept {}

    bool has_data(const cursor& reader) const noexcept { return reader_.has_data(reader); }

    /// A consumer of `reader` is about to wait (`waiting_partition`): on a process-shared topic,
    /// when nothing is readable, the next append of another process that publishes wakes this
    /// process's watcher, which refreshes the partition and notifies its waker. Lock-free.
    bool prepare_wait(const cursor& reader) noexcept
    {
        if (reader_.has_data(reader)) {
            return true;
        }
        if (shared_) {
            writer_.note_consumer_waiting();
        }
        return false;
    }

    /// Flushes what is pending (best effort), unmaps and closes every file. Idempotent.
    void close() noexcept
    {
        if (runtime_ != nullptr) {
            runtime_->detach(settings_.partition);  // before the locks: a refresh in progress takes them
            runtime_ = nullptr;
        }
        auto append_lock = writer_.lock();
        // Before the groups lock: the wait releases the append lock, which must never be taken again
        // while the groups lock is held.
        writer_.wait_for_idle_flush(append_lock);
        writer_.flush_shared_for_close();
        const auto groups_lock = checkpoints_.lock();  // waits for a commit's checkpoint and retention
        writer_.close_locked();
    }

    /// Records ever appended to the partition (published ones: under `immediate`, durable ones), also
    /// before a restart. Lock-free.
    std::uint64_t end_items() const noexcept { return writer_.end_items(); }

    /// The item index of the earliest record still held (after retention, also another process's).
    /// Lock-free.
    std::uint64_t earliest_items() const noexcept
    {
        return std::max(checkpoints_.earliest_items(), writer_.retained_from_items());
    }

    /// Failed retention steps since the partition opened (see `partition_stats`). Lock-free.
    std::uint64_t maintenance_failures() const noexcept { return checkpoints_.maintenance_failures(); }

    /// The group's committed position in items. Lock-free.
    std::uint64_t committed_items(const cursor& reader) const noexcept
    {
        return reader.committed_items.load(std::memory_order_acquire);
    }

private:
    struct opened {
        settings configuration;
        mmap_recovered_state state;
    };

    static opened open(settings configuration)
    {
        const mmap_partition_files files = partition_files(configuration);
        mmap_recovered_state state = recover_mmap_partition(files);
        apply_mmap_recovery(files, state, reservation_chunk);
        return {std::move(configuration), std::move(state)};
    }

    explicit mmap_partition(opened from) : mmap_partition(std::move(from.configuration), std::move(from.state)) {}

    // Process-shared topics with retention: runs it under the shared append lock (after a commit, a
    // group's removal or the opening), so that it counts every process's groups and no process
    // makes a group or retains meanwhile, and stores where the log starts now in the slot; then
    // deletes the released files without the lock. Never throws.
    void retain_shared() noexcept
    {
        if (!shared_ || !checkpoints_.retains()) {
            return;
        }
        try {
            // Not while a group-commit flush of this process is in flight (its segment must stay
            // mapped): the next commit runs retention again.
            writer_.with_append_lock_unless_flushing([&] {
                checkpoints_.retain_shared(writer_.retained_from(), writer_.published_end(),
                                           [&](log_position start) { writer_.store_retained_from(start); });
            });
        } catch (...) {
            // The append lock could not be taken (the partition closed meanwhile, or the slot names a
            // missing segment): nothing was released; the next commit runs retention again.
        }
        checkpoints_.remove_released();
    }

    settings settings_;
    const mmap_partition_files files_;
    mmap_segment_list segments_;
    mmap_log_writer writer_;
    mmap_log_reader<T> reader_;
    mmap_checkpoint_store<cursor> checkpoints_;
    bool shared_ = false;                      // set by share(), before the topic is built
    shared_topic_runtime* runtime_ = nullptr;  // set by share(); reset by close()
    partition_waker waker_;                    // set by bind_waker(), before the topic is built
};

static_assert(storage_partition<mmap_partition<std::string>, std::string>);
static_assert(skipping_partition<mmap_partition<std::string>>);
static_assert(waiting_partition<mmap_partition<std::string>>);

}  // namespace bufferqueue::detail

namespace bufferqueue {

/// Persistent partitions do file I/O (msync, fsync, rename): their topics' asynchronous operations
/// run it on the queue's blocking pool.
template <class T>
struct storage_traits<detail::mmap_partition<T>> {
    static constexpr bool blocking = true;
    static constexpr std::string_view backend_name = "mmap";
};

}  // namespace bufferqueue
