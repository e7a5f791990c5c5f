// Internal: the asynchronous operations of a pull consumer handle - consume, skip, commit, and the
// consume that routes records that do not decode to a dead-letter topic - as initiation objects for
// `boost::asio::async_initiate`.
#pragma once

#include "bufferqueue/batch.hpp"
#include "bufferqueue/consumer/detail/consumer_base.hpp"
#include "bufferqueue/detail/completion.hpp"
#include "bufferqueue/detail/config.hpp"
#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/skipped_record.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace bufferqueue::detail {

class dead_letter_path;  // consumer/detail/dead_letter_path.hpp

/// "pull consumer of topic 't' group 'g'": how errors name a consumer.
inline std::string describe_pull_consumer(const consumer_base& state)
{
    return format_message("pull consumer of topic '{}' group '{}'", state.topic_name(), state.group_name());
}

/// The batch the user receives for `delivered`; `T` must be the consumer's item type (the registry
/// checks it when it creates the handle). Never allocates.
template <class T>
batch<T> typed_batch(const untyped_batch& delivered) noexcept
{
    return batch<T>(std::span<const T>(static_cast<const T*>(delivered.items), delivered.count), delivered.partition,
                    delivered.offsets);
}

/// How a consume's completion reaches its handler: the consumer machinery completes it with an
/// `untyped_batch`, the handler takes `batch<T>` (see `invoke_handler`). No allocation of its own.
template <class T>
struct deliver_typed_batch {
    template <class Handler>
    void operator()(Handler&& handler, boost::system::error_code error, untyped_batch delivered) const
    {
        std::forward<Handler>(handler)(error, typed_batch<T>(delivered));
    }
};

/// One consume, whatever the storage: the runner pulls where blocking is allowed (inline for
/// memory; on the I/O pool for mmap, where an auto-commit's fsync runs too) and completes, or
/// parks the consume until data arrives. Its completion arguments are `(error_code,
/// untyped_batch)`, delivered as they are (the routed consume, src/consumer/routed_consume.cpp).
struct untyped_consume_step {
    std::shared_ptr<consumer_base> state;

    std::optional<std::tuple<boost::system::error_code, untyped_batch>> attempt()
    {
        consume_attempt attempt = state->begin_consume(true);
        if (attempt.error || attempt.has_batch()) {
            return std::tuple(attempt.error, attempt.delivered);
        }
        return std::nullopt;
    }

    void wait(std::unique_ptr<pending_completion<boost::system::error_code, untyped_batch>> completion) &&
    {
        consumer_base& target = *state;
        target.wait(std::move(completion));
    }
};

/// `untyped_consume_step` whose batch reaches the handler as `batch<T>`.
template <class T>
struct consume_step : untyped_consume_step {
    using delivery = deliver_typed_batch<T>;
};

/// A consume that runs `Step` (`consume_step<T>`, or `untyped_consume_step` for the routed
/// consume of src/consumer/routed_consume.cpp): completes posted to the handler's executor, never
/// inside the initiating call.
template <class Step>
struct initiate_consume_step {
    template <class Handler>
    void operator()(Handler&& handler, std::shared_ptr<consumer_base> state) const
    {
        const consumer_base& target = *state;
        Step step;
        step.state = std::move(state);
        target.runner().template start<boost::system::error_code, untyped_batch>(
            std::forward<Handler>(handler), target.default_executor(), std::move(step));
    }
};

/// `consume()` of a consumer of `T`.
template <class T>
using initiate_consume = initiate_consume_step<consume_step<T>>;

/// Whether a completion token is `use_awaitable_t<Executor>` (and its `Executor`).
template <class Token>
struct use_awaitable_token : std::false_type {
};

template <class Executor>
struct use_awaitable_token<boost::asio::use_awaitable_t<Executor>> : std::true_type {
    using executor = Executor;
};

/// How many awaited consumes in a row a thread starts as `awaited_consume` before one goes through
/// its executor, so a consumer that always finds data still lets the other handlers of its
/// io_context run.
inline constexpr unsigned max_inline_consumes = 16;

/// The awaited consumes this thread started as `awaited_consume` since one last went through an
/// executor.
inline thread_local unsigned inline_consumes_in_a_row = 0;

/// A skip never waits: `attempt` always completes (the runner's `wait` path is never taken).
struct skip_step {
    std::shared_ptr<consumer_base> state;

    std::optional<std::tuple<boost::system::error_code, skipped_record>> attempt()
    {
        skipped_record skipped;
        const boost::system::error_code result = state->skip(skipped);
        return std::tuple(result, skipped);
    }

    void wait(std::unique_ptr<pending_completion<boost::system::error_code, skipped_record>> completion) &&
    {
        completion->complete(make_error_code(errc::invalid_argument), skipped_record{});  // unreachable
    }
};

/// `skip()`.
struct initiate_skip {
    template <class Handler>
    void operator()(Handler&& handler, std::shared_ptr<consumer_base> state) const
    {
        const consumer_base& target = *state;
        target.runner().template start<boost::system::error_code, skipped_record>(
            std::forward<Handler>(handler), target.default_executor(), skip_step{std::move(state)});
    }
};

/// `commit()`.
struct initiate_commit {
    template <class Handler>
    void operator()(Handler&& handler, std::shared_ptr<consumer_base> state) const
    {
        const consumer_base& target = *state;
        target.runner().complete(std::forward<Handler>(handler), target.default_executor(),
                                 [state = std::move(state)] { return state->commit(); });
    }
};

/// Parks a consume that `begin_consume(true)` left waiting (the awaited consume's second half);
/// completes with the `untyped_batch` as it is.
struct initiate_untyped_wait {
    template <class Handler>
    void operator()(Handler&& handler, std::shared_ptr<consumer_base> state) const
    {
        consumer_base& target = *state;
        target.wait(make_pending_completion<boost::system::error_code, untyped_batch>(std::forward<Handler>(handler),
                                                                                      target.default_executor()));
    }
};

/// Whether `consume()` with `use_awaitable` on `state` first tries to pull inline (see
/// `awaited_consume`): storage that never blocks, a last batch that left more behind, and fewer
/// than `max_inline_consumes` such consumes in a row on this thread. Counts them: a false answer
/// starts the count again. Never throws, allocates nothing.
inline bool consume_inline(const consumer_base& state) noexcept
{
    if (inline_consumes_in_a_row < max_inline_consumes && !state.runner().blocking() && state.likely_ready()) {
        ++inline_consumes_in_a_row;
        return true;
    }
    inline_consumes_in_a_row = 0;
    return false;
}

/// The item-type-free parts of the awaited operations with `use_awaitable_t<Executor>`, each
/// returning the awaitable of one asynchronous operation (one coroutine frame, as awaiting the
/// initiation directly would): `awaited_untyped_wait` parks a consume that `begin_consume(true)`
/// left waiting (`awaited_consume`'s second half), completing with `(error_code, untyped_batch)`;
/// `awaited_commit` and `awaited_skip` are `commit()` and `skip()`. For `any_io_executor` (the
/// default token) they are compiled once, in src/consumer/awaited_operations.cpp (`extern template`
/// below), so a user's file does not compile Asio's awaitable machinery for them again.
template <class Executor>
boost::asio::awaitable<untyped_batch, Executor> awaited_untyped_wait(std::shared_ptr<consumer_base> state)
{
    boost::asio::use_awaitable_t<Executor> token;
    return boost::asio::async_initiate<decltype(token), void(boost::system::error_code, untyped_batch)>(
        initiate_untyped_wait{}, token, std::move(state));
}

/// `co_await commit()` with `use_awaitable_t<Executor>`.
template <class Executor>
boost::asio::awaitable<void, Executor> awaited_commit(std::shared_ptr<consumer_base> state)
{
    boost::asio::use_awaitable_t<Executor> token;
    return boost::asio::async_initiate<decltype(token), void(boost::system::error_code)>(initiate_commit{}, token,
                                                                                         std::move(state));
}

/// `co_await skip()` with `use_awaitable_t<Executor>`.
template <class Executor>
boost::asio::awaitable<skipped_record, Executor> awaited_skip(std::shared_ptr<consumer_base> state)
{
    boost::asio::use_awaitable_t<Executor> token;
    return boost::asio::async_initiate<decltype(token), void(boost::system::error_code, skipped_record)>(
        initiate_skip{}, token, std::move(state));
}

extern template boost::asio::awaitable<untyped_batch, boost::asio::any_io_executor>
    awaited_untyped_wait<boost::asio::any_io_executor>(std::shared_ptr<consumer_base>);
extern template boost::asio::awaitable<void, boost::asio::any_io_executor>
    awaited_commit<boost::asio::any_io_executor>(std::shared_ptr<consumer_base>);
extern template boost::asio::awaitable<skipped_record, boost::asio::any_io_executor>
    awaited_skip<boost::asio::any_io_executor>(std::shared_ptr<consumer_base>);

// GCC 12 to 15 report -Wmismatched-new-delete at the end of this coroutine once it awaits another
// one: Asio's awaitable frame pairs its unsized operator new with a sized operator delete, which is
// valid C++ (GCC PR middle-end/109224, a false positive). Silenced here, so users' -Werror builds
// do not meet it either.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

/// `co_await consume()` with `use_awaitable_t<Executor>` when `consume_inline` allowed it (never
/// with a dead-letter topic): the pull runs when the coroutine awaits (as the initiation would),
/// and a batch resumes the coroutine at once, without a round trip through its executor. Should it
/// find nothing after all (a rebalance took the partition), it parks the consume as
/// `initiate_consume` does (`awaited_untyped_wait`). Errors are thrown as `use_awaitable` throws
/// them (`boost::system::system_error`). The other awaited consumes await `initiate_consume<T>`
/// directly: one coroutine frame, which Asio recycles per thread (a frame of its own around it
/// would allocate on every such consume; tests/topic/allocation_test.cpp).
template <class T, class Executor>
boost::asio::awaitable<batch<T>, Executor> awaited_consume(std::shared_ptr<consumer_base> state)
{
    consume_attempt attempt = state->begin_consume(true);
    if (attempt.error) {
        throw boost::system::system_error(attempt.error);
    }
    if (attempt.has_batch()) {
        co_return typed_batch<T>(attempt.delivered);
    }
    untyped_batch waited = co_await awaited_untyped_wait<Executor>(std::move(state));
    co_return typed_batch<T>(waited);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/// Starts a `consume()` with a dead-letter topic (src/consumer/routed_consume.cpp): a coroutine on
/// the consumer's default executor consumes, and sends each record that does not decode through `path`
/// before it steps past it (see `pull_consumer::consume`); `completion` receives the outcome,
/// dispatched to its handler's executor - or, posted, `errc::operation_in_progress` while another
/// routed consume of the consumer runs. Allocates the coroutine frame and its spawn.
void start_routed_consume(std::shared_ptr<consumer_base> state, std::shared_ptr<dead_letter_path> path,
                          std::unique_ptr<pending_completion<boost::system::error_code, untyped_batch>> completion);

/// `consume()` with a dead-letter topic: erases the handler and starts the routed consume.
template <class T>
struct initiate_routed_consume {
    template <class Handler>
    void operator()(Handler&& handler, std::shared_ptr<consumer_base> state,
                    std::shared_ptr<dead_letter_path> path) const
    {
        auto completion = make_delivering_completion<deliver_typed_batch<T>, boost::system::error_code, untyped_batch>(
            std::forward<Handler>(handler), state->default_executor());
        start_routed_consume(std::move(state), std::move(path), std::move(completion));
    }
};

}  // namespace bufferqueue::detail
