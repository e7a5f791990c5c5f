// Internal: the asynchronous operations of a pull consumer handle - consume, skip, commit, and the
// consume that routes records that do not decode to a dead-letter topic - as initiation objects for
// `boost::asio::async_initiate`.
#pragma once

#include "bufferqueue/batch.hpp"
#include "bufferqueue/consumer/detail/consumer_base.hpp"
#include "bufferqueue/consumer/detail/dead_letter_route.hpp"
#include "bufferqueue/detail/completion.hpp"
#include "bufferqueue/detail/config.hpp"
#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/skipped_record.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace bufferqueue::detail {

/// "pull consumer of topic 't' group 'g'": how errors name a consumer.
inline std::string describe_pull_consumer(const consumer_base& state)
{
    return format_message("pull consumer of topic '{}' group '{}'", state.topic_name(), state.group_name());
}

/// How a consume's completion reaches its handler: the consumer machinery completes it with an
/// `untyped_batch`, the handler takes `batch<T>` (see `invoke_handler`). No allocation of its own.
template <class T>
struct deliver_typed_batch {
    template <class Handler>
    void operator()(Handler&& handler, boost::system::error_code error, untyped_batch delivered) const
    {
        std::forward<Handler>(handler)(error, delivered.typed<T>());
    }
};

/// One consume, whatever the storage: the runner pulls where blocking is allowed (inline for
/// memory; on the I/O pool for mmap, where an auto-commit's fsync runs too) and completes, or
/// parks the consume until data arrives. Its completion arguments are `(error_code,
/// untyped_batch)`, delivered as `batch<T>`.
template <class T>
struct consume_step {
    using delivery = deliver_typed_batch<T>;

    std::shared_ptr<consumer_base> state;

    std::optional<std::tuple<boost::system::error_code, untyped_batch>> attempt()
    {
        consume_attempt attempt = state->begin_consume(true);
        if (attempt.error || attempt.delivered) {
            return std::tuple(attempt.error, attempt.delivered.value_or(untyped_batch()));
        }
        return std::nullopt;
    }

    void wait(std::unique_ptr<pending_completion<boost::system::error_code, untyped_batch>> completion) &&
    {
        consumer_base& target = *state;
        target.wait(std::move(completion));
    }
};

/// `consume()`: completes posted to the handler's executor, never inside the initiating call.
template <class T>
struct initiate_consume {
    template <class Handler>
    void operator()(Handler&& handler, std::shared_ptr<consumer_base> state) const
    {
        const consumer_base& target = *state;
        target.runner().template start<boost::system::error_code, untyped_batch>(
            std::forward<Handler>(handler), target.default_executor(), consume_step<T>{std::move(state)});
    }
};

/// Parks a consume that `begin_consume(true)` left waiting (the awaited consume's second half).
template <class T>
struct initiate_wait {
    template <class Handler>
    void operator()(Handler&& handler, std::shared_ptr<consumer_base> state) const
    {
        consumer_base& target = *state;
        target.wait(make_delivering_completion<deliver_typed_batch<T>, boost::system::error_code, untyped_batch>(
            std::forward<Handler>(handler), target.default_executor()));
    }
};

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

// GCC 12 to 15 report -Wmismatched-new-delete at the end of this coroutine once it awaits another
// one: Asio's awaitable frame pairs its unsized operator new with a sized operator delete, which is
// valid C++ (GCC PR middle-end/109224, a false positive). Silenced here, so users' -Werror builds
// do not meet it either.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

/// A consume that sends the records that do not decode to the dead-letter topic (see
/// `pull_consumer::consume`).
template <class T>
boost::asio::awaitable<std::tuple<boost::system::error_code, batch<T>>>
routed_consume(std::shared_ptr<consumer_base> state, std::shared_ptr<dead_letter_route<T>> route)
{
    const auto consumer = [&state] { return describe_pull_consumer(*state); };  // only when a failure is recorded
    route->record({}, {}, consumer);
    for (;;) {
        boost::system::error_code consumed;
        auto consume_token = boost::asio::redirect_error(boost::asio::use_awaitable, consumed);
        batch<T> delivered =
            co_await boost::asio::async_initiate<decltype(consume_token), void(boost::system::error_code, batch<T>)>(
                initiate_consume<T>{}, consume_token, state);
        skipped_record record;
        if (consumed != errc::corrupt_data || state->unreadable(record)) {
            co_return std::tuple(consumed, std::move(delivered));
        }
        const std::string where =
            format_message("the record at offset {} of partition {}", record.offset, record.partition);
        boost::system::error_code produced;
        std::string thrown;  // what the produce call threw (the dead-letter topic's key selector, a copy)
        try {
            produced =
                co_await route->letters().send(route->letter_for(state->topic_name(), record, state->last_error()));
        } catch (const std::bad_alloc&) {
            produced = make_error_code(boost::asio::error::no_memory);
        } catch (...) {
            produced = current_exception_code(errc::invalid_argument);
            thrown = exception_message();
        }
        if (produced) {
            route->record(produced,
                          format_message("sending {}, which does not decode, to dead-letter topic '{}' failed ({}); "
                                         "the record stays unread",
                                         where, route->dead_letter_topic(),
                                         thrown.empty() ? produced.message() : thrown),
                          consumer);
            co_return std::tuple(produced, batch<T>());
        }
        route->count_letter();
        boost::system::error_code skipped;
        auto skip_token = boost::asio::redirect_error(boost::asio::use_awaitable, skipped);
        (void)co_await boost::asio::async_initiate<decltype(skip_token),
                                                   void(boost::system::error_code, skipped_record)>(initiate_skip{},
                                                                                                    skip_token, state);
        if (skipped) {
            route->record(skipped,
                          format_message("stepping past {} after its dead letter was acknowledged failed ({}); the "
                                         "next consume sends it again",
                                         where, skipped.message()),
                          consumer);
            co_return std::tuple(skipped, batch<T>());
        }
        if (route->cancel_requested()) {  // `cancel()` or `close()` while the letter was produced
            co_return std::tuple(make_error_code(boost::asio::error::operation_aborted), batch<T>());
        }
    }
}

/// `co_await consume()` with `use_awaitable` on storage that never blocks (memory), without a
/// dead-letter topic, when the consumer's last batch left more behind (`likely_ready`): the pull runs
/// when the coroutine awaits (as the initiation would), and the batch resumes the coroutine at
/// once, without a round trip through its executor. Should it find nothing after all (a rebalance
/// took the partition), it parks a completion as `initiate_consume` does. Errors are thrown as
/// `use_awaitable` throws them (`boost::system::system_error`). `pull_consumer::consume` sends
/// every `max_inline_consumes + 1`-th consume in a row on a thread the posted way instead.
template <class T, class Executor>
boost::asio::awaitable<batch<T>, Executor> awaited_consume(std::shared_ptr<consumer_base> state)
{
    consume_attempt attempt = state->begin_consume(true);
    if (attempt.error) {
        throw boost::system::system_error(attempt.error);
    }
    if (attempt.delivered) {
        co_return attempt.delivered->template typed<T>();
    }
    boost::asio::use_awaitable_t<Executor> token;
    co_return co_await boost::asio::async_initiate<decltype(token), void(boost::system::error_code, batch<T>)>(
        initiate_wait<T>{}, token, std::move(state));
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/// `consume()` with a dead-letter topic: runs `routed_consume` on the queue's executor (the
/// handler's may be no I/O executor: `use_future`'s is not) and completes on the handler's.
template <class T>
struct initiate_routed_consume {
    template <class Handler>
    void operator()(Handler&& handler, std::shared_ptr<consumer_base> state,
                    std::shared_ptr<dead_letter_route<T>> route) const
    {
        auto executor = boost::asio::get_associated_executor(handler, state->default_executor());
        if (!route->try_begin()) {
            boost::asio::post(executor, [handler = std::forward<Handler>(handler)]() mutable {
                std::move(handler)(make_error_code(errc::operation_in_progress), batch<T>());
            });
            return;
        }
        const boost::asio::any_io_executor spawn_on = state->default_executor();
        boost::asio::co_spawn(
            spawn_on, routed_consume(std::move(state), route),
            [handler = std::forward<Handler>(handler), route,
             executor](std::exception_ptr failure, std::tuple<boost::system::error_code, batch<T>> result) mutable {
                route->end();
                if (failure) {  // only std::bad_alloc: every error is a code
                    result = std::tuple(make_error_code(boost::asio::error::no_memory), batch<T>());
                }
                boost::asio::dispatch(executor, [handler = std::move(handler), result = std::move(result)]() mutable {
                    std::apply(std::move(handler), std::move(result));
                });
            });
    }
};

}  // namespace bufferqueue::detail
