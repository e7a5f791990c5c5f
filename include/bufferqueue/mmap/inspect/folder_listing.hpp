// bufferqueue: finding the topics and partitions in the data folder of persistent topics
// (bufferqueue-inspect, docs/inspect.md). Only lists folders; reads no file.
//
// A topic is a folder of the data folder (or a symbolic link to one, which a queue follows too)
// holding at least one partition folder, `partition-{id:05}` as `detail::partition_folder` names it
// (or a link to such a folder). What is not read as data although it could hold some is named as an
// unexpected entry rather than skipped in silence or misread: a link in the data folder that leads to
// no folder, and every entry of a topic folder other than its partition folders and the bookkeeping a
// queue keeps beside them (its `.lock` file, `topic.options` and the `topic.options.tmp` an
// interrupted write of it leaves; for a process-shared topic also `.open.lock`, `shared.header` and
// the `groups` folder of lease files): a folder with a non-canonical name such as
// `partition-000001`, a stray file, a dangling link.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace bufferqueue::inspect {

/// The topics of `data_directory`: its subfolders (or links to folders) holding at least one
/// partition folder, sorted by name. Throws `error(errc::invalid_argument)` naming the folder when it
/// does not exist, is not a folder, or holds no topic ("not a bufferqueue data folder"); `io_error`
/// when it cannot be listed. Thread-safe.
std::vector<std::string> list_topics(const std::string& data_directory);

/// The partition numbers of `topic` in `data_directory`, sorted: those of its folders (or links to
/// folders) named exactly `partition-{id:05}`. Throws `error(errc::invalid_argument)` naming the topic
/// and the topics that exist when it is not one of them. Thread-safe.
std::vector<std::size_t> list_partitions(const std::string& data_directory, const std::string& topic);

/// An entry of a data folder that is not read as data.
struct unexpected_entry {
    std::string path;  ///< the entry (`{data_directory}/{name}` or `{data_directory}/{topic}/{name}`)
    std::string text;  ///< what it is and that it was not checked
};

/// What `list_topics` and `list_partitions` leave out although it could hold data (see the top of
/// this file), sorted by path. Throws as `list_topics`. Thread-safe.
std::vector<unexpected_entry> list_unexpected_entries(const std::string& data_directory);

/// The folder of `topic` in `data_directory`. Never throws except `std::bad_alloc`.
std::string topic_folder(const std::string& data_directory, const std::string& topic);

/// The folder of partition `partition` of `topic` (`{topic}/partition-{id:05}`). Never throws except
/// `std::bad_alloc`.
std::string partition_folder(const std::string& data_directory, const std::string& topic, std::size_t partition);

}  // namespace bufferqueue::inspect
