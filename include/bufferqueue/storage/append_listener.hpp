// bufferqueue: how a storage partition whose appends are acknowledged later (a broker's delivery
// report, a replica's answer) reports that the items it took are stored, or that they never will be.
#pragma once

#include "bufferqueue/error.hpp"

#include <cstddef>

namespace bufferqueue {

/// Receives the acknowledgements of one `append_acknowledged` call of an `acknowledging_partition`
/// (see storage/storage.hpp). The topic layer implements it, one object per awaited `produce()`,
/// and completes the produce when every item the storage took has been acknowledged.
///
/// Lifetime: valid until the acknowledgements of the call add up to the items the call took; the
/// partition must not touch it afterwards. Not copyable.
class append_listener {
public:
    append_listener(const append_listener&) = delete;
    append_listener& operator=(const append_listener&) = delete;

    /// `items` of the items the call took are acknowledged: stored (`error` empty) or given up
    /// (`error`: a `bufferqueue::errc` code such as `io_error`, `timed_out`, or `closed` when the
    /// partition closes first). The counts of a call's acknowledgements add up to the items it took,
    /// each item once; several may come at once (a batch acknowledged together). Thread-safe: any
    /// thread, also inside `append_acknowledged` itself. Never blocks beyond a short lock, never
    /// throws; the last one may post the produce's completion (it never runs it inline).
    virtual void acknowledged(std::size_t items, boost::system::error_code error) noexcept = 0;

protected:
    /// For the topic layer's implementation; never throws.
    append_listener() = default;
    /// Not virtual: a partition never destroys a listener, the topic layer owns it.
    ~append_listener() = default;
};

}  // namespace bufferqueue
