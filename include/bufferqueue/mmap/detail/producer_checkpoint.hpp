// Internal: a persistent partition's producer.offset - the recovery hint of how far the log was
// flushed, and when the produce path writes it (see docs/mmap-storage.md, "Flushing").
#pragma once

#include "bufferqueue/mmap/detail/mmap_segment_file.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace bufferqueue::detail {

/// Writes producer.offset (a checkpoint of a logical offset the log was flushed to) and decides when
/// the produce path writes it. On the produce path it is due after a failed hint, or once at least
/// `flush_batch_size` records were appended since the last checkpoint and either
/// `producer_hint_records` records or `producer_hint_period` passed: each checkpoint costs a file
/// write, two fsyncs and a rename, so it must not come with every batch flush; rollovers, commits
/// and close write it regardless.
///
/// Thread-safety: part of `segment_appender`, used under the writer's mutex (which guards every
/// field). Allocation: the file layer's, per write. Completion: synchronous (file I/O). Errors: `write`
/// throws `io_error`; `write_hint` never throws.
class producer_checkpoint {
public:
    /// producer.offset of the partition in `files` (which must outlive this), recovered as
    /// `checkpointed_offset`. Never throws.
    producer_checkpoint(const mmap_partition_files& files, std::uint64_t checkpointed_offset,
                        std::size_t flush_batch_size) noexcept
        : files_(files), path_(files.producer_path()), flush_batch_size_(flush_batch_size),
          checkpointed_offset_(checkpointed_offset)
    {
    }

    /// Whether producer.offset is behind `offset`.
    bool behind(std::uint64_t offset) const noexcept { return checkpointed_offset_ < offset; }

    /// A record was appended.
    void count_record() noexcept { ++records_since_checkpoint_; }

    /// Whether the produce path writes the hint now (see above).
    bool hint_due() const noexcept;

    /// Writes `offset` (flushed data only) when producer.offset holds another; `unflushed_items`
    /// records appended past it count towards the next checkpoint. Throws `io_error`.
    void write(std::uint64_t offset, std::uint64_t unflushed_items);

    /// As `write`, on the way (at a rollover, or when `hint_due`): only a recovery hint, since the
    /// records it would cover are already stored and flushed - failing to write it must not fail the
    /// produce call that stored them (the producer would retry and store them twice). A failure is
    /// retried at the next flush; commits and close write it for real. Never throws.
    void write_hint(std::uint64_t offset, std::uint64_t unflushed_items) noexcept;

private:
    static constexpr std::size_t producer_hint_records = 64 * 1024;
    static constexpr std::chrono::steady_clock::duration producer_hint_period = std::chrono::seconds(1);

    const mmap_partition_files& files_;
    const std::string path_;
    const std::size_t flush_batch_size_;
    std::uint64_t checkpointed_offset_ = 0;     // what producer.offset holds
    std::size_t records_since_checkpoint_ = 0;  // records appended since it was written
    bool hint_failed_ = false;                  // the last hint failed: retried at the next flush
    // When producer.offset was last written, or the partition opened.
    std::chrono::steady_clock::time_point checkpoint_time_ = std::chrono::steady_clock::now();
};

}  // namespace bufferqueue::detail
