// Internal: one partition of a topic - its storage and the consumers waiting on it.
#pragma once

#include "bufferqueue/detail/partition_signal.hpp"
#include "bufferqueue/storage/partition_waker.hpp"
#include "bufferqueue/storage/storage.hpp"

#include <utility>

namespace bufferqueue::detail {

/// One partition of a topic: its storage and the consumers waiting on it. A partition that takes a
/// waker (`wakeable_partition`) gets the one over `signal` here, once. `signal` is declared first,
/// so the storage (which may notify it from a thread of its own until it is destroyed) goes first.
/// Not movable: the waker and the consumers point into it.
template <class Partition>
struct partition_slot {
    template <class... Arguments>
    explicit partition_slot(Arguments&&... arguments) : storage(std::forward<Arguments>(arguments)...)
    {
        if constexpr (wakeable_partition<Partition>) {
            storage.bind_waker(partition_waker(signal));
        }
    }

    partition_slot(const partition_slot&) = delete;
    partition_slot& operator=(const partition_slot&) = delete;

    partition_signal signal;
    Partition storage;
};

}  // namespace bufferqueue::detail
