// Internal: the one place that includes Asio for bufferqueue, with the toolchain settings it needs.
#pragma once

// GCC 12's <coroutine> support in Asio needs <utility> first.
#include <utility>

// clang 14 supports coroutines but Boost.Asio does not detect it on its own.
#if defined(__clang__)
#ifndef BOOST_ASIO_HAS_CO_AWAIT
#define BOOST_ASIO_HAS_CO_AWAIT 1
#endif
#ifndef BOOST_ASIO_HAS_STD_COROUTINE
#define BOOST_ASIO_HAS_STD_COROUTINE 1
#endif
#endif

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/blocking.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/require.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/version.hpp>

#if BOOST_VERSION >= 107700
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/cancellation_type.hpp>
#define BUFFERQUEUE_HAS_CANCELLATION_SLOTS 1
#else
#define BUFFERQUEUE_HAS_CANCELLATION_SLOTS 0
#endif
