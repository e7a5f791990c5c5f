// Helpers shared by the test files that drive whole queues and inspect topic folders.
#pragma once

#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/memory/memory_topic.hpp"

#include "catch.hpp"

#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace bufferqueue::test {

/// A queue on its own io_context, which can be closed (destroyed) and opened again on it.
struct queue_runner {
    boost::asio::io_context io;
    std::unique_ptr<buffer_queue> queue = std::make_unique<buffer_queue>(io.get_executor());

    /// Destroys the queue, then makes a new one on the same io_context.
    buffer_queue& reopen()
    {
        queue.reset();
        queue = std::make_unique<buffer_queue>(io.get_executor());
        return *queue;
    }

    buffer_queue* operator->() const { return queue.get(); }
};

/// How long `run_until` runs at most unless told otherwise: a hang guard, so an operation that never
/// completes fails its test instead of hanging it. No passing test waits that long.
inline constexpr std::chrono::milliseconds run_until_limit = std::chrono::seconds(60);

/// The one way a test runs an io_context until something happened: runs `io` until `done()` holds or
/// `limit` passes; true when it held. `done()` is asked after every handler, so nothing more runs once
/// it holds, and never again after it held; while no handler is ready it is asked every 2 ms (for what
/// other threads bring about without posting to `io`). Unlike `io.run()` it also ends while `io` still
/// has work (a produce waiting for its acknowledgement, a parked consume), and it goes on when `io` has
/// none, sleeping 1 ms at a time (another thread may bring work: a process-shared topic's membership
/// watcher, a Kafka client's threads). It leaves `io` restarted, ready to run again. A test that needs
/// the condition writes `REQUIRE(run_until(...))`.
template <class Done>
bool run_until(boost::asio::io_context& io, Done&& done, std::chrono::milliseconds limit = run_until_limit)
{
    const auto deadline = std::chrono::steady_clock::now() + limit;
    io.restart();
    bool held = done();
    while (!held && std::chrono::steady_clock::now() < deadline) {
        if (io.run_one_for(std::chrono::milliseconds(2)) == 0 && io.stopped()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        io.restart();  // run_one_for stops `io` when its last work is done, even after running a handler
        held = done();
    }
    return held;
}

/// A memory topic of ints: `name`, `partitions` and `segment_size`, every other option at its default.
inline memory_topic_options<int> int_topic(std::string name, std::size_t partitions, std::size_t segment_size = 1024)
{
    memory_topic_options<int> options;
    options.name = std::move(name);
    options.partitions = partitions;
    options.segment_size = segment_size;
    return options;
}

/// The items of a batch, copied.
template <class T>
std::vector<T> items_of(const batch<T>& delivered)
{
    return std::vector<T>(delivered.begin(), delivered.end());
}

/// The items of a batch that must have been delivered (REQUIREs it), copied.
template <class T>
std::vector<T> items_of(const std::optional<batch<T>>& delivered)
{
    REQUIRE(delivered);
    return {delivered->begin(), delivered->end()};
}

/// Commits the consumer's latest batch, runs `io` until the commit completes, and returns its code.
template <class T>
boost::system::error_code commit_now(pull_consumer<T>& consumer, boost::asio::io_context& io)
{
    boost::system::error_code result = errc::invalid_argument;
    bool completed = false;
    consumer.commit([&](boost::system::error_code error) {
        result = error;
        completed = true;
    });
    io.run();
    io.restart();
    REQUIRE(completed);
    return result;
}

/// Produces `item` with a callback, runs `io` until it completes, and returns its code.
template <class T>
boost::system::error_code produce_now(producer<T>& producer, const T& item, boost::asio::io_context& io)
{
    boost::system::error_code result = errc::invalid_argument;
    bool completed = false;
    producer.produce(item, [&](boost::system::error_code error) {
        result = error;
        completed = true;
    });
    io.run();
    io.restart();
    REQUIRE(completed);
    return result;
}

/// The bytes of the file at `path` (REQUIREs that it opens).
inline std::vector<unsigned char> file_bytes(const std::filesystem::path& path)
{
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Replaces the file at `path` with `bytes` (REQUIREs that it opens and the write succeeds).
inline void write_file(const std::filesystem::path& path, const std::vector<unsigned char>& bytes)
{
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    REQUIRE(out);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(out);
}

/// The path of segment file `index` in a partition folder.
inline std::filesystem::path segment_path(const std::filesystem::path& partition, std::uint64_t index)
{
    std::string name = std::to_string(index);
    name.insert(0, 20 - name.size(), '0');
    return partition / (name + ".log");
}

/// The indices of the segment files in a partition folder, ascending.
inline std::vector<std::uint64_t> segment_indices(const std::filesystem::path& partition)
{
    std::vector<std::uint64_t> indices;
    for (const auto& entry : std::filesystem::directory_iterator(partition)) {
        const std::string name = entry.path().filename().string();
        if (name.size() == 24 && name.ends_with(".log")) {
            indices.push_back(std::stoull(name.substr(0, 20)));
        }
    }
    std::sort(indices.begin(), indices.end());
    return indices;
}

/// Every file (with its bytes) and folder under `root`, by relative path (a folder's bytes: "/").
inline std::map<std::string, std::vector<unsigned char>> snapshot(const std::filesystem::path& root)
{
    std::map<std::string, std::vector<unsigned char>> entries;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
        const std::string name = std::filesystem::relative(entry.path(), root).string();
        entries[name] = entry.is_regular_file() ? file_bytes(entry.path()) : std::vector<unsigned char>{'/'};
    }
    return entries;
}

/// The relative paths that differ between two snapshots, each with "(removed)", "(changed)" or
/// "(created)".
inline std::vector<std::string> differences(const std::map<std::string, std::vector<unsigned char>>& before,
                                            const std::map<std::string, std::vector<unsigned char>>& after)
{
    std::vector<std::string> changed;
    for (const auto& [name, bytes] : before) {
        const auto found = after.find(name);
        if (found == after.end()) {
            changed.push_back(name + " (removed)");
        } else if (found->second != bytes) {
            changed.push_back(name + " (changed)");
        }
    }
    for (const auto& [name, bytes] : after) {
        if (!before.contains(name)) {
            changed.push_back(name + " (created)");
        }
    }
    return changed;
}

}  // namespace bufferqueue::test
