// The consume that routes records that do not decode to a dead-letter topic:
// consumer/detail/consume_operations.hpp (`start_routed_consume`). Compiled once for every item
// type: batches stay `untyped_batch`es here and become `batch<T>` in the handle's completion; the
// letter goes through the consumer's `dead_letter_path` (src/consumer/dead_letter_path.cpp).
#include "bufferqueue/consumer/detail/consume_operations.hpp"
#include "bufferqueue/consumer/detail/dead_letter_path.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <exception>

namespace bufferqueue::detail {

namespace {

// GCC 12 to 15 report -Wmismatched-new-delete at the end of a coroutine that awaits another one
// (see consume_operations.hpp; GCC PR middle-end/109224, a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

/// Consumes; a record that does not decode goes to the dead-letter topic, and once its letter is
/// acknowledged the consumer steps past it and consumes on (see `pull_consumer::consume`).
boost::asio::awaitable<std::tuple<boost::system::error_code, untyped_batch>>
routed_consume(std::shared_ptr<consumer_base> state, std::shared_ptr<dead_letter_path> path)
{
    const auto consumer = [&state] { return describe_pull_consumer(*state); };  // only when a failure is recorded
    path->record({}, {}, consumer);
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
        const letter_outcome sent = co_await path->send_undecodable(record);
        if (sent.stage == letter_stage::step_past) {
            path->record(sent.error,
                         format_message("stepping past {} after its dead letter was acknowledged failed ({}); the "
                                        "next consume sends it again",
                                        where, sent.error.message()),
                         consumer);
            co_return std::tuple(sent.error, untyped_batch());
        }
        if (sent.stage != letter_stage::done) {  // the produce failed, or its call threw
            const bool described = sent.thrown && sent.error != boost::asio::error::no_memory;
            const boost::system::error_code failed =  // `stopped` has no error (a pull path is never abandoned)
                sent.error ? sent.error : make_error_code(boost::asio::error::operation_aborted);
            path->record(failed,
                         format_message("sending {}, which does not decode, to dead-letter topic '{}' failed ({}); "
                                        "the record stays unread",
                                        where, path->dead_letter_topic(),
                                        described ? exception_text(sent.thrown) : failed.message()),
                         consumer);
            co_return std::tuple(failed, untyped_batch());
        }
        if (path->cancel_requested()) {  // `cancel()` or `close()` while the letter was produced
            co_return std::tuple(make_error_code(boost::asio::error::operation_aborted), untyped_batch());
        }
    }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

void start_routed_consume(std::shared_ptr<consumer_base> state, std::shared_ptr<dead_letter_path> path,
                          std::unique_ptr<pending_completion<boost::system::error_code, untyped_batch>> completion)
{
    if (!path->try_begin()) {
        completion->complete(make_error_code(errc::operation_in_progress), untyped_batch());
        return;
    }
    const boost::asio::any_io_executor spawn_on = state->default_executor();
    boost::asio::co_spawn(spawn_on, routed_consume(std::move(state), path),
                          [completion = std::move(completion), path](
                              std::exception_ptr failure, std::tuple<boost::system::error_code, untyped_batch> result) {
                              path->end();
                              if (failure) {  // only std::bad_alloc: every error is a code
                                  result = std::tuple(make_error_code(boost::asio::error::no_memory), untyped_batch());
                              }
                              completion->dispatch(std::get<0>(result), std::get<1>(result));
                          });
}

}  // namespace bufferqueue::detail
