// bufferqueue: the read-only integrity check of a data folder of persistent topics
// (`bufferqueue-inspect verify`, docs/inspect.md).
//
// For every partition of every topic it runs the library's recovery in read-only mode (what the next
// open would find) and sweeps every file on its own: the header and every record of every segment
// (CRC-32C, padding, where the records end), every checkpoint (producer.offset, earliest.offset,
// earliest.items, each group's consumer.offset), the group folder names, each topic's topic.options
// (intact, and agreeing with the partition folders and segment sizes) and a process-shared topic's
// shared header (check_shared_header, check_shared_slots). It never writes, takes no
// lock and opens every file read-only. Topic and partition folders that are symbolic links to folders
// are followed (as a queue follows them); what it does not check although it could hold data (an
// unexpected entry of folder_listing.hpp: a link that leads nowhere, a partition folder with a
// non-canonical name, a stray entry in a topic folder) is a problem naming it, so the folder is never
// reported intact while something was skipped.
//
// Problems are what would make the next open fail or lose data: damage inside data the library vouches
// for as flushed, a damaged checkpoint, a missing segment, an unexpected entry. A damaged segment file
// is blamed alone: the segment size is taken from the intact segments (folder_reader.hpp).
//
// Notes are what the next open repairs on its own, or what a running queue is doing: a partial record
// after the last complete one of the newest segment (a tail being written, or torn by a crash -
// recovery cuts it off), leftovers of interrupted atomic writes (`.tmp`), segments below
// earliest.offset whose deletion was interrupted, an invalid flush.mark (recovery ignores it), a
// topic folder without topic.options (the next open writes it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace bufferqueue::inspect {

/// One problem or note: the file, the byte in it where that applies, and what is wrong.
struct verify_finding {
    /// The file or folder at fault (a partition folder when its recovery failed as a whole).
    std::string file;
    /// The byte offset in `file` where the damage lies; empty when it concerns the whole file.
    std::optional<std::uint64_t> byte;
    /// What is wrong, in words.
    std::string text;
};

/// What `verify_data_folder` found.
struct verify_report {
    std::vector<verify_finding> problems;  ///< damage; empty when the folder is intact
    std::vector<verify_finding> notes;     ///< repaired by the next open, or a queue at work
    /// Topic folders checked.
    std::size_t topics = 0;
    /// Partition folders checked, over every topic.
    std::size_t partitions = 0;
    std::size_t segments = 0;     ///< segment files checked
    std::uint64_t records = 0;    ///< records whose checksum was verified
    std::size_t checkpoints = 0;  ///< checkpoint files checked

    /// True when no problem was found.
    bool intact() const noexcept { return problems.empty(); }
};

/// Checks every topic of `data_directory` (see the top of this file). Throws `error(errc::invalid_argument)`
/// when the folder does not exist or is not a bufferqueue data folder (as `list_topics`); damage never
/// throws, it is reported. Thread-safe.
verify_report verify_data_folder(const std::string& data_directory);

}  // namespace bufferqueue::inspect
