// Internal: how a push loop awaits each kind of handler - a consumer type's `consume` member or a
// callable, shared or made fresh for every batch.
#pragma once

#include "bufferqueue/detail/config.hpp"

#include "bufferqueue/batch.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/push_consumer.hpp"

#include <boost/asio/awaitable.hpp>

#include <memory>
#include <type_traits>

namespace bufferqueue::detail {

/// Awaits `handler`'s `consume` member on `items`, with the committer under manual commit.
template <class T, class Handler>
boost::asio::awaitable<void> call_consume(Handler& handler, batch<T> items, committer* commit)
{
    if constexpr (manual_commit_push_handler<Handler, T>) {
        co_await handler.consume(items, *commit);
    } else {
        co_await handler.consume(items);
    }
}

/// Awaits the callable `handler` on `items`, with the committer under manual commit.
template <class T, class Handler>
boost::asio::awaitable<void> call_callable(Handler& handler, batch<T> items, committer* commit)
{
    if constexpr (std::is_invocable_v<Handler&, batch<T>, committer&>) {
        co_await handler(items, *commit);
    } else {
        co_await handler(items);
    }
}

/// A consumer instance from `factory`, which returns the consumer by value, `std::unique_ptr` or
/// `std::shared_ptr`.
template <class Consumer, class Factory>
std::shared_ptr<Consumer> make_consumer_instance(Factory& factory)
{
    using made = std::invoke_result_t<Factory&>;
    if constexpr (std::is_convertible_v<made, std::shared_ptr<Consumer>>) {
        std::shared_ptr<Consumer> instance = factory();
        if (!instance) {
            throw error(errc::invalid_argument, "push consumer factory returned a null pointer");
        }
        return instance;
    } else {
        static_assert(std::is_convertible_v<made, Consumer>,
                      "a push consumer factory must return the consumer, a std::unique_ptr or a std::shared_ptr to it");
        return std::make_shared<Consumer>(factory());
    }
}

/// Per-batch instances: one made for this call, destroyed when it finishes or throws.
template <class T, class Consumer, class Factory>
boost::asio::awaitable<void> call_fresh_consumer(std::shared_ptr<Factory> factory, batch<T> items, committer* commit)
{
    const std::shared_ptr<Consumer> instance = make_consumer_instance<Consumer>(*factory);
    co_await call_consume<T>(*instance, items, commit);
}

/// Per-batch callables: a copy made for this call.
template <class T, class Handler>
boost::asio::awaitable<void> call_fresh_callable(std::shared_ptr<const Handler> prototype, batch<T> items,
                                                 committer* commit)
{
    Handler handler = *prototype;
    co_await call_callable<T>(handler, items, commit);
}

}  // namespace bufferqueue::detail
