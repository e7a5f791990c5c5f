// Internal: how a consumer gives back the room its commits free, without knowing who bounds the topic.
#pragma once

#include <cstddef>

namespace bufferqueue::detail {

/// Where a consumer returns the room of items no group holds any more (what a partition's `commit`
/// returned): the topic layer's `capacity_gate` of a bounded topic implements it; an unbounded topic
/// hands its consumers none (null). One call per commit that released something: a consumer calls
/// it from the thread running its commit, holding no lock of its own.
class capacity_release {
public:
    /// `items` admitted items stopped being held by every group: their room goes back to the bound
    /// (and may admit waiting producers). 0 does nothing. Thread-safe from any thread, never throws;
    /// lock-free unless producers wait for room (then a short lock).
    virtual void release(std::size_t items) noexcept = 0;

protected:
    capacity_release() = default;
    capacity_release(const capacity_release&) = default;
    capacity_release& operator=(const capacity_release&) = default;
    ~capacity_release() = default;
};

}  // namespace bufferqueue::detail
