// The consume that routes records that do not decode to a dead-letter topic:
// consumer/detail/consume_operations.hpp (`start_routed_consume`). Compiled once for every item
// type: batches stay `untyped_batch`es here and become `batch<T>` in the handle's completion.
#include "bufferqueue/consumer/detail/consume_operations.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <exception>
#include <new>

namespace bufferqueue::detail {

namespace {

/// A letter's produce as the routed consume awaits it: completes once, with the produce's result,
/// or with what the produce call threw (`thrown` then holds its message, unless it was
/// `std::bad_alloc`). The sink's acknowledgement and the failed call share the completion; the
/// first to finish completes it.
struct initiate_letter {
    dead_letter_route* route;
    const std::string* topic;
    const skipped_record* record;
    std::string error;
    std::string* thrown;
    boost::asio::any_io_executor fallback;  // the consumer's default executor

    template <class Handler>
    void operator()(Handler&& handler)
    {
        struct shared_completion {
            std::atomic<bool> done{false};
            std::unique_ptr<pending_completion<boost::system::error_code>> completion;

            void finish(boost::system::error_code produced)
            {
                if (!done.exchange(true, std::memory_order_acq_rel)) {
                    completion->complete(produced);
                }
            }
        };
        auto shared = std::make_shared<shared_completion>();
        shared->completion =
            make_pending_completion<boost::system::error_code>(std::forward<Handler>(handler), fallback);
        try {
            route->letters().send(*topic, *record, std::move(error),
                                  [shared](boost::system::error_code produced) { shared->finish(produced); });
        } catch (const std::bad_alloc&) {
            shared->finish(make_error_code(boost::asio::error::no_memory));
        } catch (...) {
            *thrown = exception_message();
            shared->finish(current_exception_code(errc::invalid_argument));
        }
    }
};

// GCC 12 to 15 report -Wmismatched-new-delete at the end of a coroutine that awaits another one
// (see consume_operations.hpp; GCC PR middle-end/109224, a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

/// Consumes; a record that does not decode goes to the dead-letter topic, and once its letter is
/// acknowledged the consumer steps past it and consumes on (see `pull_consumer::consume`).
boost::asio::awaitable<std::tuple<boost::system::error_code, untyped_batch>>
routed_consume(std::shared_ptr<consumer_base> state, std::shared_ptr<dead_letter_route> route)
{
    const auto consumer = [&state] { return describe_pull_consumer(*state); };  // only when a failure is recorded
    route->record({}, {}, consumer);
    for (;;) {
        boost::system::error_code consumed;
        auto consume_token = boost::asio::redirect_error(boost::asio::use_awaitable, consumed);
        untyped_batch delivered = co_await boost::asio::async_initiate<decltype(consume_token),
                                                                       void(boost::system::error_code, untyped_batch)>(
            initiate_consume_step<untyped_consume_step>{}, consume_token, state);
        skipped_record record;
        if (consumed != errc::corrupt_data || state->unreadable(record)) {
            co_return std::tuple(consumed, delivered);
        }
        const std::string where =
            format_message("the record at offset {} of partition {}", record.offset, record.partition);
        boost::system::error_code produced;
        std::string thrown;  // what the produce call threw (the dead-letter topic's key selector, a copy)
        auto letter_token = boost::asio::redirect_error(boost::asio::use_awaitable, produced);
        // A named initiation, not a temporary in the co_await expression: GCC 12 destroys such a
        // temporary twice when it owns memory (its std::string; seen as a double free in the
        // release tests, which clang's builds did not show).
        initiate_letter send_letter{route.get(), &state->topic_name(),     &record, state->last_error(),
                                    &thrown,     state->default_executor()};
        co_await boost::asio::async_initiate<decltype(letter_token), void(boost::system::error_code)>(
            std::move(send_letter), letter_token);
        if (produced) {
            route->record(produced,
                          format_message("sending {}, which does not decode, to dead-letter topic '{}' failed ({}); "
                                         "the record stays unread",
                                         where, route->dead_letter_topic(),
                                         thrown.empty() ? produced.message() : thrown),
                          consumer);
            co_return std::tuple(produced, untyped_batch());
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
            co_return std::tuple(skipped, untyped_batch());
        }
        if (route->cancel_requested()) {  // `cancel()` or `close()` while the letter was produced
            co_return std::tuple(make_error_code(boost::asio::error::operation_aborted), untyped_batch());
        }
    }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

void start_routed_consume(std::shared_ptr<consumer_base> state, std::shared_ptr<dead_letter_route> route,
                          std::unique_ptr<pending_completion<boost::system::error_code, untyped_batch>> completion)
{
    if (!route->try_begin()) {
        completion->complete(make_error_code(errc::operation_in_progress), untyped_batch());
        return;
    }
    const boost::asio::any_io_executor spawn_on = state->default_executor();
    boost::asio::co_spawn(spawn_on, routed_consume(std::move(state), route),
                          [completion = std::move(completion), route](
                              std::exception_ptr failure, std::tuple<boost::system::error_code, untyped_batch> result) {
                              route->end();
                              if (failure) {  // only std::bad_alloc: every error is a code
                                  result = std::tuple(make_error_code(boost::asio::error::no_memory), untyped_batch());
                              }
                              completion->dispatch(std::get<0>(result), std::get<1>(result));
                          });
}

}  // namespace bufferqueue::detail
