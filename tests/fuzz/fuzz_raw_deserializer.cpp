// libFuzzer target: raw_serializer<T>::deserialize accepts exactly sizeof(T) bytes, returns them
// unchanged, and rejects every other size with corrupt_data.
#include "bufferqueue/serialization/serializer.hpp"

#include "fuzz_support.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

struct sample {
    std::uint64_t id;
    double value;
    std::uint32_t flags;
    char tag[4];
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    namespace bq = bufferqueue;
    const bq::raw_serializer<sample> serializer;
    try {
        const sample decoded = serializer.deserialize(bq::fuzz::as_bytes(data, size));
        bq::fuzz::require(size == sizeof(sample), "raw: decoded a payload of the wrong size");
        bq::fuzz::require(std::memcmp(&decoded, data, sizeof(sample)) == 0, "raw: the decoded bytes differ");
        std::vector<std::byte> encoded;
        serializer.serialize(decoded, encoded);
        bq::fuzz::require(encoded.size() == size && std::memcmp(encoded.data(), data, size) == 0,
                          "raw: re-encoding differs from the input");
    } catch (const bq::error& failure) {
        bq::fuzz::require(size != sizeof(sample), "raw: rejected a payload of the right size");
        bq::fuzz::require_corrupt_data(failure);
    }
    return 0;
}
