// libFuzzer target: msgpack_serializer<T>::deserialize (with the untrusted-data limits and with the
// defaults) on arbitrary bytes decodes or throws corrupt_data, and what it decodes round-trips.
#include "bufferqueue/serialization/serializer.hpp"

#include "fuzz_support.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace {

struct order {
    std::int64_t id = 0;
    std::string name;
    std::vector<std::int32_t> quantities;
    std::map<std::string, std::string> attributes;
    MSGPACK_DEFINE(id, name, quantities, attributes)
    bool operator==(const order&) const = default;
};

template <class Serializer>
void decode(const Serializer& serializer, std::span<const std::byte> bytes)
{
    namespace bq = bufferqueue;
    try {
        const order decoded = serializer.deserialize(bytes);
        std::vector<std::byte> encoded;
        serializer.serialize(decoded, encoded);
        bq::fuzz::require(serializer.deserialize(encoded) == decoded, "msgpack: a decoded item does not round-trip");
    } catch (const bq::error& failure) {
        bq::fuzz::require_corrupt_data(failure);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    namespace bq = bufferqueue;
    const auto bytes = bq::fuzz::as_bytes(data, size);
    decode(bq::msgpack_serializer<order>{}, bytes);
    decode(bq::msgpack_serializer<order>{bq::msgpack_unpack_limits::untrusted_data()}, bytes);
    return 0;
}
