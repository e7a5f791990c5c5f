// Internal: `{topic}/topic.options`, the options that define a persistent topic's stored data
// (layout in topic_options_format.hpp), and the one check that refuses a queue giving other ones -
// against this file, and (shared_topic_header.hpp) against the processes that have a process-shared
// folder open - with one wording.
#pragma once

#include "bufferqueue/error.hpp"
#include "bufferqueue/mmap/detail/topic_options_format.hpp"
#include "bufferqueue/mmap/file_access.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace bufferqueue::detail {

/// Where the options a queue is compared with come from.
enum class options_origin {
    open_elsewhere,  ///< the shared header of processes that have the folder open now
    options_file,    ///< the folder's topic.options
    folder_files,    ///< read from a folder without topic.options: its partition folders and segment headers
};

/// The error for option `option`, given as `here`, while the folder `topic_folder` of `topic` has
/// `there` (from `origin`): `errc::invalid_argument` naming the option, both values and the folder.
/// The one wording of every such refusal. Never throws except `std::bad_alloc`.
error option_mismatch(std::string_view topic, const std::string& topic_folder, options_origin origin,
                      std::string_view option, const std::string& here, const std::string& there);

/// Throws `option_mismatch` for the first of partitions, segment_size and serializer in which `given`
/// differs from `found`. Serializer names are compared as given (the caller cuts them to what its
/// origin keeps) but without the spellings in which GCC and clang differ (`detail::type_name`):
/// spaces, `std::__cxx11::` for `std::`, and anonymous namespaces, so a program built by the other
/// compiler opens the folder.
/// Partitions differ when they are not equal, except that with `origin != open_elsewhere` more
/// partitions than `found` are allowed (a folder may grow: the new partitions start empty).
void require_same_options(std::string_view topic, const std::string& topic_folder, options_origin origin,
                          const stored_topic_options& given, const stored_topic_options& found);

/// Reads `{topic_folder}/topic.options`: `std::nullopt` when it does not exist. Throws
/// `error(errc::corrupt_data)` naming the file when it is not a valid topic options file,
/// `error(errc::io_error)` when it cannot be read.
std::optional<stored_topic_options> read_topic_options(const std::string& topic_folder);

/// Durably replaces `{topic_folder}/topic.options` with `options` (write_file_atomically). Throws
/// `error(errc::io_error)` naming the path and the failed step. The file gets the mode of `access`.
void write_topic_options(const std::string& topic_folder, const stored_topic_options& options, file_access access);

/// Checks the options a queue opens `topic` with against those its folder holds, changing nothing:
/// its topic.options or, in a folder without one (written by a release that did not keep it), what
/// its files tell - the number of partition folders (the highest `partition-{n}` plus one) and the
/// segment size in the first valid segment header; the serializer cannot be told. Call it while
/// holding the folder's lock. Returns the options to store (`given`, the serializer name cut to what
/// the file keeps) when the folder has no topic.options or `given` adds partitions; the caller
/// stores them with `write_topic_options` once the open validated the folder. Throws
/// `error(errc::invalid_argument)` from `option_mismatch`, and as `read_topic_options`.
std::optional<stored_topic_options> check_topic_options(std::string_view topic, const std::string& topic_folder,
                                                        const stored_topic_options& given);

/// Removes `{topic_folder}/topic.options.tmp`, the leftover of an interrupted `write_topic_options`,
/// when there is one. Throws `error(errc::io_error)` naming the path.
void remove_topic_options_leftover(const std::string& topic_folder);

}  // namespace bufferqueue::detail
