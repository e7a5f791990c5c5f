// bufferqueue: the item type of dead-letter topics - what a push consumer gave up on, with where it
// came from and why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace bufferqueue {

/// One record a consumer gave up on. A push subscription with `dead_letter_topic` produces one per
/// item of a batch whose handler failed `max_attempts` times, before it commits that batch (see
/// docs/push-consumers.md). Designed for both ways a record fails:
/// - the handler threw on it: `item` holds it and `payload` is empty;
/// - it did not decode: `item` is empty and `payload` holds its stored bytes (so a fixed serializer
///   can still read it).
/// A plain value: copyable, movable, no invariants. `to_json` / `from_json` below let the default
/// JSON serializer of mmap topics store it when `T` is JSON-convertible (they are templates on the
/// JSON type, so this header needs no JSON library: the core component needs only Boost).
template <class T>
struct dead_letter {
    /// The item the handler failed on; empty for a record that did not decode.
    std::optional<T> item{};
    /// The record's stored bytes when it did not decode; empty otherwise.
    std::vector<std::byte> payload{};
    /// The topic the record was read from.
    std::string topic{};
    /// The partition of `topic` the record was read from.
    std::size_t partition = 0;
    /// The record's offset in that partition where the backend reports per-record offsets (mmap: its
    /// byte position; Kafka: its offset); empty on memory topics.
    std::optional<std::uint64_t> offset{};
    /// Deliveries that failed before the consumer gave up.
    std::size_t attempts = 0;
    /// The last failure's message.
    std::string error{};

    /// Field by field (needs `T` equality-comparable).
    friend bool operator==(const dead_letter&, const dead_letter&) = default;
};

/// JSON form (nlohmann::json, found by argument-dependent lookup): {"item": T or null, "payload":
/// [bytes], "topic", "partition", "offset": n or null, "attempts", "error"}. Throws what the JSON
/// type throws for a `T` it cannot convert.
template <class Json, class T>
void to_json(Json& json, const dead_letter<T>& letter)
{
    json = Json::object();
    json["item"] = letter.item ? Json(*letter.item) : Json(nullptr);
    Json bytes = Json::array();
    for (const std::byte each : letter.payload) {
        bytes.push_back(static_cast<unsigned>(each));
    }
    json["payload"] = std::move(bytes);
    json["topic"] = letter.topic;
    json["partition"] = letter.partition;
    json["offset"] = letter.offset ? Json(*letter.offset) : Json(nullptr);
    json["attempts"] = letter.attempts;
    json["error"] = letter.error;
}

/// Reads the JSON form above. Throws the JSON type's exception on a missing or mistyped field (the
/// JSON serializer reports it as `errc::corrupt_data`).
template <class Json, class T>
void from_json(const Json& json, dead_letter<T>& letter)
{
    const Json& item = json.at("item");
    letter.item = item.is_null() ? std::nullopt : std::optional<T>(item.template get<T>());
    letter.payload.clear();
    for (const Json& each : json.at("payload")) {
        letter.payload.push_back(static_cast<std::byte>(each.template get<std::uint8_t>()));
    }
    letter.topic = json.at("topic").template get<std::string>();
    letter.partition = json.at("partition").template get<std::size_t>();
    const Json& offset = json.at("offset");
    letter.offset =
        offset.is_null() ? std::nullopt : std::optional<std::uint64_t>(offset.template get<std::uint64_t>());
    letter.attempts = json.at("attempts").template get<std::size_t>();
    letter.error = json.at("error").template get<std::string>();
}

}  // namespace bufferqueue
