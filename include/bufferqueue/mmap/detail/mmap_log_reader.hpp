// Internal: the reading side of a persistent partition - a consumer group's cursor and `pull`,
// which decodes published records from the mapped segments into the cursor's buffer.
#pragma once

#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/mmap/detail/mmap_log_writer.hpp"
#include "bufferqueue/mmap/detail/mmap_segment_list.hpp"
#include "bufferqueue/mmap/detail/segment_format.hpp"
#include "bufferqueue/serialization/any_serializer.hpp"
#include "bufferqueue/storage/storage.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace bufferqueue::detail {

/// A consumer group's progress in a persistent partition, the part that does not depend on the
/// item type. `committed` and `committed_items` are written together under the checkpoint store's
/// groups mutex (retention may move `committed` to an equivalent offset, never the items) and read
/// lock-free.
struct mmap_group_progress {
    std::string group;
    std::string checkpoint_path;
    std::atomic<std::uint64_t> committed{0};
    std::atomic<std::uint64_t> committed_items{0};  // the item index at `committed`
    // A pull from `committed` found no record before this offset (only a segment-end marker):
    // has_data stays false until the log grows past it. Written by pull.
    std::atomic<std::uint64_t> idle_until{0};
    // Where the last pull ended, in offset and items: what a commit of that batch stores without
    // counting records again. Used only by the cursor's one consumer (pull, then commit).
    std::optional<log_position> pulled_end;
    // The record the last pull could not decode (its frame was valid), while the group stands at
    // it: what `pull_consumer::skip` commits past. Used only by the cursor's one consumer.
    std::optional<unreadable_record> undecodable;
    std::vector<std::byte> undecodable_payload;  // what `undecodable.payload` views
};

/// A consumer group's cursor; its batch is decoded into `decoded`. Owned by the partition.
template <class T>
struct mmap_cursor : mmap_group_progress {
    std::vector<T> decoded;
    std::vector<std::uint64_t> offsets;  // each decoded item's record position
};

/// Decodes records for pulls. Holds the segment list shared while it reads, never the writer's
/// mutex. Thread-safe for different cursors; a cursor is used by one consumer at a time.
template <class T>
class mmap_log_reader {
public:
    /// `files`, `segments`, `writer` and `serializer` must outlive the reader.
    mmap_log_reader(const mmap_partition_files& files, const mmap_segment_list& segments, const mmap_log_writer& writer,
                    const any_serializer<T>& serializer) noexcept
        : files_(files), segments_(segments), writer_(writer), serializer_(serializer)
    {
    }

    /// Up to `max_items` items from the cursor's committed offset, decoded into `reader.decoded`
    /// (valid until the next pull), and the offset after them, normalized. Nothing once closed.
    /// Throws `error(errc::corrupt_data)` naming the offset and file for a record that is not valid
    /// or cannot be decoded, but only when it is the first of the batch (the records before it are
    /// delivered first). Allocates the decoded items.
    pull_result<T> pull(mmap_cursor<T>& reader, std::size_t max_items)
    {
        const auto lock = segments_.share();
        reader.decoded.clear();
        reader.offsets.clear();
        reader.undecodable.reset();
        std::uint64_t position = reader.committed.load(std::memory_order_relaxed);
        if (segments_.closed()) {
            return {{}, position};
        }
        const std::uint64_t start_items = reader.committed_items.load(std::memory_order_relaxed);
        const std::uint64_t end = writer_.published_end();
        while (reader.decoded.size() < max_items && position < end) {
            const segment_position at = split_offset(position, files_.segment_size);
            const mmap_segment_file& segment = segments_.at(at.segment_index);
            const std::span<const std::byte> bytes = segment.region.bytes();
            const std::optional<record_view> record = read_record(bytes, at.position);
            if (!record) {
                if (const std::uint64_t next = normalize_offset(bytes, at.segment_index, at.position, end);
                    next != position) {
                    position = next;  // a segment-end marker: the next segment holds the next record
                    continue;
                }
                if (!reader.decoded.empty()) {
                    break;
                }
                throw error(errc::corrupt_data,
                            format_message("{}: no valid record at offset {} (byte {} of {}) inside the written log",
                                           files_.description, position, at.position, segment.path));
            }
            try {
                reader.decoded.push_back(serializer_.deserialize(record->payload));
            } catch (const std::exception& failure) {
                // Any exception of a user's deserializer, not only bufferqueue::error: the records
                // before it are delivered first, and the failure is corrupt_data naming the record.
                if (!reader.decoded.empty()) {
                    break;
                }
                // The frame is valid, so its end is known: `skip` may commit past it (one item).
                const std::uint64_t next = normalize_offset(bytes, at.segment_index, record->next_position, end);
                reader.undecodable_payload.assign(record->payload.begin(), record->payload.end());
                reader.undecodable = unreadable_record{position, next, reader.undecodable_payload};
                reader.pulled_end = log_position{next, start_items + 1};
                throw error(errc::corrupt_data,
                            format_message("{}: cannot decode the record at offset {} of {}: {}", files_.description,
                                           position, segment.path, failure.what()));
            }
            reader.offsets.push_back(position);
            // A batch that stops at a segment-end marker ends at the next segment's first record
            // boundary, so the checkpoint a commit stores is normalized.
            position = normalize_offset(bytes, at.segment_index, record->next_position, end);
        }
        if (reader.decoded.empty() && max_items > 0) {
            // Nothing but a marker before `end` (a group at a segment-end marker whose next segment
            // holds no record yet): has_data stays false until a record is published.
            reader.idle_until.store(end, std::memory_order_relaxed);
        }
        reader.pulled_end = log_position{position, start_items + reader.decoded.size()};
        return {std::span<const T>(reader.decoded), position, std::span<const std::uint64_t>(reader.offsets)};
    }

    /// True when a record lies between the cursor's position and the published end: false also
    /// when only a segment-end marker does (the last pull found no record before `idle_until`), so
    /// that a waiting consumer parks instead of pulling nothing again and again. Lock-free.
    bool has_data(const mmap_cursor<T>& reader) const noexcept
    {
        const std::uint64_t end = writer_.published_end();
        return end > reader.committed.load(std::memory_order_relaxed) &&
               end > reader.idle_until.load(std::memory_order_relaxed);
    }

private:
    const mmap_partition_files& files_;
    const mmap_segment_list& segments_;
    const mmap_log_writer& writer_;
    const any_serializer<T>& serializer_;
};

}  // namespace bufferqueue::detail
