// Internal: type-erased completion handlers for operations that have to wait.
#pragma once

#include "bufferqueue/detail/config.hpp"
#include "bufferqueue/detail/io_pool.hpp"
#include "bufferqueue/error.hpp"

#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

namespace bufferqueue::detail {

/// How a completion's arguments reach its handler: as they are. An operation whose completion
/// arguments are not the handler's own (a consume completes with an `untyped_batch`, its handler
/// takes `batch<T>`) names another delivery, a default-constructible callable invoked as
/// `Delivery{}(std::move(handler), args...)`; the handler's associated executor, allocator and
/// cancellation slot stay its own.
struct invoke_handler {
    template <class Handler, class... Args>
    void operator()(Handler&& handler, Args&&... args) const
    {
        std::forward<Handler>(handler)(std::forward<Args>(args)...);
    }
};

/// Posts `handler(args...)` (through `Delivery`) to the handler's associated executor (or
/// `fallback`). Completing inside the initiating call would recurse into `use_awaitable`
/// coroutines, so an initiating call that completes at once goes through here; a wait resumed later
/// may complete with `pending_completion::dispatch` instead.
template <class Delivery = invoke_handler, class Handler, class Executor, class... Args>
void post_completion(Handler&& handler, const Executor& fallback, Args&&... args)
{
    auto executor = boost::asio::get_associated_executor(handler, fallback);
    boost::asio::post(executor, [handler = std::forward<Handler>(handler),
                                 arguments = std::make_tuple(std::forward<Args>(args)...)]() mutable {
        std::apply([&handler](auto&... each) { Delivery{}(std::move(handler), std::move(each)...); }, arguments);
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

    /// Like `complete`, but invokes the handler at once when the caller already runs on the handler's
    /// executor (`boost::asio::dispatch`). Never call it inside the operation's initiating call, nor
    /// where the caller's state could not stand the handler starting the next operation.
    virtual void dispatch(Args... args) = 0;

    /// The executor the handler runs on, with work tracked; continuations are posted here.
    const boost::asio::any_io_executor& executor() const noexcept { return work_; }

    /// Arranges for `cancel` to run when the handler's cancellation slot (Boost 1.77 and later) emits
    /// a cancellation while the operation waits; replaces an earlier `cancel`. Does nothing when the
    /// handler has no slot. `complete` disconnects it. Like Asio's own operations, expects the
    /// signal to be emitted from the handler's executor.
    virtual void on_cancel(std::function<void()> cancel) = 0;

protected:
    explicit pending_completion(boost::asio::any_io_executor work) : work_(std::move(work)) {}

    boost::asio::any_io_executor work_;
};

/// `executor` with outstanding work tracked (`execution::outstanding_work.tracked`). Compiled once
/// (src/detail/completion.cpp): Asio's property machinery for `any_io_executor` is costly to compile
/// in every file that includes this header. Allocates as `boost::asio::prefer` does; never throws
/// for an executor that has the property.
boost::asio::any_io_executor work_tracked(const boost::asio::any_io_executor& executor);

/// The system executor, never blocking: where a handler without an `any_io_executor` completes.
/// Compiled once (src/detail/completion.cpp).
boost::asio::any_io_executor never_blocking_system_executor();

/// The executor a waiting operation's continuations run on, with work tracked: the handler's associated
/// executor, or - when that is no `any_io_executor` (`use_future`'s promise executor) - the system
/// executor, where such a handler completes anyway (nobody has to run an `io_context` for it).
template <class Handler>
boost::asio::any_io_executor continuation_executor(const Handler& handler, const boost::asio::any_io_executor& fallback)
{
    using associated = boost::asio::associated_executor_t<Handler, boost::asio::any_io_executor>;
    if constexpr (std::is_constructible_v<boost::asio::any_io_executor, associated>) {
        return work_tracked(boost::asio::any_io_executor(boost::asio::get_associated_executor(handler, fallback)));
    } else {
        return never_blocking_system_executor();
    }
}

/// `pending_completion<Args...>` over a handler of type `Handler`, which `Delivery` calls (see
/// `invoke_handler`).
template <class Handler, class Delivery, class... Args>
class handler_completion final : public pending_completion<Args...> {
public:
    handler_completion(Handler handler, const boost::asio::any_io_executor& fallback)
        : pending_completion<Args...>(continuation_executor(handler, fallback)), handler_(std::move(handler))
    {
    }

    void on_cancel([[maybe_unused]] std::function<void()> cancel) override
    {
#if BUFFERQUEUE_HAS_CANCELLATION_SLOTS
        auto slot = boost::asio::get_associated_cancellation_slot(handler_);
        if (slot.is_connected()) {
            slot.assign([cancel = std::move(cancel)](boost::asio::cancellation_type type) {
                if (type != boost::asio::cancellation_type::none) {
                    cancel();
                }
            });
        }
#endif
    }

    void complete(Args... args) override
    {
        deliver<false>(std::move(args)...);
    }

    void dispatch(Args... args) override
    {
        deliver<true>(std::move(args)...);
    }

private:
    template <bool Dispatch>
    void deliver(Args... args)
    {
#if BUFFERQUEUE_HAS_CANCELLATION_SLOTS
        if (auto slot = boost::asio::get_associated_cancellation_slot(handler_); slot.is_connected()) {
            slot.clear();
        }
#endif
        auto executor = boost::asio::get_associated_executor(handler_, this->work_);
        auto function = [handler = std::move(handler_), arguments = std::make_tuple(std::move(args)...)]() mutable {
            std::apply([&handler](auto&... each) { Delivery{}(std::move(handler), std::move(each)...); }, arguments);
        };
        if constexpr (Dispatch) {
            boost::asio::dispatch(executor, std::move(function));
        } else {
            boost::asio::post(executor, std::move(function));
        }
        this->work_ = boost::asio::any_io_executor();
    }

    Handler handler_;
};

/// Erases `handler` into a heap-allocated pending completion, whose arguments reach the handler
/// through `Delivery` (see `invoke_handler`).
template <class Delivery, class... Args, class Handler>
std::unique_ptr<pending_completion<Args...>> make_delivering_completion(Handler&& handler,
                                                                        const boost::asio::any_io_executor& fallback)
{
    return std::make_unique<handler_completion<std::decay_t<Handler>, Delivery, Args...>>(
        std::forward<Handler>(handler), fallback);
}

/// Erases `handler` into a heap-allocated pending completion.
template <class... Args, class Handler>
std::unique_ptr<pending_completion<Args...>> make_pending_completion(Handler&& handler,
                                                                     const boost::asio::any_io_executor& fallback)
{
    return make_delivering_completion<invoke_handler, Args...>(std::forward<Handler>(handler), fallback);
}

/// Runs `work` on `pool` (threads where file I/O may block) and completes `handler` with the error
/// code it returns, on the handler's executor; completes it with `errc::closed` without running
/// `work` when the pool was shut down with its queue. The handler's executor keeps outstanding work
/// meanwhile. The completion is posted, never run inside this call.
template <class Handler, class Work>
void complete_after_blocking_work(Handler&& handler, const boost::asio::any_io_executor& fallback, io_pool& pool,
                                  Work work)
{
    auto completion = make_pending_completion<boost::system::error_code>(std::forward<Handler>(handler), fallback);
    const bool posted = pool.post([&] {
        return [completion = std::move(completion), work = std::move(work)]() mutable { completion->complete(work()); };
    });
    if (!posted) {
        completion->complete(make_error_code(errc::closed));
    }
}

}  // namespace bufferqueue::detail
