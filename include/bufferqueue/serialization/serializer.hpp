// bufferqueue: serializers that turn items into the payload bytes of persistent (mmap) topics.
//
// The serializer and its wire schema are part of a topic's persisted format: records already on
// disk are read back with the serializer configured when the topic is reopened, so keep it (and
// the item type's layout or keys) compatible across restarts and upgrades.
#pragma once

#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/error.hpp"

#include <msgpack.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace bufferqueue {

/// The contract of a serializer `S` for items of type `T`, called on a `const S&`:
///   - `s.serialize(item, out)` appends the encoding of `item` to `out` (a buffer the caller
///     reuses between calls, so it must append, never assume `out` is empty);
///   - `s.deserialize(bytes)` returns the item encoded in exactly `bytes`, and throws
///     `bufferqueue::error` with `errc::corrupt_data` when they are not a valid encoding.
/// One serializer instance serves every partition of a topic and is called concurrently from
/// several threads, so both operations must be thread-safe.
template <typename S, typename T>
concept serializer_for = requires(const S& serializer, const T& item, std::vector<std::byte>& out,
                                  std::span<const std::byte> bytes)
{
    serializer.serialize(item, out);
    {
        serializer.deserialize(bytes)
        } -> std::same_as<T>;
};

namespace detail {

/// True when nlohmann::json can convert `T` both ways (built-in support, `to_json`/`from_json`
/// found by ADL, or NLOHMANN_DEFINE_TYPE_* / adl_serializer specializations).
template <typename T>
concept json_convertible = requires(const T& item, const nlohmann::json& json)
{
    nlohmann::json(item);
    {
        json.template get<T>()
        } -> std::same_as<T>;
};

/// Appends `size` bytes at `data` to `out`.
inline void append_bytes(std::vector<std::byte>& out, const char* data, std::size_t size)
{
    const auto* first = reinterpret_cast<const std::byte*>(data);
    out.insert(out.end(), first, first + size);
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------------------------

/// Encodes items as compact UTF-8 JSON text with nlohmann_json; the default serializer of mmap
/// topics. `T` needs `to_json`/`from_json` found by ADL (for example through
/// NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE) or built-in nlohmann support; otherwise using this
/// serializer fails to compile with a message naming the alternatives.
/// Stateless: one instance may be used from many threads at once. Both operations allocate.
template <typename T>
class json_serializer {
public:
    /// Appends the JSON text of `item` to `out`. Throws `error(errc::invalid_argument)` when
    /// nlohmann_json cannot encode it (for example a string that is not valid UTF-8); `out` may
    /// then hold a partial encoding past its previous end.
    void serialize(const T& item, std::vector<std::byte>& out) const
    {
        require_json_support();
        if constexpr (detail::json_convertible<T>) {
            try {
                const std::string text = nlohmann::json(item).dump();
                detail::append_bytes(out, text.data(), text.size());
            } catch (const nlohmann::json::exception& failure) {
                throw error(errc::invalid_argument,
                            detail::format_message("json_serializer cannot encode the item: {}", failure.what()));
            }
        }
    }

    /// Parses `bytes` as JSON and converts it to `T`. Throws `error(errc::corrupt_data)` when the
    /// bytes are not valid JSON or do not have the shape `T` expects. Exceptions thrown by your
    /// own `from_json` (other than nlohmann's) pass through unchanged.
    T deserialize(std::span<const std::byte> bytes) const
    {
        require_json_support();
        if constexpr (detail::json_convertible<T>) {
            try {
                const auto* first = reinterpret_cast<const char*>(bytes.data());
                return nlohmann::json::parse(first, first + bytes.size()).template get<T>();
            } catch (const nlohmann::json::exception& failure) {
                throw error(errc::corrupt_data, detail::format_message("json_serializer cannot decode a {}-byte "
                                                                       "payload: {}",
                                                                       bytes.size(), failure.what()));
            }
        } else {
            // Never compiled into a program: require_json_support() has already failed the build.
            throw error(errc::invalid_argument, "json_serializer: the item type has no JSON conversion");
        }
    }

private:
    // Fails the build, with a message naming the alternatives, when this serializer is used for a
    // type nlohmann::json cannot convert. Checked here rather than in the class body so that
    // merely naming json_serializer<T> (as a default option) does not fail.
    static constexpr void require_json_support() noexcept
    {
        static_assert(detail::json_convertible<T>,
                      "bufferqueue::json_serializer<T> needs nlohmann::json to_json/from_json for T; define them "
                      "(e.g. NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE) or choose bufferqueue::msgpack_serializer<T> or "
                      "bufferqueue::raw_serializer<T> in mmap_topic_options::serializer");
    }
};

static_assert(serializer_for<json_serializer<std::string>, std::string>);

// ---------------------------------------------------------------------------------------------
// MessagePack
// ---------------------------------------------------------------------------------------------

/// Limits that `msgpack_serializer` applies while decoding, so that a damaged or hostile payload
/// cannot make it allocate without bound (the counterpart of MessagePack-CSharp's security
/// options for untrusted data). A payload that exceeds one fails with `errc::corrupt_data`.
/// Whatever the configured values, each count is also capped by the payload's size, since a valid
/// encoding cannot declare more elements than it has bytes.
struct msgpack_unpack_limits {
    std::size_t max_array_elements = 0xFFFF'FFFF;   ///< elements of one array
    std::size_t max_map_entries = 0xFFFF'FFFF;      ///< key/value pairs of one map
    std::size_t max_string_bytes = 0xFFFF'FFFF;     ///< bytes of one string
    std::size_t max_binary_bytes = 0xFFFF'FFFF;     ///< bytes of one bin object
    std::size_t max_extension_bytes = 0xFFFF'FFFF;  ///< bytes of one ext object
    std::size_t max_depth = 0xFFFF'FFFF;            ///< nesting depth of arrays and maps

    /// Conservative limits for payloads that may come from an untrusted source: 64 Ki elements or
    /// entries per container, 16 MiB per string, bin or ext object, 64 levels of nesting.
    static constexpr msgpack_unpack_limits untrusted_data() noexcept
    {
        return {64 * 1024, 64 * 1024, 16 * 1024 * 1024, 16 * 1024 * 1024, 16 * 1024 * 1024, 64};
    }
};

/// Encodes items as MessagePack with msgpack-cxx. `T` must be packable and convertible by
/// msgpack-cxx: built-in types, or classes declaring MSGPACK_DEFINE(...) (fields are encoded as
/// an array in declaration order, so keep the order stable) or adaptor specializations.
/// Immutable after construction: one instance may be used from many threads at once. Both
/// operations allocate.
template <typename T>
class msgpack_serializer {
public:
    /// A serializer with msgpack-cxx's default limits (capped by the payload size, see
    /// `msgpack_unpack_limits`).
    msgpack_serializer() = default;

    /// A serializer that enforces `limits` while decoding.
    explicit msgpack_serializer(const msgpack_unpack_limits& limits) noexcept : limits_(limits) {}

    /// The decoding limits.
    const msgpack_unpack_limits& limits() const noexcept { return limits_; }

    /// Appends the MessagePack encoding of `item` to `out`. Exceptions from user-defined pack
    /// adaptors pass through.
    void serialize(const T& item, std::vector<std::byte>& out) const
    {
        byte_vector_stream stream{out};
        msgpack::pack(stream, item);
    }

    /// Decodes exactly one MessagePack object from `bytes` and converts it to `T`. Throws
    /// `error(errc::corrupt_data)` when the bytes are malformed or truncated, hold more than one
    /// object, exceed the limits, or do not have the shape `T` expects.
    T deserialize(std::span<const std::byte> bytes) const
    {
        const std::size_t size = bytes.size();
        const auto cap = [size](std::size_t limit) { return limit < size ? limit : size; };
        const msgpack::unpack_limit limit(cap(limits_.max_array_elements), cap(limits_.max_map_entries),
                                          cap(limits_.max_string_bytes), cap(limits_.max_binary_bytes),
                                          cap(limits_.max_extension_bytes), cap(limits_.max_depth));
        try {
            std::size_t consumed = 0;
            const msgpack::object_handle handle =
                msgpack::unpack(reinterpret_cast<const char*>(bytes.data()), size, consumed, nullptr, nullptr, limit);
            if (consumed != size) {
                throw error(errc::corrupt_data, detail::format_message("msgpack_serializer cannot decode a {}-byte "
                                                                       "payload: the encoded object ends at byte {} "
                                                                       "of {}",
                                                                       size, consumed, size));
            }
            return handle.get().as<T>();
        } catch (const msgpack::unpack_error& failure) {
            throw error(
                errc::corrupt_data,
                detail::format_message("msgpack_serializer cannot decode a {}-byte payload: {}", size, failure.what()));
        } catch (const msgpack::type_error& failure) {
            throw error(errc::corrupt_data, detail::format_message("msgpack_serializer cannot decode a {}-byte "
                                                                   "payload: it does not have the shape of the item "
                                                                   "type ({})",
                                                                   size, failure.what()));
        }
    }

private:
    // The stream msgpack::pack writes to: appends to a byte vector.
    struct byte_vector_stream {
        std::vector<std::byte>& out;

        void write(const char* data, std::size_t size) { detail::append_bytes(out, data, size); }
    };

    msgpack_unpack_limits limits_{};
};

static_assert(serializer_for<msgpack_serializer<std::string>, std::string>);

// ---------------------------------------------------------------------------------------------
// Raw bytes
// ---------------------------------------------------------------------------------------------

/// Stores the object representation of a trivially copyable `T` as is (sizeof(T) bytes), with no
/// encoding. The payload is native layout, not portable: byte order, padding, field order and
/// alignment, sizes of `long`/pointers, and the compiler's ABI are all part of the format, so
/// records written on one architecture or build can be unreadable or wrong on another. Keep the
/// struct's layout fixed while records exist, avoid pointers and process-specific values, and
/// value-initialize items so that padding bytes hold no stale memory.
/// Stateless: one instance may be used from many threads at once. `serialize` may grow `out`;
/// `deserialize` never allocates except for the exception.
template <typename T>
class raw_serializer {
    static_assert(std::is_trivially_copyable_v<T>,
                  "bufferqueue::raw_serializer<T> needs a trivially copyable T; choose "
                  "bufferqueue::json_serializer<T> or bufferqueue::msgpack_serializer<T> for other types");

public:
    /// Appends the sizeof(T) bytes of `item` to `out`.
    void serialize(const T& item, std::vector<std::byte>& out) const
    {
        const auto bytes = std::bit_cast<std::array<std::byte, sizeof(T)>>(item);
        out.insert(out.end(), bytes.begin(), bytes.end());
    }

    /// The `T` whose bytes are `bytes`. Throws `error(errc::corrupt_data)` unless `bytes` is
    /// exactly sizeof(T) bytes long.
    T deserialize(std::span<const std::byte> bytes) const
    {
        std::array<std::byte, sizeof(T)> copy{};
        if (bytes.size() != copy.size()) {
            throw error(errc::corrupt_data, detail::format_message("raw_serializer expected a {}-byte payload, got "
                                                                   "{} bytes",
                                                                   copy.size(), bytes.size()));
        }
        std::copy(bytes.begin(), bytes.end(), copy.begin());
        return std::bit_cast<T>(copy);
    }
};

static_assert(serializer_for<raw_serializer<std::uint64_t>, std::uint64_t>);

}  // namespace bufferqueue
