// Internal: a consumer group's read position in a memory partition, one position per producer lane.
#pragma once

#include "bufferqueue/memory/detail/memory_segment.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

namespace bufferqueue::detail {

/// `memory_lane_position::pinned` when the consumer holds no batch in the lane.
inline constexpr std::uint64_t memory_no_pin = std::numeric_limits<std::uint64_t>::max();

/// A consumer group's progress in one lane. Written by the one consumer using the cursor; read by
/// every thread that releases or recycles the lane (atomics).
template <class T>
struct memory_lane_position {
    std::atomic<std::uint64_t> committed{0};
    /// Start of the batch the consumer still holds in this lane, or `memory_no_pin`.
    std::atomic<std::uint64_t> pinned{memory_no_pin};
    /// The segment holding `committed` (or ending at it); only moves forward. Null until the
    /// lane's first segment exists.
    std::atomic<memory_segment<T>*> segment{nullptr};
};

/// A consumer group's progress in a memory partition (`memory_partition<T>::cursor`). Owned by the
/// partition; `pulled_lane` and `next_lane` belong to the one consumer using the cursor.
template <class T>
struct memory_cursor {
    explicit memory_cursor(std::size_t lanes) : lanes(std::make_unique<memory_lane_position<T>[]>(lanes)) {}

    std::string group;
    std::unique_ptr<memory_lane_position<T>[]> lanes;
    /// The lane of the last pull: what `commit` and `release_batch` apply to.
    std::size_t pulled_lane = 0;
    /// Where the next pull starts looking, so every lane with data gets its turn.
    std::size_t next_lane = 0;
};

}  // namespace bufferqueue::detail
