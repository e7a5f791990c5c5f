// Floating-point partition keys: partition_key.hpp (`partition_for_key`), compiled once so the
// header needs no <cmath>.
#include "bufferqueue/partition_key.hpp"

#include <cmath>

namespace bufferqueue::detail {

std::uint32_t partition_for_floating_key(long double key, std::uint32_t partitions)
{
    if (!std::isfinite(key) || std::trunc(key) != key) {
        throw error(errc::invalid_argument, format_message("partition key {} is not a finite integer", key));
    }
    // fmod is exact, so the remainder is an integer in (-partitions, partitions).
    auto remainder = static_cast<std::int64_t>(std::fmod(key, partitions)) - 1;
    if (remainder < 0) {
        remainder += partitions;
    }
    return static_cast<std::uint32_t>(remainder);
}

}  // namespace bufferqueue::detail
