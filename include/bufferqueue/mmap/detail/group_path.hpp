// bufferqueue: consumer-group names as folder names under `offsets/`.
//
// A group name is used as the folder name when it is a valid one. Otherwise these bytes are
// percent-encoded as `%` followed by two uppercase hex digits:
//   - `/` and NUL, which cannot appear in a folder name;
//   - `%`, so an escaped name can never be mistaken for another group's name;
//   - a name that is exactly `.` or `..` has every dot encoded (`%2E`, `%2E%2E`);
//   - the dot of a trailing `.tmp` (`jobs.tmp` -> `jobs%2Etmp`), so no group folder ends in `.tmp`
//     and `{escaped}.tmp` can be used as the temporary name of a group folder being created:
//     leftovers named `*.tmp` are always temporary and safe to remove at open.
// Everything else, including spaces, non-ASCII bytes and control characters, is kept as is, so
// `orders/worker 1` becomes `orders%2Fworker 1`. The encoding is injective, and
// `unescape_group_name` accepts only the canonical encoding of some name, so two folders can
// never map to the same group.
#pragma once

#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/error.hpp"

#include <cstddef>
#include <string>
#include <string_view>

namespace bufferqueue::detail {

/// The longest escaped group name: NAME_MAX (255) less the 4 bytes of the ".tmp" suffix that the
/// temporary name of a group folder being created carries.
inline constexpr std::size_t max_escaped_group_name_size = 255 - 4;

namespace group_path_internal {

// The suffix of temporary names (the same as `detail::temporary_suffix` in file.hpp).
inline constexpr std::string_view temporary_suffix = ".tmp";

// True for the bytes that are always percent-encoded.
inline bool must_escape(char character) noexcept
{
    return character == '/' || character == '\0' || character == '%';
}

// Appends `%` and the two uppercase hex digits of `character`.
inline void append_escaped(std::string& out, char character)
{
    constexpr std::string_view hex_digits = "0123456789ABCDEF";
    const auto value = static_cast<unsigned char>(character);
    out.push_back('%');
    out.push_back(hex_digits[value >> 4]);
    out.push_back(hex_digits[value & 0x0FU]);
}

// The value of a hex digit (either case), or -1.
inline int hex_value(char digit) noexcept
{
    if (digit >= '0' && digit <= '9') {
        return digit - '0';
    }
    if (digit >= 'A' && digit <= 'F') {
        return digit - 'A' + 10;
    }
    if (digit >= 'a' && digit <= 'f') {
        return digit - 'a' + 10;
    }
    return -1;
}

}  // namespace group_path_internal

/// The folder name for consumer group `group_name` (see the rules at the top of this file).
/// Throws `error(errc::invalid_argument)` for an empty name, or one whose escaped form is longer
/// than `max_escaped_group_name_size` bytes. Thread-safe; allocates the result.
inline std::string escape_group_name(std::string_view group_name)
{
    namespace internal = group_path_internal;
    if (group_name.empty()) {
        throw error(errc::invalid_argument, "a consumer group name must not be empty");
    }
    std::string escaped;
    if (group_name == "." || group_name == "..") {
        for (const char dot : group_name) {
            internal::append_escaped(escaped, dot);
        }
        return escaped;
    }
    const bool has_temporary_suffix = group_name.ends_with(internal::temporary_suffix);
    const std::size_t temporary_dot = group_name.size() - internal::temporary_suffix.size();
    escaped.reserve(group_name.size());
    for (std::size_t index = 0; index < group_name.size(); ++index) {
        const char character = group_name[index];
        if (internal::must_escape(character) || (has_temporary_suffix && index == temporary_dot)) {
            internal::append_escaped(escaped, character);
        } else {
            escaped.push_back(character);
        }
    }
    if (escaped.size() > max_escaped_group_name_size) {
        throw error(errc::invalid_argument,
                    format_message("the consumer group name \"{}...\" is too long: its folder name takes {} bytes, at "
                                   "most {} are allowed",
                                   std::string_view(escaped).substr(0, 64), escaped.size(),
                                   max_escaped_group_name_size));
    }
    return escaped;
}

/// The group name a folder under `offsets/` stands for: the inverse of `escape_group_name`.
/// Throws `error(errc::corrupt_data)` naming the folder when it is not the canonical escaped form
/// of any group name (an empty name, a truncated or non-hex escape, lowercase hex, an escaped
/// byte that needs no escaping, a raw `/`, `.` or `..`, a trailing `.tmp`). Thread-safe;
/// allocates the result.
inline std::string unescape_group_name(std::string_view folder_name)
{
    namespace internal = group_path_internal;
    const auto reject = [&](const std::string& reason) -> error {
        return error(errc::corrupt_data, format_message("the consumer group folder \"{}\" is not a valid escaped group "
                                                        "name: {}",
                                                        folder_name, reason));
    };
    if (folder_name.empty()) {
        throw reject("the name is empty");
    }
    std::string name;
    name.reserve(folder_name.size());
    for (std::size_t index = 0; index < folder_name.size(); ++index) {
        const char character = folder_name[index];
        if (character == '/' || character == '\0') {
            throw reject("it contains a raw '/' or NUL byte");
        }
        if (character != '%') {
            name.push_back(character);
            continue;
        }
        if (index + 2 >= folder_name.size()) {
            throw reject(format_message("the escape at byte {} is truncated", index));
        }
        const int high = internal::hex_value(folder_name[index + 1]);
        const int low = internal::hex_value(folder_name[index + 2]);
        if (high < 0 || low < 0) {
            throw reject(format_message("the escape at byte {} is not two hex digits", index));
        }
        name.push_back(static_cast<char>(high * 16 + low));
        index += 2;
    }
    // Only the canonical encoding is accepted, so that one group has exactly one folder.
    std::string canonical;
    try {
        canonical = escape_group_name(name);
    } catch (const error&) {
        throw reject(format_message("its group name would need a folder name longer than {} bytes",
                                    max_escaped_group_name_size));
    }
    if (canonical != folder_name) {
        throw reject(format_message("it is not the canonical encoding, which is \"{}\"", canonical));
    }
    return name;
}

}  // namespace bufferqueue::detail
