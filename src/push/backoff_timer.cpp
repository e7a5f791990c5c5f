// The push loop's backoff wait: push/detail/backoff_timer.hpp.
#include "bufferqueue/push/detail/backoff_timer.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <mutex>
#include <utility>

namespace bufferqueue::detail {

struct backoff_timer::waiting {
    boost::asio::steady_timer timer;
};

boost::asio::awaitable<void> backoff_timer::wait(std::chrono::steady_clock::duration delay, spin_mutex& mutex,
                                                 const std::function<bool()>& must_end)
{
    waiting current{boost::asio::steady_timer(co_await boost::asio::this_coro::executor, delay)};
    try {
        co_await boost::asio::async_initiate<const boost::asio::use_awaitable_t<>&, void(boost::system::error_code)>(
            [this, &current, &mutex, &must_end](auto handler) {
                std::lock_guard lock(mutex);
                current.timer.async_wait(std::move(handler));
                if (must_end()) {
                    current.timer.cancel();
                } else {
                    waiting_ = &current;
                }
            },
            boost::asio::use_awaitable);
    } catch (const boost::system::system_error&) {
        // Cancelled: the caller checks why.
    }
    std::lock_guard lock(mutex);
    waiting_ = nullptr;
}

void backoff_timer::cancel() noexcept
{
    if (waiting_ != nullptr) {
        waiting_->timer.cancel();
    }
}

}  // namespace bufferqueue::detail
