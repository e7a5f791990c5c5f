// bufferqueue: deterministic partition-key routing, identical in every process and on every run.
#pragma once

#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/error.hpp"

#include <concepts>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace bufferqueue {

/// Key types a `key_selector` may return: integers (not `bool`), floating-point values that hold
/// finite integers, and UTF-8 strings (`std::string`, `std::string_view`, `const char*`).
template <class Key>
concept partition_key_type = (std::integral<Key> && !std::same_as<Key, bool>) || std::floating_point<Key> ||
                             std::convertible_to<const Key&, std::string_view>;

/// Routes an integer key: the normalized mathematical modulo of (key - 1) by `partitions`, so
/// zero and negative keys work (16 partitions: 17 -> 0, 16 -> 15, 0 -> 15, -1 -> 14).
/// Requires `partitions >= 1`. Thread-safe, never allocates.
template <std::integral Key>
    requires(!std::same_as<Key, bool>)
constexpr std::uint32_t partition_for_key(Key key, std::uint32_t partitions) noexcept
{
    if constexpr (std::is_unsigned_v<Key>) {
        const auto count = static_cast<std::uint64_t>(partitions);
        const auto value = static_cast<std::uint64_t>(key);
        return static_cast<std::uint32_t>(value == 0 ? count - 1 : (value - 1) % count);
    } else {
        const auto count = static_cast<std::int64_t>(partitions);
        std::int64_t remainder = static_cast<std::int64_t>(key) % count - 1;
        if (remainder < 0) {
            remainder += count;
        }
        return static_cast<std::uint32_t>(remainder);
    }
}

namespace detail {

/// `partition_for_key` of a floating-point key, compiled once (src/partition_key.cpp, so this
/// header needs no <cmath>). `long double` holds every `float` and `double` exactly, so routing and
/// the error message (which formats the key as a `double`) are those of the key's own type.
std::uint32_t partition_for_floating_key(long double key, std::uint32_t partitions);

}  // namespace detail

/// Routes a floating-point key holding a finite integer exactly like that integer.
/// Throws `bufferqueue::error` (`errc::invalid_argument`) for NaN, infinities and fractions.
/// Thread-safe; allocates only to build the error message.
template <std::floating_point Key>
std::uint32_t partition_for_key(Key key, std::uint32_t partitions)
{
    return detail::partition_for_floating_key(key, partitions);
}

/// Routes a UTF-8 string key by its first four UTF-16 code units, folded as v = v * 31 + unit,
/// then v mod `partitions` ("" -> 0). Keys sharing a four-unit prefix share a partition.
/// Malformed UTF-8 bytes count as U+FFFD, one unit each. Thread-safe, never allocates.
constexpr std::uint32_t partition_for_key(std::string_view key, std::uint32_t partitions) noexcept
{
    constexpr int units_used = 4;
    std::uint64_t folded = 0;
    int units = 0;
    const auto fold = [&](std::uint32_t unit) {
        if (units < units_used) {
            folded = folded * 31 + unit;
            ++units;
        }
    };
    const auto byte_at = [&](std::size_t index) {
        return static_cast<std::uint32_t>(static_cast<unsigned char>(key[index]));
    };
    const auto is_continuation = [&](std::size_t index) {
        return index < key.size() && (byte_at(index) & 0xC0U) == 0x80U;
    };

    std::size_t position = 0;
    while (position < key.size() && units < units_used) {
        const std::uint32_t lead = byte_at(position);
        std::size_t length = 0;
        std::uint32_t code_point = 0;
        std::uint32_t minimum = 0;
        if (lead < 0x80U) {
            length = 1;
            code_point = lead;
        } else if ((lead & 0xE0U) == 0xC0U) {
            length = 2;
            code_point = lead & 0x1FU;
            minimum = 0x80U;
        } else if ((lead & 0xF0U) == 0xE0U) {
            length = 3;
            code_point = lead & 0x0FU;
            minimum = 0x800U;
        } else if ((lead & 0xF8U) == 0xF0U) {
            length = 4;
            code_point = lead & 0x07U;
            minimum = 0x10000U;
        }
        bool valid = length != 0;
        for (std::size_t extra = 1; valid && extra < length; ++extra) {
            if (!is_continuation(position + extra)) {
                valid = false;
            } else {
                code_point = (code_point << 6) | (byte_at(position + extra) & 0x3FU);
            }
        }
        if (valid &&
            (code_point < minimum || code_point > 0x10FFFFU || (code_point >= 0xD800U && code_point <= 0xDFFFU))) {
            valid = false;
        }
        if (!valid) {
            fold(0xFFFDU);
            ++position;
            continue;
        }
        position += length;
        if (code_point >= 0x10000U) {
            const std::uint32_t offset = code_point - 0x10000U;
            fold(0xD800U + (offset >> 10));
            fold(0xDC00U + (offset & 0x3FFU));
        } else {
            fold(code_point);
        }
    }
    return static_cast<std::uint32_t>(folded % partitions);
}

/// Routes any `partition_key_type` value. Thread-safe.
template <partition_key_type Key>
std::uint32_t route_key(const Key& key, std::uint32_t partitions)
{
    if constexpr (std::convertible_to<const Key&, std::string_view>) {
        return partition_for_key(std::string_view(key), partitions);
    } else {
        return partition_for_key(key, partitions);
    }
}

/// The optional partition-key selector of a topic: a deterministic callable mapping an item to
/// its key. Items with equal keys go to one partition and keep their order there. Empty means
/// round-robin routing. The selector may be called concurrently from many threads, so it must be
/// thread-safe; it is copied when the topic is registered (allocates then, never per item).
template <class T>
class key_selector {
public:
    /// No selector: round-robin routing.
    key_selector() = default;

    /// Wraps `select`, which must return a `partition_key_type` for `const T&`.
    template <class Selector>
        requires(!std::same_as<std::remove_cvref_t<Selector>, key_selector> &&
                 std::invocable<const std::remove_cvref_t<Selector>&, const T&>)
    key_selector(Selector&& select)  // NOLINT(google-explicit-constructor): designated initializers need it
    {
        using key_type = std::remove_cvref_t<std::invoke_result_t<const std::remove_cvref_t<Selector>&, const T&>>;
        static_assert(partition_key_type<key_type>,
                      "bufferqueue::key_selector: the selector must return an integer, a floating-point value "
                      "holding an integer, or a string (std::string, std::string_view, const char*)");
        route_ = [select = std::forward<Selector>(select)](const T& item, std::uint32_t partitions) {
            if constexpr (std::is_pointer_v<key_type>) {
                const key_type key = std::invoke(select, item);
                if (key == nullptr) {
                    throw error(errc::invalid_argument,
                                "the partition key selector returned a null string (const char*) for an item");
                }
                return route_key(key, partitions);
            } else {
                return route_key(std::invoke(select, item), partitions);
            }
        };
    }

    /// True when a selector is set.
    explicit operator bool() const noexcept { return static_cast<bool>(route_); }

    /// The partition of `item` among `partitions`. Propagates what the selector throws, and
    /// `bufferqueue::error` (`errc::invalid_argument`) for a non-integral floating key or a null
    /// `const char*` key. Producers compute keys synchronously, before anything is stored, so both
    /// `try_produce` and `produce` throw these from the call itself (an asynchronous `produce` then
    /// never starts and never completes).
    std::uint32_t partition_for(const T& item, std::uint32_t partitions) const { return route_(item, partitions); }

private:
    std::function<std::uint32_t(const T&, std::uint32_t)> route_;
};

}  // namespace bufferqueue
