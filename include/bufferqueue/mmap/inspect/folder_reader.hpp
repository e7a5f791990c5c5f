// bufferqueue: reading the data folder of persistent topics without a queue (bufferqueue-inspect,
// docs/inspect.md). Everything here only reads: files are opened read-only and mapped PROT_READ, no
// lock is taken, so it works on a read-only copy or mount and while a queue has the folder open.
//
// A data folder is the `data_directory` of `mmap_topic_options`: one folder per topic, each holding
// `partition-{id:05}/` folders (docs/mmap-format.md; finding them: folder_listing.hpp). A partition is read with the
// library's own recovery in read-only mode (mmap_recovery.hpp), so item counts, group positions and what counts as
// damage are exactly what the next open of the topic would find. Offsets reported in items are
// record indices (the numbers of the statistics API), log offsets are byte offsets (`logical
// offsets` of segment_format.hpp).
//
// A damaged segment file is blamed alone: the segment size is taken from the first segment file whose
// header is entirely valid, not from the first file, so an empty or damaged first segment does not make
// the intact ones look wrong; a damaged partition's intact segments can still be read.
//
// Reading while a queue writes: a record being written at the tail is found as bytes after the last
// complete record (`tail_bytes`) and reported, never as damage; a segment deleted by retention while
// it is read shows as a `problem` naming the file (read again).
#pragma once

#include "bufferqueue/mmap/detail/mmap_recovery.hpp"
#include "bufferqueue/mmap/detail/topic_options_format.hpp"
#include "bufferqueue/mmap/inspect/folder_listing.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace bufferqueue::inspect {

/// The options that `topic`'s folder stores in its `topic.options` (docs/mmap-format.md): nothing
/// when it has none (last opened by a release that did not write it; the next open writes it). Throws
/// `error(errc::corrupt_data)` naming the file when it is damaged, `error(errc::io_error)` when it
/// cannot be read. Thread-safe.
std::optional<detail::stored_topic_options> read_topic_options(const std::string& data_directory,
                                                               const std::string& topic);

/// One consumer group's committed position in a partition.
struct group_position {
    std::string group;                       ///< the group's name (unescaped from its folder name)
    std::uint64_t committed = 0;             ///< items: the index of the next record the group reads
    std::uint64_t committed_log_offset = 0;  ///< the byte offset in its consumer.offset
    std::string checkpoint_path;             ///< its consumer.offset file
};

/// A segment file of a damaged partition that `partition_reader::read_records` leaves out, and why.
struct unreadable_segment {
    /// The segment file's path.
    std::string path;
    std::string reason;  ///< why it cannot be read (its size, its damaged header, an I/O error)
};

/// What a partition holds, as recovery reads it.
struct partition_summary {
    /// The topic's name.
    std::string topic;
    /// The partition's number in the topic.
    std::size_t partition = 0;
    /// The partition's folder, `{data_directory}/{topic}/partition-{id:05}`.
    std::string folder;
    std::uint64_t segment_size = 0;  ///< from the first valid segment header (else the size most segment
                                     ///< files have); 0 when there is no segment
    std::size_t segments = 0;        ///< retained segment files
    std::uint64_t bytes = 0;         ///< the size of those files
    std::uint64_t earliest = 0;      ///< items: the index of the first retained record
    std::uint64_t end = 0;           ///< items: records ever appended (the next record's index)
    /// The byte offset in the log of the first retained record (its earliest.offset); 0 when
    /// `problem` is set.
    std::uint64_t earliest_log_offset = 0;
    std::uint64_t end_log_offset = 0;            ///< where the next record goes (normalized)
    std::uint64_t tail_bytes = 0;                ///< nonzero bytes after the last complete record: a record
                                                 ///< being written, or torn by a crash (the next open cuts them)
    std::optional<std::string> problem;          ///< set when recovery fails: its message (file and offset)
    std::vector<group_position> groups;          ///< sorted by name; empty when `problem` is set
    std::vector<unreadable_segment> unreadable;  ///< when `problem` is set: the segment files left out of
                                                 ///< `read_records` (and `segments`), oldest first

    /// `end - earliest`: the records held.
    std::uint64_t records() const noexcept { return end - earliest; }
};

/// One record (or the damaged or partial record where reading stopped) found by `read_records`.
struct record_entry {
    std::uint64_t item = 0;                ///< items: the record's index (for an invalid record, where it would be)
    std::uint64_t log_offset = 0;          ///< byte offset in the log
    std::string segment_file{};            ///< the segment file name ("00000000000000000000.log")
    std::uint64_t position = 0;            ///< byte position in that file
    std::uint64_t size = 0;                ///< the payload length the record declares
    bool valid = true;                     ///< the checksum (and padding) match
    std::span<const std::byte> payload{};  ///< the payload (for an invalid record, what lies there)
    std::string problem{};                 ///< for an invalid record: why, and whether it is a tail
    bool tail = false;                     ///< an invalid record that is the tail being written
};

/// A partition opened read-only: its summary and its records. Move-only; not thread-safe (one
/// thread at a time). Holds read-only mappings of the segment files while it lives.
class partition_reader {
public:
    /// Reads partition `partition` of `topic`. Throws `error(errc::invalid_argument)` naming the
    /// topic and partition when it does not exist; a damaged partition does not throw (see
    /// `summary().problem`).
    partition_reader(const std::string& data_directory, const std::string& topic, std::size_t partition);

    /// Takes the source's mappings over; the source may then only be destroyed or assigned to.
    /// Never throws.
    partition_reader(partition_reader&&) noexcept;
    /// Unmaps this reader's segment files and takes the source's over; the source may then only be
    /// destroyed or assigned to. Never throws.
    partition_reader& operator=(partition_reader&&) noexcept;
    /// Unmaps the segment files: every `payload` span `read_records` handed out dangles from then on.
    ~partition_reader();

    /// What the partition holds.
    const partition_summary& summary() const noexcept { return summary_; }

    /// The recovered state, when recovery succeeded (for the group editor); nullptr otherwise.
    const detail::mmap_recovered_state* recovered() const noexcept;

    /// The files of the partition (paths and segment size).
    const detail::mmap_partition_files& files() const noexcept { return files_; }

    /// Calls `visit` for up to `count` records from item index `from` (between earliest and end),
    /// oldest first, and then, if reading stopped at a damaged record or at a tail being written,
    /// once more with that record (`valid == false`; not counted in `count`). After damage inside a
    /// segment the rest of it cannot be read (record boundaries are lost); reading goes on with the
    /// next segment. Throws `error(errc::invalid_argument)` naming the topic, partition and the valid
    /// range when `from` is outside it. The payload spans are valid until the reader is destroyed.
    void read_records(std::uint64_t from, std::uint64_t count,
                      const std::function<void(const record_entry&)>& visit) const;

    /// The byte offset of the record with item index `item` (or the log end for `item == end`),
    /// normalized as checkpoints hold it. Requires `recovered()`; throws `error(errc::invalid_argument)`
    /// naming the topic, partition, item and the valid range when it is outside [earliest, end].
    std::uint64_t log_offset_of(std::uint64_t item) const;

private:
    struct segments;
    // For a damaged partition: maps the segment files that can be read and lists the others in
    // `summary_.unreadable`.
    void open_readable_segments();
    detail::mmap_partition_files files_;
    partition_summary summary_;
    std::unique_ptr<segments> segments_;
};

}  // namespace bufferqueue::inspect
