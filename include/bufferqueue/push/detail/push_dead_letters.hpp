// Internal: a push loop's end of the dead-letter path - send what the loop gives up on through its
// consumer's `dead_letter_path` until the letters are acknowledged and the records stepped past,
// trying a failed produce again after the backoff, and report to the error sink. Compiled once
// (src/push/push_dead_letters.cpp), item-type free.
#pragma once

#include "bufferqueue/detail/config.hpp"

#include "bufferqueue/consumer/detail/dead_letter_path.hpp"
#include "bufferqueue/push/detail/push_registry.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <exception>
#include <functional>
#include <string>

namespace bufferqueue::detail {

/// One push loop as its dead letters see it: its path, where it reports, its topic and group, and
/// its backoff (`back_off(tries)` waits after `tries` failed produces; false when the loop must end:
/// stopped, or the queue closed). Refers to the loop's members; used by its coroutine only.
struct push_letter_route {
    dead_letter_path& path;
    push_registry& registry;
    const std::string& topic;
    const std::string& group;
    std::function<boost::asio::awaitable<bool>(std::size_t)> back_off;
};

/// A batch whose handler failed `contents.attempts` times (the last with `failure`): produces one
/// dead letter per item and, once that produce is acknowledged, commits the batch and reports it;
/// true then, and the loop goes on with the next batch. A failed produce is reported and tried
/// again after the backoff; false when the loop was stopped meanwhile (reported when a produce in
/// flight was no longer awaited) or the commit failed (reported). Allocates per call.
boost::asio::awaitable<bool> dead_letter_batch(push_letter_route route, letter_contents contents,
                                               std::exception_ptr failure);

/// The record the loop's failed pull stopped at did not decode: produces its dead letter (the stored
/// bytes, no item) and, once that is acknowledged, skips it; true then. False when it was not routed
/// (no record the storage can step past, e.g. a damaged frame; or skipping failed, reported): the
/// loop pauses and pulls again, as for any failed pull. A stop during the produce or its backoff
/// also gives false. Allocates per call.
boost::asio::awaitable<bool> dead_letter_undecodable(push_letter_route route);

}  // namespace bufferqueue::detail
