// Internal: the push loop's retry pause, compiled once (src/push/push_consumer.cpp).
#pragma once

#include "bufferqueue/detail/config.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>

namespace bufferqueue::detail {

/// Waits `duration` (a steady timer on the awaiting coroutine's executor, where it resumes); throws
/// as `use_awaitable` does when the wait fails. Allocates the coroutine frame and the timer's
/// operation; not cancellable (it waits the whole duration).
/// Compiled once: a user's file never instantiates the timer's wait.
boost::asio::awaitable<void> pause_for(std::chrono::steady_clock::duration duration);

}  // namespace bufferqueue::detail
