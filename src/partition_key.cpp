// Floating-point partition keys: partition_key.hpp (`partition_for_key`), compiled once so the
// header needs no <cmath>.
#include "bufferqueue/partition_key.hpp"

#include <cmath>

namespace bufferqueue::detail {

namespace {

template <class Key>
std::uint32_t floating_key_partition(Key key, std::uint32_t partitions)
{
    if (!std::isfinite(key) || std::trunc(key) != key) {
        throw error(errc::invalid_argument, format_message("partition key {} is not a finite integer", key));
    }
    // fmod is exact, so the remainder is an integer in (-partitions, partitions).
    auto remainder = static_cast<std::int64_t>(std::fmod(static_cast<long double>(key), partitions)) - 1;
    if (remainder < 0) {
        remainder += partitions;
    }
    return static_cast<std::uint32_t>(remainder);
}

}  // namespace

std::uint32_t partition_for_floating_key(float key, std::uint32_t partitions)
{
    return floating_key_partition(key, partitions);
}

std::uint32_t partition_for_floating_key(double key, std::uint32_t partitions)
{
    return floating_key_partition(key, partitions);
}

std::uint32_t partition_for_floating_key(long double key, std::uint32_t partitions)
{
    return floating_key_partition(key, partitions);
}

}  // namespace bufferqueue::detail
