// Internal: the formatting of the library's error and log messages in headers. {fmt} does the work in
// src/detail/message.cpp (header-only mode, a private dependency of bufferqueue::core), so this header
// names no fmt type and users' programs never include, find or link fmt.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace bufferqueue::detail {

/// One argument of `format_message`: text, a signed or unsigned integer, or a floating-point number
/// (formatted as by `fmt::format("{}", value)`). Text is viewed, not copied: an argument lives only as
/// long as the call it is passed to. Never allocates.
class message_argument {
public:
    enum class kind { text, signed_integer, unsigned_integer, floating };

    template <class Value>
        requires std::convertible_to<const Value&, std::string_view> ||
            (std::integral<Value> && !std::same_as<Value, bool> && !std::same_as<Value, char>) ||
            std::floating_point<Value> message_argument(
                const Value& value) noexcept  // NOLINT(google-explicit-constructor)
        {
            if constexpr (std::convertible_to<const Value&, std::string_view>) {
                kind_ = kind::text;
                text_ = value;
            } else if constexpr (std::floating_point<Value>) {
                kind_ = kind::floating;
                floating_ = static_cast<double>(value);
            } else if constexpr (std::is_signed_v<Value>) {
                kind_ = kind::signed_integer;
                signed_ = value;
            } else {
                kind_ = kind::unsigned_integer;
                unsigned_ = value;
            }
        }

        kind type() const noexcept
        {
            return kind_;
        }
        std::string_view text() const noexcept
        {
            return text_;
        }
        long long signed_integer() const noexcept
        {
            return signed_;
        }
        unsigned long long unsigned_integer() const noexcept
        {
            return unsigned_;
        }
        double floating() const noexcept
        {
            return floating_;
        }

    private:
        kind kind_ = kind::text;
        std::string_view text_;
        long long signed_ = 0;
        unsigned long long unsigned_ = 0;
        double floating_ = 0;
};

[[noreturn]] void message_format_fields_do_not_match_arguments();  // never defined: a compile-time error

/// A format string of `format_message` with `count` replacement fields ("{}", or "{:spec}" in fmt's
/// syntax; "{{" and "}}" are literal braces), checked where it is written: a format string with
/// unbalanced braces or another number of fields does not compile.
template <std::size_t count>
class message_format {
public:
    template <class Text>
        requires std::convertible_to<const Text&, std::string_view>
    consteval message_format(const Text& text)  // NOLINT(google-explicit-constructor)
        : text_(text)
    {
        if (fields(text_) != count) {
            message_format_fields_do_not_match_arguments();
        }
    }

    constexpr std::string_view text() const noexcept { return text_; }

private:
    static consteval std::size_t fields(std::string_view text)
    {
        std::size_t found = 0;
        for (std::size_t at = 0; at < text.size(); ++at) {
            if (text[at] == '{' && at + 1 < text.size() && text[at + 1] == '{') {
                ++at;
            } else if (text[at] == '{') {
                const std::size_t close = text.find('}', at);
                if (close == std::string_view::npos) {
                    message_format_fields_do_not_match_arguments();
                }
                ++found;
                at = close;
            } else if (text[at] == '}') {
                if (at + 1 == text.size() || text[at + 1] != '}') {
                    message_format_fields_do_not_match_arguments();
                }
                ++at;
            }
        }
        return found;
    }

    std::string_view text_;
};

/// Formats `arguments` into `format` (fmt's syntax) with {fmt}. Thread-safe; allocates the result.
/// Never throws anything but `std::bad_alloc`: a format that fmt rejects anyway (a bad "{:spec}",
/// which the compile-time check of `message_format` does not look into) gives the format text followed
/// by the arguments, " [argument, ...]", so that building an error message cannot replace the error.
std::string vformat_message(std::string_view format, std::span<const message_argument> arguments);

/// `vformat_message` with the number of replacement fields checked at compile time, e.g.
/// `format_message("topic '{}' partition {}", topic, partition)`.
template <class... Arguments>
std::string format_message(std::type_identity_t<message_format<sizeof...(Arguments)>> format,
                           const Arguments&... arguments)
{
    const std::array<message_argument, sizeof...(Arguments)> list{message_argument(arguments)...};
    return vformat_message(format.text(), list);
}

}  // namespace bufferqueue::detail
