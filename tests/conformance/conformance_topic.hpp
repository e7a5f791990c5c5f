// The backend-neutral description of a topic that the conformance suite asks every backend fixture
// to register (see backend_fixtures.hpp and docs/backends.md).
#pragma once

#include <bufferqueue/bufferqueue.hpp>

#include <cstddef>
#include <optional>
#include <string>

/// What a conformance test needs of a topic, whatever stores it. A fixture maps it onto its own
/// options type and calls `buffer_queue::add_topic`. `bounded_capacity` and `full_mode` are only set
/// for fixtures that declare `bounded = true`; a fixture that cannot bound a topic throws
/// `std::invalid_argument` when `bounded_capacity` is set.
template <class T>
struct conformance_topic {
    /// Topic name, unique per item type in a queue.
    std::string name;
    /// Number of partitions, at least 1.
    std::size_t partitions = 1;
    /// Optional key routing; round-robin when empty.
    bufferqueue::key_selector<T> partition_key{};
    /// Topic-wide limit on items not yet committed by every group; empty means unbounded.
    std::optional<std::size_t> bounded_capacity{};
    /// What `produce` does when `bounded_capacity` is reached.
    bufferqueue::full_mode full_mode = bufferqueue::full_mode::wait;
};
