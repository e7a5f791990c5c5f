// libFuzzer target: json_serializer<T>::deserialize on arbitrary bytes decodes or throws
// corrupt_data, and whatever it decodes re-encodes to something that decodes to the same value.
#include "bufferqueue/serializer.hpp"

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
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(order, id, name, prices)

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
