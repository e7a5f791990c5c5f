// bufferqueue: persistent topics stored in memory-mapped segment files - their options and their
// `make_topic` (see `buffer_queue::add_topic`).
#pragma once

#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/mmap_partition.hpp"
#include "bufferqueue/mmap/detail/mmap_recovery.hpp"
#include "bufferqueue/mmap/detail/segment_format.hpp"
#include "bufferqueue/mmap/detail/topic_options_file.hpp"
#include "bufferqueue/mmap/file_access.hpp"
#include "bufferqueue/options.hpp"
#include "bufferqueue/serialization/any_serializer.hpp"
#include "bufferqueue/serialization/serializer.hpp"
#include "bufferqueue/storage/storage.hpp"
#include "bufferqueue/topic/option_checks.hpp"
#include "bufferqueue/topic/partitioned_topic.hpp"
#include "bufferqueue/topic/topic_context.hpp"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace bufferqueue {

/// Registration options of a persistent topic of `T` (see `buffer_queue::add_topic`): data and
/// committed offsets survive restarts. Every field has a default; `name` and `data_directory` must
/// be set. `partitions`, `segment_size` and the serializer's type define the stored data: the topic
/// folder keeps them (`topic.options`, docs/mmap-storage.md) and every later open must give the same
/// ones (`partitions` may grow), else `invalid_argument` naming the option, both values and the
/// folder. Keep `partition_key` and the serializer's schema compatible with the records stored.
template <class T>
struct mmap_topic_options {
    /// Topic name; also the folder name under `data_directory`, so it must be one valid folder name
    /// (and not only whitespace).
    std::string name{};
    /// Number of partitions, at least 1.
    std::size_t partitions = 1;
    /// The folder holding `{name}/partition-{id:05}/...`; created when missing.
    std::filesystem::path data_directory{};
    /// Bytes per segment file, a multiple of 8 of at least 64 bytes and
    /// at most 2^40. A record's payload must fit in one segment with its 8-byte header and the 8-byte
    /// segment-end marker (payload <= segment_size - 56).
    std::uint64_t segment_size = 256ULL * 1024 * 1024;
    /// Segments every known group has committed past that are kept before deletion; empty (the
    /// default) never deletes. Not stored with the data: it may change between opens.
    std::optional<std::size_t> max_retained_consumed_segments{};
    /// When appended records are forced to disk.
    flush_strategy flush = flush_strategy::immediate;
    /// With `flush_strategy::batch`: records per partition between flushes. Under both strategies, also
    /// the fewest records between two `producer.offset` recovery hints written by produce calls (see
    /// docs/mmap-storage.md).
    std::size_t flush_batch_size = 100;
    /// Encodes items into record payloads; part of the persisted format (its type name is stored in
    /// `topic.options` and compared at every open).
    any_serializer<T> serializer = json_serializer<T>{};
    /// Optional key routing; round-robin when empty. Equal keys reach the same partition after a
    /// restart too (routing never depends on the process).
    key_selector<T> partition_key{};
    /// Lets queues in several processes of this host open the topic at once, each producing and
    /// consuming (docs/mmap-storage.md, "Process-shared topics"): appends to a partition are
    /// serialized across processes, consumers of one group share the partitions across processes,
    /// and a consumer parked in `consume()` wakes when another process appends. Every process must
    /// give the same `partitions`, `segment_size`, `max_retained_consumed_segments` and serializer
    /// type (else `invalid_argument` naming the option and the folder). With `false` (the default)
    /// the folder is locked by one queue, and a second one gets `io_error`. Retention counts the
    /// groups of every process.
    bool process_shared = false;
    /// Who may read and change the folders and files the topic creates (file_access.hpp): owner-only
    /// by default (folders 0700, files 0600, less the umask), the data directory too when the topic
    /// creates it. Folders and files that already exist keep their modes. With `process_shared`, a
    /// folder whose `shared.header` belongs to another user is refused (`invalid_argument` naming
    /// the file, its owner and this option) unless this is `file_access::group_write`. Need not
    /// agree between processes; each creates its own files with its own. See docs/mmap-storage.md,
    /// "Who may read the data".
    file_access access = file_access::owner;
};

namespace detail {

inline void validate_topic_folder_name(const std::string& name)
{
    const bool valid = !name.empty() && !only_whitespace(name) && name != "." && name != ".." && name.size() <= 255 &&
                       name.find('/') == std::string::npos && name.find('\0') == std::string::npos;
    require_option(valid, "mmap", name, "name",
                   "must be one valid folder name: not empty or only whitespace, not '.' or '..', no '/' or "
                   "NUL, at most 255 bytes");
}

/// Validates `options`, locks the topic folder, checks the options that define the stored data
/// against the folder's (`check_topic_options`), recovers or creates every partition, stores those
/// options in `topic.options` when the folder lacks them or gained partitions, and builds the topic.
/// Every partition is recovered read-only before anything is written or repaired, so an
/// `invalid_argument` or `corrupt_data` failure changes no file of any partition. With `process_shared`, the folder is
/// held shared: the first queue to open it recovers and repairs as above; later ones (while it stays open somewhere)
/// read the log's state from the shared header and repair nothing. Throws `bufferqueue::error`: `invalid_argument`
/// naming the option at fault (for a mismatch with the folder: both values and the folder too), `corrupt_data` naming
/// the file and offset (a process-shared topic's shared header: the field and its value), `io_error` (also when
/// another queue holds the folder open), `timed_out` (another process held a partition's append lock for
/// `process_shared_mutex::max_wait`, 30 s), `topic_exists` and `closed` (checked before the folder is locked).
template <class T>
registered_topic make_mmap_topic(mmap_topic_options<T> options, topic_context& context)
{
    // Checked before the folder is locked, so a duplicate is `topic_exists`, not a lock conflict.
    context.require_unregistered<T>(options.name);
    constexpr std::string_view kind = "mmap";
    validate_topic_folder_name(options.name);
    require_partition_count(kind, options.name, options.partitions);
    require_option(!options.data_directory.empty(), kind, options.name, "data_directory", "must be set");
    require_option(is_valid_segment_size(options.segment_size), kind, options.name, "segment_size",
                   detail::format_message("must be a multiple of 8 between {} and 2^40 bytes (got {})",
                                          min_segment_size, options.segment_size));
    require_option(options.flush_batch_size >= 1, kind, options.name, "flush_batch_size", "must be at least 1");
    require_option(options.flush == flush_strategy::immediate || options.flush == flush_strategy::batch, kind,
                   options.name, "flush", "must be flush_strategy::immediate or flush_strategy::batch");

    const std::string topic_folder = (options.data_directory / options.name).string();
    make_directories(topic_folder, options.access);
    std::shared_ptr<directory_lock> lock;
    std::shared_ptr<shared_topic_runtime> shared;
    std::optional<stored_topic_options> options_to_store;  // into topic.options, once the folder checked out
    if (options.process_shared) {
        shared = std::make_shared<shared_topic_runtime>(
            options.name, topic_folder,
            shared_topic_options{.partitions = options.partitions,
                                 .segment_size = options.segment_size,
                                 .max_retained_consumed_segments = options.max_retained_consumed_segments,
                                 .serializer_name = std::string(options.serializer.type_name())},
            options.access);
        options_to_store = shared->options_to_store();
    } else {
        lock = std::make_shared<directory_lock>(topic_folder, options.access);
        options_to_store = check_topic_options(options.name, topic_folder,
                                               {.partitions = options.partitions,
                                                .segment_size = options.segment_size,
                                                .serializer_name = std::string(options.serializer.type_name())});
    }
    // A process-shared folder that other processes have open is theirs to repair: this one only reads.
    const recovery_repairs repairs = !shared || shared->first() ? recovery_repairs::all : recovery_repairs::none;

    for (const directory_entry& entry : list_directory(topic_folder)) {
        constexpr std::string_view prefix = "partition-";
        if (entry.kind != entry_kind::directory || !entry.name.starts_with(prefix)) {
            continue;
        }
        const std::string number = entry.name.substr(prefix.size());
        if (!number.empty() && number.find_first_not_of("0123456789") == std::string::npos &&
            (number.size() > 9 || std::stoull(number) >= options.partitions)) {
            throw error(errc::corrupt_data,
                        detail::format_message("mmap topic '{}': {}/{} exists, but the topic has {} partitions (its "
                                               "topic.options and its options); records there would never be read",
                                               options.name, topic_folder, entry.name, options.partitions));
        }
    }

    using partition_type = mmap_partition<T>;
    std::vector<typename partition_type::settings> configurations;
    for (std::size_t partition = 0; partition < options.partitions; ++partition) {
        configurations.push_back(
            typename partition_type::settings{.topic = options.name,
                                              .partition = partition,
                                              .folder = partition_folder(topic_folder, partition),
                                              .segment_size = options.segment_size,
                                              .flush = options.flush,
                                              .flush_batch_size = options.flush_batch_size,
                                              .max_retained_consumed_segments = options.max_retained_consumed_segments,
                                              .serializer = options.serializer,
                                              .access = options.access});
    }
    // Every partition is validated before any is repaired, so a failed open changes no file.
    std::deque<mmap_recovered_state> recovered;  // a deque: the state is move-only
    for (std::size_t partition = 0; partition < options.partitions; ++partition) {
        const mmap_partition_files files = partition_type::partition_files(configurations[partition]);
        // Other processes append meanwhile: read the partition while none of them can.
        std::optional<shared_topic_runtime::partition_guard> quiet;
        if (repairs == recovery_repairs::none) {
            quiet.emplace(*shared, partition, files);
        }
        recovered.push_back(recover_mmap_partition(files));
    }
    if (repairs == recovery_repairs::all) {
        remove_topic_options_leftover(topic_folder);
        if (options_to_store) {
            write_topic_options(topic_folder, *options_to_store, options.access);
        }
    }
    for (std::size_t partition = 0; partition < options.partitions; ++partition) {
        apply_mmap_recovery(partition_type::partition_files(configurations[partition]), recovered[partition],
                            partition_type::reservation_chunk, repairs);
    }
    topic_partitions<partition_type> partitions;
    partitions.reserve(options.partitions);
    for (std::size_t partition = 0; partition < options.partitions; ++partition) {
        partition_type& opened =
            partitions.emplace_back(std::move(configurations[partition]), std::move(recovered[partition]));
        if (shared) {
            opened.share(*shared, shared->first());
        }
    }
    // Only once every partition opened: a failed open changes no partition's segments.
    for (std::size_t partition = 0; partition < partitions.size(); ++partition) {
        partitions[partition].retain_at_open();
    }
    std::shared_ptr<group_membership> membership;
    std::shared_ptr<void> resources = lock;
    if (shared) {
        membership = shared->make_membership();
        shared->start();
        resources = shared;
    }
    return make_partitioned_topic(context,
                                  topic_settings<T>{.name = std::move(options.name),
                                                    .partition_key = std::move(options.partition_key),
                                                    .bounded_capacity = std::nullopt,
                                                    .full_mode = full_mode::wait,
                                                    .resources = std::move(resources),
                                                    .membership = std::move(membership)},
                                  std::move(partitions));
}

}  // namespace detail

/// The `make_topic` of persistent topics, found by `buffer_queue::add_topic`: validates `options`,
/// creates the folder `data_directory/name` when missing and locks it (with `process_shared`: opens
/// it shared with the other processes), recovers or creates every partition and builds the topic.
/// Every partition is recovered read-only before any is repaired, so a `corrupt_data` failure
/// changes no file. With `process_shared`, the first queue to open the folder recovers and repairs
/// as above; later ones (while it stays open somewhere) read the log's state from the shared header
/// and repair nothing, and the topic starts threads that watch the other processes. Throws
/// `bufferqueue::error`: `errc::topic_exists` and `errc::closed` (checked before the folder is
/// locked), `errc::invalid_argument` naming the option at fault, `errc::corrupt_data` naming the
/// file and offset (also a partition folder the configured `partitions` would never read),
/// `errc::io_error` (also when another queue holds the folder open). Allocates and does file I/O:
/// call it at start-up, not from a latency-sensitive executor thread.
template <class T>
registered_topic make_topic(mmap_topic_options<T> options, topic_context& context)
{
    return detail::make_mmap_topic(std::move(options), context);
}
}  // namespace bufferqueue
