// A push loop's end of the dead-letter path: push/detail/push_dead_letters.hpp.
#include "bufferqueue/push/detail/push_dead_letters.hpp"

#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/skipped_record.hpp"

#include <boost/system/system_error.hpp>

#include <utility>

namespace bufferqueue::detail {

namespace {

// GCC 12 to 15 report -Wmismatched-new-delete at the end of a coroutine that awaits another one
// (see consume_operations.hpp; GCC PR middle-end/109224, a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

std::exception_ptr error_exception(const boost::system::error_code& error)
{
    return std::make_exception_ptr(boost::system::system_error(error));
}

// Delivers through `send` (one delivery per call) until the letters are acknowledged and the
// records stepped past. A failed produce is reported (prefixed by `where`) and tried again once the
// backoff allows; a stop ends it (reported when a produce in flight was no longer awaited). The last
// delivery's outcome (`stopped` after an ended backoff).
template <class Send>
boost::asio::awaitable<letter_outcome> send_letters(const push_letter_route& route, Send send, const std::string& where)
{
    for (std::size_t tries = 1;; ++tries) {
        letter_outcome sent = co_await send();
        if (sent.stage == letter_stage::stopped && sent.error) {
            route.registry.report(route.topic, route.group, error_exception(sent.error),
                                  format_message("{}; stop() ended the wait for its dead letters before they were "
                                                 "acknowledged: the records stay uncommitted and the next run "
                                                 "delivers them again (letters that still reach the topic are then "
                                                 "sent twice)",
                                                 where));
        }
        if (sent.stage != letter_stage::produce) {
            co_return sent;
        }
        route.registry.report(route.topic, route.group, sent.thrown ? sent.thrown : error_exception(sent.error),
                              format_message("{}; producing its dead letters failed ({}), tried again after the "
                                             "backoff; the records stay uncommitted",
                                             where, sent.thrown ? exception_text(sent.thrown) : sent.error.message()));
        if (!co_await route.back_off(tries)) {
            co_return letter_outcome{.stage = letter_stage::stopped, .error = {}, .thrown = nullptr};
        }
    }
}

}  // namespace

boost::asio::awaitable<bool> dead_letter_batch(push_letter_route route, letter_contents contents,
                                               std::exception_ptr failure)
{
    const std::string where =
        format_message("topic '{}' group '{}' partition {}: a batch of {} items failed {} "
                       "times (max_attempts)",
                       route.topic, route.group, contents.partition, contents.count, contents.attempts);
    const letter_outcome sent = co_await send_letters(
        route, [&route, &contents] { return route.path.send_given_up(contents); }, where);
    if (sent.stage == letter_stage::step_past) {
        route.registry.report(route.topic, route.group, error_exception(sent.error),
                              format_message("{}; it was dead-lettered, but committing it failed ({}): this push "
                                             "loop stopped, and the next run delivers it again",
                                             where, sent.error.message()));
    }
    if (sent.stage != letter_stage::done) {
        co_return false;
    }
    route.registry.report(
        route.topic, route.group, failure,
        format_message("{}; sent to the dead-letter topic and committed; last error: {}", where, contents.error));
    co_return true;
}

boost::asio::awaitable<bool> dead_letter_undecodable(push_letter_route route)
{
    skipped_record record;
    if (!route.path.undecodable_record(record)) {
        co_return false;
    }
    const std::string where = format_message("topic '{}' group '{}' partition {}: the record at offset {} does "
                                             "not decode",
                                             route.topic, route.group, record.partition, record.offset);
    const letter_outcome sent = co_await send_letters(
        route, [&route, &record] { return route.path.send_undecodable(record); }, where);
    if (sent.stage == letter_stage::step_past) {
        route.registry.report(route.topic, route.group, error_exception(sent.error),
                              format_message("{}; it was dead-lettered, but skipping it failed ({}): it is pulled "
                                             "(and dead-lettered) again",
                                             where, sent.error.message()));
    }
    if (sent.stage != letter_stage::done) {
        co_return false;
    }
    route.registry.report(route.topic, route.group, nullptr,
                          format_message("{}; sent to the dead-letter topic and skipped", where));
    co_return true;
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace bufferqueue::detail
