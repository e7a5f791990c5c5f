// Internal: type-erased completion handlers for operations that have to wait.
#pragma once

#include "bufferqueue/detail/config.hpp"

#include <memory>
#include <tuple>
#include <utility>

namespace bufferqueue::detail {

/// Posts `handler(args...)` to the handler's associated executor (or `fallback`). Completing
/// inside the initiating call would recurse into `use_awaitable` coroutines, so every completion
/// goes through here.
template <class Handler, class Executor, class... Args>
void post_completion(Handler&& handler, const Executor& fallback, Args&&... args)
{
    auto executor = boost::asio::get_associated_executor(handler, fallback);
    boost::asio::post(executor, [handler = std::forward<Handler>(handler),
                                 arguments = std::make_tuple(std::forward<Args>(args)...)]() mutable {
        std::apply(std::move(handler), std::move(arguments));
    });
}

/// A waiting operation's handler, erased to the completion arguments. It keeps the handler's
/// executor busy (outstanding work) until it completes, so `io_context::run()` does not return
/// while the operation waits.
template <class... Args>
class pending_completion {
public:
    pending_completion(const pending_completion&) = delete;
    pending_completion& operator=(const pending_completion&) = delete;
    virtual ~pending_completion() = default;

    /// Posts the handler with `args`. Call once; the object is spent afterwards.
    virtual void complete(Args... args) = 0;

    /// The executor the handler runs on, with work tracked; continuations are posted here.
    const boost::asio::any_io_executor& executor() const noexcept { return work_; }

protected:
    explicit pending_completion(boost::asio::any_io_executor work) : work_(std::move(work)) {}

    boost::asio::any_io_executor work_;
};

template <class Handler, class... Args>
class handler_completion final : public pending_completion<Args...> {
public:
    handler_completion(Handler handler, const boost::asio::any_io_executor& fallback)
        : pending_completion<Args...>(boost::asio::prefer(
              boost::asio::any_io_executor(boost::asio::get_associated_executor(handler, fallback)),
              boost::asio::execution::outstanding_work.tracked)),
          handler_(std::move(handler))
    {
    }

    void complete(Args... args) override
    {
        auto executor = boost::asio::get_associated_executor(handler_, this->work_);
        boost::asio::post(executor, [handler = std::move(handler_),
                                     arguments = std::make_tuple(std::move(args)...)]() mutable {
            std::apply(std::move(handler), std::move(arguments));
        });
        this->work_ = boost::asio::any_io_executor();
    }

private:
    Handler handler_;
};

/// Erases `handler` into a heap-allocated pending completion.
template <class... Args, class Handler>
std::unique_ptr<pending_completion<Args...>> make_pending_completion(Handler&& handler,
                                                                     const boost::asio::any_io_executor& fallback)
{
    return std::make_unique<handler_completion<std::decay_t<Handler>, Args...>>(std::forward<Handler>(handler),
                                                                                fallback);
}

}  // namespace bufferqueue::detail
