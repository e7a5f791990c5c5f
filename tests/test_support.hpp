// Helpers shared by the test files.
#pragma once

#include "bufferqueue/error.hpp"

#include <stdlib.h>

#include <cstddef>
#include <exception>
#include <filesystem>
#include <initializer_list>
#include <numeric>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace bufferqueue::test {

/// /dev/shm when it is a directory (a tmpfs: flushes cost nothing, for tests that open thousands of
/// disk images), else the system's temporary directory.
inline std::filesystem::path memory_backed_temporary_path()
{
    std::error_code ignored;
    return std::filesystem::is_directory("/dev/shm", ignored) ? std::filesystem::path("/dev/shm")
                                                              : std::filesystem::temp_directory_path();
}

/// A fresh directory under `parent` (default: the system's temporary directory), removed with
/// everything in it.
class temporary_directory {
public:
    explicit temporary_directory(std::string_view prefix = "bufferqueue-test",
                                 const std::filesystem::path& parent = std::filesystem::temp_directory_path())
    {
        std::string pattern = (parent / (std::string(prefix) + "-XXXXXX")).string();
        if (::mkdtemp(pattern.data()) == nullptr) {
            throw std::runtime_error("mkdtemp failed for " + pattern);
        }
        path_ = pattern;
        string_ = pattern;
    }

    ~temporary_directory()
    {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }

    temporary_directory(const temporary_directory&) = delete;
    temporary_directory& operator=(const temporary_directory&) = delete;

    const std::filesystem::path& path() const noexcept { return path_; }
    const std::string& string() const noexcept { return string_; }
    std::string file(const std::string& name) const { return string_ + "/" + name; }

private:
    std::filesystem::path path_;
    std::string string_;
};

/// Completion handler for co_spawn: an exception escaping a coroutine propagates out of `run()`.
inline void rethrow(std::exception_ptr failure)
{
    if (failure) {
        std::rethrow_exception(failure);
    }
}

/// The integers [first, last) in order.
inline std::vector<int> range(int first, int last)
{
    std::vector<int> values(static_cast<std::size_t>(last - first));
    std::iota(values.begin(), values.end(), first);
    return values;
}

/// The `bufferqueue::error` that `function` throws, or nothing.
template <typename Function>
std::optional<bufferqueue::error> error_from(Function&& function)
{
    try {
        function();
    } catch (const bufferqueue::error& failure) {
        return failure;
    }
    return std::nullopt;
}

/// Empty when `text` contains every one of `parts`; otherwise names the missing parts and quotes
/// `text`, so a failed CHECK(missing_from(...) == "") shows what the message lacked.
inline std::string missing_from(std::string_view text, std::initializer_list<std::string_view> parts)
{
    std::string missing;
    for (const std::string_view part : parts) {
        if (text.find(part) == std::string_view::npos) {
            missing += "\"" + std::string(part) + "\" ";
        }
    }
    return missing.empty() ? missing : missing + "missing from: " + std::string(text);
}

/// Stores a string's bytes as the payload, so record sizes are known exactly ("" is an empty payload).
struct string_bytes_serializer {
    void serialize(const std::string& item, std::vector<std::byte>& out) const
    {
        const auto* first = reinterpret_cast<const std::byte*>(item.data());
        out.insert(out.end(), first, first + item.size());
    }

    std::string deserialize(std::span<const std::byte> bytes) const
    {
        if (bytes.empty()) {
            return {};
        }
        return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    }
};

/// Like `string_bytes_serializer`, but the payload "poison" does not decode (it throws
/// std::runtime_error "cannot deserialize poison"): a record that blocks its partition.
struct poisoned_string_serializer {
    void serialize(const std::string& item, std::vector<std::byte>& out) const
    {
        string_bytes_serializer{}.serialize(item, out);
    }

    std::string deserialize(std::span<const std::byte> bytes) const
    {
        std::string item = string_bytes_serializer{}.deserialize(bytes);
        if (item == "poison") {
            throw std::runtime_error("cannot deserialize poison");
        }
        return item;
    }
};

}  // namespace bufferqueue::test
