// The dead-letter path of pull and push consumers: consumer/detail/dead_letter_path.hpp.
#include "bufferqueue/consumer/detail/dead_letter_path.hpp"

#include "bufferqueue/consumer/detail/consume_operations.hpp"
#include "bufferqueue/detail/completion.hpp"
#include "bufferqueue/error.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <mutex>
#include <new>
#include <optional>
#include <utility>

namespace bufferqueue::detail {

/// One produce of letters: the first of its acknowledgement and `abandon()` resumes the waiting
/// delivery; the other finds nothing to do. Thread-safe.
class dead_letter_path::in_flight {
public:
    void wait(std::unique_ptr<pending_completion<boost::system::error_code>> waiter)
    {
        std::unique_lock lock(mutex_);
        if (outcome_) {
            lock.unlock();
            waiter->complete(*outcome_);  // posted: never inside the initiating call
            return;
        }
        waiter_ = std::move(waiter);
    }

    void finish(boost::system::error_code result) noexcept
    {
        std::unique_ptr<pending_completion<boost::system::error_code>> waiter;
        {
            std::lock_guard lock(mutex_);
            if (outcome_) {
                return;  // the other one came first
            }
            outcome_ = result;
            waiter = std::move(waiter_);
        }
        if (waiter) {
            waiter->complete(result);
        }
    }

private:
    spin_mutex mutex_;
    std::optional<boost::system::error_code> outcome_;                       // guarded by mutex_
    std::unique_ptr<pending_completion<boost::system::error_code>> waiter_;  // guarded by mutex_
};

namespace {

/// The wait for a produce of letters (`async_initiate`'s initiation): a named object holding only
/// pointers (GCC 12 destroys a temporary initiation that owns memory twice inside co_await).
template <class InFlight>
struct wait_for_letters {
    InFlight* attempt;
    const boost::asio::any_io_executor* executor;

    template <class Handler>
    void operator()(Handler&& handler)
    {
        attempt->wait(make_pending_completion<boost::system::error_code>(std::forward<Handler>(handler), *executor));
    }
};

}  // namespace

dead_letter_path::dead_letter_path(std::shared_ptr<consumer_base> consumer, letter_producer letters,
                                   std::string dead_letter_topic, std::shared_ptr<group_counters> counters)
    : consumer_(std::move(consumer)), letters_(std::move(letters)), dead_letter_topic_(std::move(dead_letter_topic)),
      counters_(std::move(counters))
{
}

dead_letter_path::~dead_letter_path() = default;

bool dead_letter_path::undecodable_record(skipped_record& record) const noexcept
{
    try {
        return !consumer_->unreadable(record);
    } catch (...) {
        return false;
    }
}

bool dead_letter_path::try_begin() noexcept
{
    std::lock_guard lock(mutex_);
    if (busy_) {
        return false;
    }
    busy_ = true;
    cancel_requested_ = false;
    return true;
}

void dead_letter_path::end() noexcept
{
    std::lock_guard lock(mutex_);
    busy_ = false;
}

void dead_letter_path::request_cancel() noexcept
{
    std::lock_guard lock(mutex_);
    cancel_requested_ = true;
}

bool dead_letter_path::cancel_requested() const noexcept
{
    std::lock_guard lock(mutex_);
    return cancel_requested_;
}

void dead_letter_path::abandon() noexcept
{
    std::shared_ptr<in_flight> pending;
    {
        std::lock_guard lock(mutex_);
        abandoned_ = true;
        pending = std::move(in_flight_);
    }
    if (pending) {
        pending->finish(boost::asio::error::operation_aborted);
    }
}

bool dead_letter_path::begin_send(const std::shared_ptr<in_flight>& attempt) noexcept
{
    std::lock_guard lock(mutex_);
    if (abandoned_) {
        return false;
    }
    in_flight_ = attempt;
    return true;
}

void dead_letter_path::end_send() noexcept
{
    std::lock_guard lock(mutex_);
    in_flight_.reset();
}

bool dead_letter_path::abandoned() const noexcept
{
    std::lock_guard lock(mutex_);
    return abandoned_;
}

// GCC 12 to 15 report -Wmismatched-new-delete at the end of a coroutine that awaits another one
// (see consume_operations.hpp; GCC PR middle-end/109224, a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

boost::asio::awaitable<letter_outcome> dead_letter_path::send_undecodable(const skipped_record& record)
{
    const std::string error = consumer_->last_error();
    co_return co_await deliver({.topic = consumer_->topic_name(),
                                .partition = record.partition,
                                .items = nullptr,
                                .count = 1,
                                .offsets = std::span<const std::uint64_t>(&record.offset, 1),
                                .payload = record.payload,
                                .attempts = 1,
                                .error = error},
                               false);
}

boost::asio::awaitable<letter_outcome> dead_letter_path::send_given_up(letter_contents contents)
{
    return deliver(contents, true);
}

// Produces the letters, awaits their acknowledgement (or `abandon`), counts them, then skips the
// record or commits the batch.
boost::asio::awaitable<letter_outcome> dead_letter_path::deliver(letter_contents contents, bool commit)
{
    const boost::asio::any_io_executor executor = co_await boost::asio::this_coro::executor;
    const auto attempt = std::make_shared<in_flight>();
    if (!begin_send(attempt)) {
        co_return letter_outcome{.stage = letter_stage::stopped, .error = {}, .thrown = nullptr};
    }
    letter_outcome outcome;
    try {
        letters_(contents, [attempt](boost::system::error_code produced) { attempt->finish(produced); });
    } catch (const std::bad_alloc&) {
        outcome.thrown = std::current_exception();
        attempt->finish(make_error_code(boost::asio::error::no_memory));
    } catch (...) {
        outcome.thrown = std::current_exception();  // the dead-letter topic's key selector, a copy
        attempt->finish(current_exception_code(errc::invalid_argument));
    }
    boost::system::error_code produced;
    auto token = boost::asio::redirect_error(boost::asio::use_awaitable, produced);
    wait_for_letters<in_flight> wait{attempt.get(), &executor};
    co_await boost::asio::async_initiate<decltype(token), void(boost::system::error_code)>(std::move(wait), token);
    end_send();
    if (produced == boost::asio::error::operation_aborted && abandoned()) {
        co_return letter_outcome{.stage = letter_stage::stopped, .error = produced, .thrown = nullptr};
    }
    if (produced) {
        outcome.stage = letter_stage::produce;
        outcome.error = produced;
        co_return outcome;
    }
    counters_->dead_letters.fetch_add(contents.count, std::memory_order_relaxed);
    boost::system::error_code stepped;
    auto step_token = boost::asio::redirect_error(boost::asio::use_awaitable, stepped);
    if (commit) {
        co_await boost::asio::async_initiate<decltype(step_token), void(boost::system::error_code)>(
            initiate_commit{}, step_token, consumer_);
    } else {
        (void)co_await boost::asio::async_initiate<decltype(step_token),
                                                   void(boost::system::error_code, skipped_record)>(
            initiate_skip{}, step_token, consumer_);
    }
    if (stepped) {
        co_return letter_outcome{.stage = letter_stage::step_past, .error = stepped, .thrown = nullptr};
    }
    co_return letter_outcome{};
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace bufferqueue::detail
