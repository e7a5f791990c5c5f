// Helpers shared by the test files that drive whole queues and inspect topic folders.
#pragma once

#include "bufferqueue/buffer_queue.hpp"

#include "catch.hpp"

#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace bufferqueue::test {

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

}  // namespace bufferqueue::test
