// libFuzzer target: json_serializer<T>::deserialize on arbitrary bytes decodes or throws
// corrupt_data, and whatever it decodes re-encodes to something that decodes to the same value.
#include "bufferqueue/serialization/serializer.hpp"

#include "fuzz_support.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace {

struct order {
    std::int64_t id = 0;
    std::string name;
    std::vector<double> prices;
    bool operator==(const order&) const = default;
};

// nlohmann's own integer conversion casts a JSON float to the integer unchecked (undefined behaviour
// when it is out of range, found by this target with {"id":50e23,...}), so an integer field of data
// that may be damaged is read with a check, as docs/serializers.md recommends.
void from_json(const nlohmann::json& json, order& item)
{
    const nlohmann::json& id = json.at("id");
    if (!id.is_number_integer()) {
        throw nlohmann::json::type_error::create(302, "id must be an integer", &json);
    }
    id.get_to(item.id);
    json.at("name").get_to(item.name);
    json.at("prices").get_to(item.prices);
}

void to_json(nlohmann::json& json, const order& item)
{
    json = nlohmann::json{{"id", item.id}, {"name", item.name}, {"prices", item.prices}};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    namespace bq = bufferqueue;
    const bq::json_serializer<order> serializer;
    try {
        const order decoded = serializer.deserialize(bq::fuzz::as_bytes(data, size));
        std::vector<std::byte> encoded;
        serializer.serialize(decoded, encoded);
        const order again = serializer.deserialize(encoded);
        bq::fuzz::require(again.id == decoded.id && again.name == decoded.name &&
                              again.prices.size() == decoded.prices.size(),
                          "json: a decoded item does not survive a round trip");
    } catch (const bq::error& failure) {
        bq::fuzz::require_corrupt_data(failure);
    }
    return 0;
}
