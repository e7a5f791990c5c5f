// Internal: the shared header of a process-shared persistent topic (`{topic}/shared.header`), which
// every process that has the topic open maps: the options that define the stored data, a wake-up
// event for appends, and one slot per partition holding its append lock. It coordinates live
// processes only and is never synced: the first process to open the folder makes it anew.
//
// docs/mmap-format.md ("Shared header") describes the same layout. Integers are in the host's
// byte order (the file is shared by processes of one host and never read elsewhere).
//
//   offset size field
//        0    8 magic "BQSHARE\0" (42 51 53 48 41 52 45 00)
//        8    4 format version, 2 (version 1 had no membership sequence and a 196-byte name)
//       12    4 state: 1 once the first opener made it (0 while it writes it)
//       16    4 header size, 256 (where partition slot 0 starts)
//       20    4 partition slot size, 256
//       24    8 partitions
//       32    8 segment size in bytes
//       40    8 retention: max_retained_consumed_segments + 1, or 0 when segments are never deleted
//       48    4 wake-up sequence (a futex word, advanced after appends and membership changes)
//       52    4 wake-up waiters (threads sleeping on the sequence)
//       56    4 membership sequence (advanced before the wake-up sequence after a membership change)
//       60    4 serializer name length N, at most 192
//       64  192 serializer name (N bytes, then zeros): the type of the topic's serializer
//
// Partition slot p, at 256 + p * 256:
//
//   offset size field
//        0   64 append lock: a robust process-shared pthread_mutex_t (glibc's layout), then zeros
//       64  192 the partition's shared log state (shared_log_slot.hpp), guarded by the append lock
#pragma once

#include "bufferqueue/mmap/detail/file_mapping.hpp"
#include "bufferqueue/mmap/detail/process_shared_sync.hpp"
#include "bufferqueue/mmap/detail/shared_log_slot.hpp"
#include "bufferqueue/mmap/detail/shared_topic_watcher.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace bufferqueue::detail {

/// The options of a topic that define its stored data: every process that opens a process-shared
/// topic must give the same ones.
struct shared_topic_options {
    std::uint64_t partitions = 1;
    std::uint64_t segment_size = 0;
    std::optional<std::size_t> max_retained_consumed_segments{};
    std::string serializer_name{};  ///< compared on its first `shared_header_layout::max_serializer_name` bytes
};

/// Sizes and offsets of the layout above.
struct shared_header_layout {
    static constexpr std::string_view file_name = "shared.header";
    static constexpr std::uint32_t version = 2;
    static constexpr std::size_t header_size = 256;
    static constexpr std::size_t slot_size = 256;
    static constexpr std::size_t max_serializer_name = 192;
    /// Where the wake-up words start (`shared_wakeups`, `shared_wakeups::storage_size` bytes): words
    /// every queue that has the topic open changes while it runs.
    static constexpr std::size_t wake_offset = 48;

    /// The file's size for `partitions` partitions.
    static constexpr std::uint64_t file_size(std::uint64_t partitions) noexcept
    {
        return header_size + partitions * slot_size;
    }
};

/// What a shared header's first `shared_header_layout::header_size` bytes hold (`check_shared_header`).
struct shared_header_fields {
    std::uint64_t partitions = 0;
    std::uint64_t segment_size = 0;
    std::uint64_t retention = 0;  ///< `max_retained_consumed_segments` + 1, or 0 when segments are never deleted
    std::string serializer_name{};
};

/// Checks the first `shared_header_layout::header_size` bytes of a shared header whose file has
/// `file_size` bytes, as a process that did not make it must before it trusts them: magic, version,
/// state, sizes, partitions (at least 1, with a slot for each in the file), segment size, serializer
/// name (its length, zeros after it). Returns the fields. Throws `error(errc::invalid_argument)`
/// naming `path` when it is a version 1 header (a process of an older bufferqueue has the topic open:
/// processes of both versions cannot share it; see docs/mmap-format.md), and
/// `error(errc::corrupt_data)` naming `path`, the field and its value for anything else it does not
/// accept. Never writes.
shared_header_fields check_shared_header(std::span<const std::byte> header, std::uint64_t file_size,
                                         const std::string& path);

/// Checks the partition slots of a shared header, `file` being (at least) its first
/// `shared_header_layout::file_size(partitions)` bytes: each append lock is a mutex
/// `process_shared_mutex::initialize` made (process_shared_mutex::check) and the reserved bytes are
/// zero. The shared log state is checked by its users, under the lock (check_shared_log_state).
/// Throws `error(errc::corrupt_data)` naming `path`, the partition, the field and its value.
void check_shared_slots(std::span<const std::byte> file, std::uint64_t partitions, const std::string& path);

/// The mapped shared header of one process-shared topic. Open it while holding the folder's
/// `shared_directory_lock` and before `finish_opening()`: then the first opener makes it while no
/// other process reads it. Move-only; the views it hands out are valid while it lives.
class shared_topic_header {
public:
    /// Maps `{topic_folder}/shared.header`. With `first` (no other queue has the folder open) it is
    /// made anew from `options`; otherwise it must hold the same options, or this throws
    /// `error(errc::invalid_argument)` naming the option, both values, the topic and the folder,
    /// and changes nothing. Throws `error(errc::corrupt_data)` naming the file, the field and its
    /// value when it is not a shared header of this version that a queue made (check_shared_header,
    /// check_shared_slots), `error(errc::invalid_argument)` when a process of an older version made it
    /// (check_shared_header), and `error(errc::io_error)` for OS failures. A header it creates gets
    /// `file_permissions(access)` less the umask; an existing one that belongs to another user is
    /// refused before it is changed or mapped, unless `access` is `file_access::group_write`
    /// (whoever owns it can rewrite it and stop every process that appends):
    /// `error(errc::invalid_argument)` naming the file, its owner and the option - a usage error like
    /// the options' mismatch above, which the option or a chown mends.
    shared_topic_header(std::string_view topic, const std::string& topic_folder, const shared_topic_options& options,
                        bool first, file_access access = file_access::owner);

    shared_topic_header(shared_topic_header&&) noexcept = default;
    shared_topic_header& operator=(shared_topic_header&&) noexcept = default;
    shared_topic_header(const shared_topic_header&) = delete;
    shared_topic_header& operator=(const shared_topic_header&) = delete;
    ~shared_topic_header() = default;

    /// The path of the header file.
    const std::string& path() const noexcept { return region_.path(); }

    /// The append lock of `partition` (< the topic's partitions), shared by every process.
    process_shared_mutex append_lock(std::size_t partition) const;

    /// The shared log state of `partition` (< the topic's partitions), guarded by its append lock.
    /// Zero until the first opener's partition stores its state. Check what it holds
    /// (check_shared_log_state) before using it: another process wrote it.
    shared_log_slot log_slot(std::size_t partition) const;

    /// The topic's wake-up words: appenders notify appends, memberships notify their changes, each
    /// process's one watcher waits on them (shared_topic_watcher.hpp).
    shared_wakeups wakeups() const noexcept;

private:
    std::string topic_;
    std::uint64_t partitions_ = 0;
    mapped_region region_;
};

}  // namespace bufferqueue::detail
