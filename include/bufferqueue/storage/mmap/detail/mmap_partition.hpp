// Internal: the persistent storage partition - memory-mapped segment files of checksummed records,
// with durable producer, earliest and consumer-group checkpoints.
#pragma once

#include "bufferqueue/serialization/any_serializer.hpp"
#include "bufferqueue/storage/mmap/detail/file.hpp"
#include "bufferqueue/storage/mmap/detail/group_path.hpp"
#include "bufferqueue/storage/mmap/detail/mmap_group_folder.hpp"
#include "bufferqueue/storage/mmap/detail/mmap_recovery.hpp"
#include "bufferqueue/storage/mmap/detail/mmap_retention.hpp"
#include "bufferqueue/storage/mmap/detail/segment_format.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/options.hpp"
#include "bufferqueue/storage/storage.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

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
/// checkpoint an 8-byte little-endian log position, and `flush.mark` (how far the log was flushed,
/// stored through a mapping after every msync and never synced). Recovery is in mmap_recovery.hpp.
/// Offsets are `segment index * segment_size + byte position` of a record boundary, normalized
/// when written (a group that read a segment to its end before the writer ended it keeps the
/// marker's position until retention rewrites it).
///
/// Appends are serialized by a mutex: serialize, check the size, roll over when the record does not
/// fit, reserve disk blocks ahead of the write position (so a full disk is an error, not SIGBUS),
/// encode, then flush by strategy. Readers decode published records into their cursor's buffer
/// under a shared lock on the segment list; only rollover, retention and close take it exclusively.
/// Group checkpoints (creation, commit, retention's rewrites) are written under groups_mutex_.
/// Lock order: append_mutex_, then groups_mutex_, then segments_mutex_.
template <class T>
class mmap_partition {
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
    };

    /// A consumer group's progress; its batch is decoded into `decoded`.
    struct cursor {
        std::string group;
        std::string checkpoint_path;
        std::atomic<std::uint64_t> committed{0};
        // A pull from `committed` found no record before this offset (only a segment-end marker):
        // has_data stays false until the log grows past it. Written by pull.
        std::atomic<std::uint64_t> idle_until{0};
        std::vector<T> decoded;
    };

    /// Opens (and recovers) or creates the partition. Throws `bufferqueue::error`: `corrupt_data`
    /// naming the file and offset for inconsistent state (then no file was changed), `io_error`
    /// for OS failures.
    explicit mmap_partition(settings configuration) : mmap_partition(std::move(configuration), std::nullopt) {}

    /// Takes over a partition that `recover_mmap_partition` recovered and `apply_mmap_recovery`
    /// repaired (the topic recovers every partition before it repairs any). Never throws for the
    /// state itself.
    mmap_partition(settings configuration, std::optional<mmap_recovered_state> recovered)
        : settings_(std::move(configuration)), files_(partition_files(settings_)),
          producer_path_(files_.producer_path()), earliest_path_(files_.earliest_path()),
          offsets_folder_(files_.offsets_folder())
    {
        if (!recovered) {
            recovered = recover_mmap_partition(files_);
            apply_mmap_recovery(files_, *recovered, reservation_chunk);
        }
        take_over(std::move(*recovered));
    }

    /// The file layout and error prefix of the partition `configuration` describes.
    static mmap_partition_files partition_files(const settings& configuration)
    {
        return {"topic '" + configuration.topic + "' partition " + std::to_string(configuration.partition),
                configuration.folder, configuration.segment_size};
    }

    /// The chunk of disk blocks reserved at a time (also when recovery creates a segment).
    static constexpr std::uint64_t reservation_chunk = 4 * 1024 * 1024;

    mmap_partition(const mmap_partition&) = delete;
    mmap_partition& operator=(const mmap_partition&) = delete;

    ~mmap_partition() { close(); }

    void append(const item_source<T>& source, std::size_t& appended)
    {
        std::lock_guard lock(append_mutex_);
        require_open();
        try {
            while (appended < source.count) {
                payload_.clear();
                settings_.serializer.serialize(source[appended], payload_);
                write_record();
                ++appended;
                if (settings_.flush == flush_strategy::batch && unflushed_records_ >= settings_.flush_batch_size) {
                    flush_locked(false);
                }
            }
            if (settings_.flush == flush_strategy::immediate) {
                flush_locked(false);
            }
        } catch (...) {
            publish();
            throw;
        }
        publish();
    }

    cursor& open_cursor(std::string_view group)
    {
        std::lock_guard lock(groups_mutex_);
        require_open();
        const std::string escaped = escape_group_name(group);
        const auto reopened =
            std::find_if(cursors_.begin(), cursors_.end(), [&](auto& each) { return each.group == group; });
        if (reopened != cursors_.end()) {
            return *reopened;  // a group opened again resumes from its committed offset
        }
        std::uint64_t start = earliest_offset_;
        if (const auto known = group_offsets_.find(group); known != group_offsets_.end()) {
            start = known->second;
        } else {  // appears with its first checkpoint, so it holds retention before its first pull
            create_group_folder(offsets_folder_, escaped, start);
            group_offsets_.emplace(std::string(group), start);
        }
        cursor& opened = cursors_.emplace_back();
        opened.group = std::string(group);
        opened.checkpoint_path = offsets_folder_ + "/" + escaped + "/consumer.offset";
        opened.committed.store(start, std::memory_order_release);
        return opened;
    }

    pull_result<T> pull(cursor& reader, std::size_t max_items)
    {
        std::shared_lock lock(segments_mutex_);
        reader.decoded.clear();
        std::uint64_t position = reader.committed.load(std::memory_order_relaxed);
        if (closed_.load(std::memory_order_relaxed)) {
            return {{}, position};
        }
        const std::uint64_t end = published_end_.load(std::memory_order_acquire);
        while (reader.decoded.size() < max_items && position < end) {
            const segment_position at = split_offset(position, settings_.segment_size);
            const segment_file& segment = segment_at(at.segment_index);
            const std::span<const std::byte> bytes = segment.region.bytes();
            const std::optional<record_view> record = read_record(bytes, at.position);
            if (!record) {
                const std::uint64_t next_segment = first_record_offset(at.segment_index + 1, settings_.segment_size);
                if (is_segment_end(bytes, at.position) && next_segment <= end) {
                    position = next_segment;
                    continue;
                }
                if (!reader.decoded.empty()) {
                    break;
                }
                throw error(errc::corrupt_data, describe_partition() + ": no valid record at offset " +
                                                    std::to_string(position) + " (byte " + std::to_string(at.position) +
                                                    " of " + segment.path + ") inside the written log");
            }
            try {
                reader.decoded.push_back(settings_.serializer.deserialize(record->payload));
            } catch (const std::exception& failure) {
                // Any exception of a user's deserializer, not only bufferqueue::error: the records
                // before it are delivered first, and the failure is corrupt_data naming the record.
                if (!reader.decoded.empty()) {
                    break;
                }
                throw error(errc::corrupt_data, describe_partition() + ": cannot decode the record at offset " +
                                                    std::to_string(position) + " of " + segment.path + ": " +
                                                    failure.what());
            }
            position = normalized(at.segment_index, record->next_position);
        }
        if (position < end) {
            // A batch that stops at a segment-end marker ends at the next segment's first record
            // boundary, so the checkpoint a commit stores is normalized.
            const segment_position at = split_offset(position, settings_.segment_size);
            const std::uint64_t next_segment = first_record_offset(at.segment_index + 1, settings_.segment_size);
            if (next_segment <= end && is_segment_end(segment_at(at.segment_index).region.bytes(), at.position)) {
                position = next_segment;
            }
        }
        if (reader.decoded.empty() && max_items > 0) {
            // Nothing but a marker before `end` (a group at a segment-end marker whose next segment
            // holds no record yet): has_data stays false until a record is published.
            reader.idle_until.store(end, std::memory_order_relaxed);
        }
        return {std::span<const T>(reader.decoded), position};
    }

    std::uint64_t commit(cursor& reader, std::uint64_t next_offset)
    {
        {
            // A commit is a flush boundary: the group's checkpoint never points past flushed data,
            // and producer.offset covers it.
            std::lock_guard lock(append_mutex_);
            require_open();
            if (checkpointed_offset_ < next_offset) {
                flush_locked(true);
            }
        }
        // Under groups_mutex_: retention may rewrite a group's checkpoint, and must not race with
        // the group's own commit.
        std::lock_guard lock(groups_mutex_);
        require_open();
        write_checkpoint(reader.checkpoint_path, next_offset);
        reader.committed.store(next_offset, std::memory_order_release);
        group_offsets_[reader.group] = next_offset;
        retain();  // the commit stands from here on, whatever retention meets
        return 0;
    }

    bool has_group(std::string_view group) const
    {
        std::lock_guard lock(groups_mutex_);
        return group_offsets_.contains(group);
    }

    /// Deletes the group's folder atomically (mmap_group_folder.hpp), then applies retention.
    std::uint64_t remove_group(std::string_view group)
    {
        std::lock_guard lock(groups_mutex_);
        require_open();
        if (const auto known = group_offsets_.find(group); known != group_offsets_.end()) {
            remove_group_folder(offsets_folder_, escape_group_name(group));
            group_offsets_.erase(known);
            cursors_.remove_if([group](const cursor& each) { return each.group == group; });
            retain();  // the removal stands from here on, whatever retention meets
        }
        return 0;
    }

    /// Runs retention for the groups found on disk (called once every partition of the topic has
    /// opened), so segments no known group pins any more are reclaimed without waiting for a
    /// commit. Never throws: see `retain`.
    void retain_at_open() noexcept
    {
        std::lock_guard lock(groups_mutex_);
        retain();
    }

    void release_batch(cursor&) noexcept {}

    // True when a record lies between the cursor's position and the published end: false also when
    // only a segment-end marker does (the last pull found no record before `idle_until`), so that a
    // waiting consumer parks instead of pulling nothing again and again.
    bool has_data(const cursor& reader) const noexcept
    {
        const std::uint64_t end = published_end_.load(std::memory_order_acquire);
        return end > reader.committed.load(std::memory_order_relaxed) &&
               end > reader.idle_until.load(std::memory_order_relaxed);
    }

    /// Flushes what is pending (best effort), unmaps and closes every file. Idempotent.
    void close() noexcept
    {
        std::lock_guard lock(append_mutex_);
        std::lock_guard groups_lock(groups_mutex_);  // waits for a commit's checkpoint and retention
        if (closed_.load(std::memory_order_relaxed)) {
            return;
        }
        try {
            flush_locked(true);
        } catch (...) {
            // Closing releases resources whatever happens; the next open recovers from disk.
        }
        std::unique_lock segments_lock(segments_mutex_);
        closed_.store(true, std::memory_order_release);
        segments_.clear();
        tail_ = nullptr;
        flush_mark_.unmap();
    }

    /// Logical offset one past the newest published record.
    std::uint64_t end_offset() const noexcept { return published_end_.load(std::memory_order_acquire); }

    /// The earliest retained offset.
    std::uint64_t earliest_offset() const
    {
        std::lock_guard lock(groups_mutex_);
        return earliest_offset_;
    }

private:
    using segment_file = mmap_segment_file;

    // Bounds on how far producer.offset lags the flushed data on the produce path (see
    // producer_hint_due).
    static constexpr std::size_t producer_hint_records = 64 * 1024;
    static constexpr std::chrono::steady_clock::duration producer_hint_period = std::chrono::seconds(1);

    const std::string& describe_partition() const { return files_.description; }

    void require_open() const
    {
        if (closed_.load(std::memory_order_acquire)) {
            throw error(errc::closed, describe_partition() + " is closed");
        }
    }

    // `position` in segment `index`, as a normalized offset: the end of a full segment is the next
    // segment's first record boundary.
    std::uint64_t normalized(std::uint64_t index, std::uint64_t position) const noexcept
    {
        if (settings_.segment_size - position < record_header_size) {
            return first_record_offset(index + 1, settings_.segment_size);
        }
        return logical_offset(index, position, settings_.segment_size);
    }

    segment_file& segment_at(std::uint64_t index) const
    {
        if (index < first_segment_index_ || index - first_segment_index_ >= segments_.size()) {
            throw error(errc::corrupt_data, describe_partition() + ": segment " + std::to_string(index) +
                                                " is not retained (retained: " + std::to_string(first_segment_index_) +
                                                " to " + std::to_string(first_segment_index_ + segments_.size()) + ")");
        }
        return *segments_[index - first_segment_index_];
    }

    void publish() noexcept
    {
        published_end_.store(logical_offset(tail_->index, tail_position_, settings_.segment_size),
                             std::memory_order_release);
    }

    // Called with append_mutex_ held.
    void write_record()
    {
        const std::uint64_t size = payload_.size();
        const std::uint64_t limit = max_payload_size(record_area());
        if (size > limit) {
            throw error(errc::invalid_argument, describe_partition() + ": a record of " + std::to_string(size) +
                                                    " bytes does not fit in a segment of " +
                                                    std::to_string(settings_.segment_size) + " bytes (at most " +
                                                    std::to_string(limit) + " payload bytes)");
        }
        if (tail_ended_ || !fits(record_area(), tail_position_, size)) {
            // A segment-end marker is final: once written (even if the rollover then failed, or the
            // process stopped before it), the next record goes to the next segment.
            if (!tail_ended_) {
                reserve(*tail_, tail_position_ + record_header_size);
                encode_segment_end(tail_->region.bytes().subspan(tail_position_));
                tail_ended_ = true;
            }
            roll_over(tail_position_ + record_header_size);
        }
        const std::uint64_t end = tail_position_ + record_size(size);
        reserve(*tail_, end);
        encode_record(tail_->region.bytes().subspan(tail_position_), payload_);
        tail_position_ = end;
        ++unflushed_records_;
        ++records_since_checkpoint_;
    }

    // After an msync of the log completed: the flush mark vouches for everything before
    // `flushed_end` (a store into the mapped flush.mark, never synced; see segment_format.hpp), so
    // recovery reports damage there instead of cutting it as a torn tail. No extra system call.
    void mark_flushed(std::uint64_t flushed_end) noexcept
    {
        if (flush_mark_.data() != nullptr) {
            const auto mark = make_flush_mark(logical_offset(tail_->index, flushed_end, settings_.segment_size));
            std::memcpy(flush_mark_.data(), mark.data(), mark.size());
        }
    }

    // Records end at least `record_header_size` bytes before the end of a segment, so every segment
    // this writer fills ends with a segment-end marker, and a rollover happens before the record that
    // does not fit is written (a failed rollover leaves nothing half-done).
    std::uint64_t record_area() const noexcept { return settings_.segment_size - record_header_size; }

    // Reserves disk blocks for bytes [0, end) of `segment`, a chunk at a time.
    void reserve(segment_file& segment, std::uint64_t end)
    {
        if (end <= segment.reserved_end) {
            return;
        }
        const std::uint64_t chunk_end =
            std::min(settings_.segment_size, (end + reservation_chunk - 1) / reservation_chunk * reservation_chunk);
        preallocate(segment.file, segment.reserved_end, chunk_end - segment.reserved_end);
        segment.reserved_end = chunk_end;
    }

    // Ends the tail segment (its records and marker end at `flush_end`), flushes it and continues in
    // a new segment. A failure leaves the writer on the old tail, so the next append retries.
    void roll_over(std::uint64_t flush_end)
    {
        if (flush_end > flushed_position_) {
            tail_->region.flush(flushed_position_, flush_end - flushed_position_);
            flushed_position_ = flush_end;
        }
        mark_flushed(tail_position_);  // the records before the marker
        unflushed_records_ = 0;
        std::unique_ptr<segment_file> next = create_mmap_segment(files_, tail_->index + 1, reservation_chunk);
        {
            std::unique_lock lock(segments_mutex_);
            segments_.push_back(std::move(next));
            tail_ = segments_.back().get();
        }
        tail_position_ = segment_header_size;
        flushed_position_ = segment_header_size;
        tail_ended_ = false;
        write_producer_hint();
    }

    // Flushes the tail's pending bytes (one msync, then the flush mark); writes producer.offset when
    // forced (a failure throws) or due (best effort, see write_producer_hint).
    void flush_locked(bool force_checkpoint)
    {
        if (tail_position_ > flushed_position_) {
            tail_->region.flush(flushed_position_, tail_position_ - flushed_position_);
            flushed_position_ = tail_position_;
            mark_flushed(flushed_position_);
        }
        unflushed_records_ = 0;
        if (force_checkpoint) {
            write_producer_checkpoint();
        } else if (producer_hint_due()) {
            write_producer_hint();
        }
    }

    // On the produce path producer.offset is due after a failed hint, or once at least
    // flush_batch_size records were appended since the last checkpoint and either
    // producer_hint_records records or producer_hint_period passed. Each checkpoint costs a file
    // write, two fsyncs and a rename, so it must not come with every batch flush; rollovers,
    // commits and close write it regardless.
    bool producer_hint_due() const noexcept
    {
        if (producer_hint_failed_) {
            return true;
        }
        if (records_since_checkpoint_ < settings_.flush_batch_size) {
            return false;
        }
        return records_since_checkpoint_ >= producer_hint_records ||
               std::chrono::steady_clock::now() - checkpoint_time_ >= producer_hint_period;
    }

    // producer.offset written on the way (at a rollover, or when producer_hint_due) is only a
    // recovery hint: the records it would cover are already stored and flushed, so failing to
    // write it must not fail the produce call that stored them (the producer would retry and
    // store them twice). It is retried at the next flush; commits and close write it for real.
    void write_producer_hint() noexcept
    {
        try {
            write_producer_checkpoint();
        } catch (...) {
            producer_hint_failed_ = true;  // retried at the next flush, commit or close
        }
    }

    void write_producer_checkpoint()
    {
        const std::uint64_t offset = logical_offset(tail_->index, tail_position_, settings_.segment_size);
        if (offset != checkpointed_offset_) {
            write_checkpoint(producer_path_, offset);
            checkpointed_offset_ = offset;
        }
        records_since_checkpoint_ = 0;
        checkpoint_time_ = std::chrono::steady_clock::now();
        producer_hint_failed_ = false;
    }

    // Called with groups_mutex_ held, from retain(): releases segments every known group has
    // committed past, keeping the newest `max_retained_consumed_segments` of them. A checkpoint at a
    // segment-end marker (a group that read a segment to its end before the writer ended it) has
    // committed past that segment. Order: the commit already flushed and persisted its checkpoint;
    // then checkpoints at the end of a segment about to go move to the equivalent first offset of
    // the next segment (a checkpoint below earliest.offset is corrupt); then earliest.offset
    // advances; then the files are queued for deletion (retain() deletes them). Leftovers of an
    // interrupted deletion are below earliest.offset and are removed at the next open.
    void apply_retention()
    {
        if (!settings_.max_retained_consumed_segments || group_offsets_.empty()) {
            return;
        }
        std::uint64_t minimum = max_checkpoint_value;
        {
            std::shared_lock lock(segments_mutex_);
            for (const auto& [group, offset] : group_offsets_) {
                minimum = std::min(minimum, normalized_checkpoint(offset));
            }
        }
        const std::uint64_t fully_consumed_below = split_offset(minimum, settings_.segment_size).segment_index;
        const std::uint64_t keep = *settings_.max_retained_consumed_segments;
        if (fully_consumed_below <= first_segment_index_ + keep) {
            return;
        }
        const std::uint64_t delete_below = fully_consumed_below - keep;
        const std::uint64_t earliest = first_record_offset(delete_below, settings_.segment_size);
        for (auto& [group, offset] : group_offsets_) {
            if (offset < earliest) {
                std::uint64_t moved = offset;
                {
                    std::shared_lock lock(segments_mutex_);
                    moved = normalized_checkpoint(offset);
                }
                write_checkpoint(offsets_folder_ + "/" + escape_group_name(group) + "/consumer.offset", moved);
                offset = moved;
                for (cursor& each : cursors_) {
                    if (each.group == group) {
                        each.committed.store(moved, std::memory_order_release);
                    }
                }
            }
        }
        write_checkpoint(earliest_path_, earliest);
        earliest_offset_ = earliest;
        std::vector<std::unique_ptr<segment_file>> removed;
        {
            std::unique_lock lock(segments_mutex_);
            while (first_segment_index_ < delete_below) {
                removed.push_back(std::move(segments_.front()));
                segments_.pop_front();
                ++first_segment_index_;
            }
        }
        for (auto& segment : removed) {
            segment->region.unmap();
            segment->file = unique_fd();
            deletions_.add(std::move(segment->path));
        }
    }

    // Called with groups_mutex_ held, after a commit stored its checkpoint (or at open): retention
    // and its file deletions must not make that commit fail, since its progress is saved. A failed
    // step is retried at the next commit; files that could not be deleted are below earliest.offset
    // and also removed at the next open.
    void retain() noexcept
    {
        try {
            apply_retention();
        } catch (...) {
            // Nothing released beyond what earliest.offset says; the next run starts over.
        }
        deletions_.remove_pending(settings_.folder);
    }

    // A checkpoint as retention sees it: one at a segment-end marker, once the next segment exists,
    // stands for the next segment's first record boundary. Called with segments_mutex_ held.
    std::uint64_t normalized_checkpoint(std::uint64_t offset) const
    {
        const segment_position at = split_offset(offset, settings_.segment_size);
        const std::uint64_t last_index = first_segment_index_ + segments_.size() - 1;
        if (at.segment_index < first_segment_index_ || at.segment_index >= last_index ||
            !is_segment_end(segment_at(at.segment_index).region.bytes(), at.position)) {
            return offset;
        }
        return first_record_offset(at.segment_index + 1, settings_.segment_size);
    }

    // Takes over the recovered (and repaired) state of the partition.
    void take_over(mmap_recovered_state recovered)
    {
        segments_ = std::move(recovered.segments);
        first_segment_index_ = recovered.first_segment_index;
        earliest_offset_ = recovered.earliest_offset;
        group_offsets_ = std::move(recovered.group_offsets);
        tail_ = segments_.back().get();
        tail_position_ = recovered.tail_position;
        // A recovered tail past what is known durable is flushed before anything vouches for it:
        // the next flush (every commit whose checkpoint covers it, close, rollover) msyncs it.
        flushed_position_ = recovered.flushed_position;
        // A last segment ended by a marker whose successor was never created (the process stopped
        // in a rollover, or the disk was full) stays ended: the next append creates the successor,
        // so a topic on a full disk can still be opened and read.
        tail_ended_ = recovered.tail_ended;
        flush_mark_ = std::move(recovered.flush_mark);
        checkpointed_offset_ = recovered.checkpointed_offset;
        publish();
    }

    settings settings_;
    const mmap_partition_files files_;
    const std::string producer_path_;
    const std::string earliest_path_;
    const std::string offsets_folder_;

    std::mutex append_mutex_;
    std::vector<std::byte> payload_;            // guarded by append_mutex_
    segment_file* tail_ = nullptr;              // guarded by append_mutex_
    std::uint64_t tail_position_ = 0;           // guarded by append_mutex_
    std::uint64_t flushed_position_ = 0;        // guarded by append_mutex_
    bool tail_ended_ = false;                   // the tail holds a segment-end marker; append_mutex_
    mapped_region flush_mark_;                  // flush.mark, written under append_mutex_
    std::uint64_t checkpointed_offset_ = 0;     // guarded by append_mutex_
    std::size_t unflushed_records_ = 0;         // guarded by append_mutex_
    std::size_t records_since_checkpoint_ = 0;  // guarded by append_mutex_
    bool producer_hint_failed_ = false;         // guarded by append_mutex_
    std::atomic<bool> closed_{false};           // written under append_mutex_, groups_mutex_ and segments_mutex_
    // When producer.offset was last written, or the partition opened; guarded by append_mutex_.
    std::chrono::steady_clock::time_point checkpoint_time_ = std::chrono::steady_clock::now();
    alignas(64) std::atomic<std::uint64_t> published_end_{0};

    mutable std::shared_mutex segments_mutex_;
    std::deque<std::unique_ptr<segment_file>> segments_;  // guarded by segments_mutex_
    std::uint64_t first_segment_index_ = 0;               // guarded by segments_mutex_

    mutable std::mutex groups_mutex_;
    std::map<std::string, std::uint64_t, std::less<>> group_offsets_;  // every persisted group; groups_mutex_
    std::list<cursor> cursors_;                                        // guarded by groups_mutex_
    std::uint64_t earliest_offset_ = 0;                                // guarded by groups_mutex_
    retention_backlog deletions_;                                      // guarded by groups_mutex_
};

static_assert(storage_partition<mmap_partition<std::string>, std::string>);

}  // namespace bufferqueue::detail
