// bufferqueue: the headers precompiled once per library target (CMake target_precompile_headers,
// BUFFERQUEUE_PRECOMPILE_HEADERS) and included first in every file of src/ - the standard headers
// most files use, Boost.System's error codes (38 of the 45 files reach them) and the Asio headers the
// asynchronous parts share. Not a public header; each file still includes what it uses (the newer-Boost
// stage of scripts/run test compiles src/ without this header).
#pragma once

#include <utility>  // before Asio's coroutine headers (GCC 12)

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>
