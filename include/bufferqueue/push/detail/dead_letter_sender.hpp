// Internal: what a push loop sends to its subscription's dead-letter topic, and how it waits for
// that produce to be acknowledged before the loop commits or skips past the records.
#pragma once

#include "bufferqueue/detail/config.hpp"

#include "bufferqueue/batch.hpp"
#include "bufferqueue/consumer/detail/dead_letter_route.hpp"
#include "bufferqueue/dead_letter.hpp"
#include "bufferqueue/detail/completion.hpp"
#include "bufferqueue/detail/group_counters.hpp"
#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/detail/spin_mutex.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/producer.hpp"
#include "bufferqueue/push/detail/push_registry.hpp"
#include "bufferqueue/skipped_record.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace bufferqueue::detail {

/// The message of `failure`; empty when out of memory. Never throws.
inline std::string exception_text(const std::exception_ptr& failure) noexcept
{
    try {
        try {
            std::rethrow_exception(failure);
        } catch (...) {
            return exception_message();
        }
    } catch (...) {
        return {};
    }
}

/// One push loop's dead-letter topic: builds the letters and produces them until acknowledged.
/// Used by the loop's coroutine only (not thread-safe); allocates the letters.
template <class T>
class dead_letter_sender {
public:
    /// `producer` writes to the dead-letter topic; `topic` and `group` are the loop's, whose
    /// `counters` count the letters acknowledged.
    dead_letter_sender(producer<dead_letter<T>> producer, std::string topic, std::string group,
                       std::shared_ptr<group_counters> counters)
        : producer_(std::move(producer)), topic_(std::move(topic)), group_(std::move(group)),
          counters_(std::move(counters))
    {
    }

    /// One letter per item of `delivered`, which failed `attempts` times, the last with `error`.
    std::vector<dead_letter<T>> letters_for(const batch<T>& delivered, std::size_t attempts,
                                            const std::string& error) const
    {
        std::vector<dead_letter<T>> letters;
        letters.reserve(delivered.size());
        const std::span<const std::uint64_t> offsets = delivered.offsets();
        for (std::size_t index = 0; index < delivered.size(); ++index) {
            letters.push_back({.item = delivered[index],
                               .payload = {},
                               .topic = topic_,
                               .partition = delivered.partition(),
                               .offset = offsets.empty() ? std::nullopt : std::optional<std::uint64_t>(offsets[index]),
                               .attempts = attempts,
                               .error = error});
        }
        return letters;
    }

    /// The letter of a record that did not decode: its stored bytes, no item, one failed attempt.
    dead_letter<T> letter_for(const skipped_record& record, std::string error) const
    {
        return undecodable_letter<T>(topic_, record, std::move(error));
    }

    /// Produces `letters` until the produce completes without error; true then. A failure - an
    /// error code, or an exception the produce call throws (the dead-letter topic's key selector,
    /// a copy) - is reported to `registry` (prefixed by `where`, naming what failed) and tried again
    /// once `back_off(tries)` - an awaitable<bool>, false when the loop must end - allows; false
    /// when it does not, and false at once after `abandon()`: a produce still in flight is no longer
    /// awaited then (reported; its letters may still reach the topic). Allocates per attempt.
    template <class BackOff>
    boost::asio::awaitable<bool> produce(std::vector<dead_letter<T>> letters, const std::string& where,
                                         push_registry& registry, BackOff back_off)
    {
        // Shared with each produce's completion, which may run after an abandoned wait ended.
        const auto owned = std::make_shared<const std::vector<dead_letter<T>>>(std::move(letters));
        const boost::asio::any_io_executor executor = co_await boost::asio::this_coro::executor;
        for (std::size_t tries = 1;; ++tries) {
            const auto attempt = std::make_shared<letters_in_flight>();
            if (!begin(attempt)) {
                co_return false;  // abandoned: stop() was requested
            }
            boost::system::error_code produced;
            std::exception_ptr thrown;
            try {
                producer_.produce(std::span<const dead_letter<T>>(*owned),
                                  [attempt, owned](boost::system::error_code result) { attempt->finish(result); });
                auto token = boost::asio::redirect_error(boost::asio::use_awaitable, produced);
                co_await boost::asio::async_initiate<decltype(token), void(boost::system::error_code)>(
                    [&attempt, &executor](auto handler) {
                        attempt->wait(make_pending_completion<boost::system::error_code>(std::move(handler), executor));
                    },
                    token);
            } catch (...) {
                thrown = std::current_exception();  // the produce call itself threw
            }
            end();
            if (!produced && !thrown) {
                counters_->dead_letters.fetch_add(owned->size(), std::memory_order_relaxed);
                co_return true;
            }
            if (produced == boost::asio::error::operation_aborted && is_abandoned()) {
                registry.report(topic_, group_, std::make_exception_ptr(boost::system::system_error(produced)),
                                format_message("{}; stop() ended the wait for its dead letters before they were "
                                               "acknowledged: the records stay uncommitted and the next run delivers "
                                               "them again (letters that still reach the topic are then sent twice)",
                                               where));
                co_return false;
            }
            if (!thrown) {
                thrown = std::make_exception_ptr(boost::system::system_error(produced));
            }
            registry.report(topic_, group_, thrown,
                            format_message("{}; producing its dead letters failed ({}), tried again after the "
                                           "backoff; the records stay uncommitted",
                                           where, produced ? produced.message() : exception_text(thrown)));
            if (!co_await back_off(tries)) {
                co_return false;
            }
        }
    }

    /// The loop is stopping: a produce in flight is no longer awaited (`produce` returns false) and
    /// no other begins. Final; any thread; never throws, allocates nothing.
    void abandon() noexcept
    {
        std::shared_ptr<letters_in_flight> pending;
        {
            std::lock_guard lock(mutex_);
            abandoned_ = true;
            pending = std::move(in_flight_);
        }
        if (pending) {
            pending->finish(boost::asio::error::operation_aborted);
        }
    }

private:
    /// One produce of letters: the first of its completion and `abandon()` resumes the waiting
    /// loop; the other finds nothing to do. Thread-safe.
    class letters_in_flight {
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

    // Makes `attempt` the produce `abandon` ends; false once abandoned.
    bool begin(const std::shared_ptr<letters_in_flight>& attempt)
    {
        std::lock_guard lock(mutex_);
        if (abandoned_) {
            return false;
        }
        in_flight_ = attempt;
        return true;
    }

    void end() noexcept
    {
        std::lock_guard lock(mutex_);
        in_flight_.reset();
    }

    bool is_abandoned() noexcept
    {
        std::lock_guard lock(mutex_);
        return abandoned_;
    }

    producer<dead_letter<T>> producer_;
    const std::string topic_;
    const std::string group_;
    const std::shared_ptr<group_counters> counters_;
    spin_mutex mutex_;
    bool abandoned_ = false;                        // guarded by mutex_; set by abandon()
    std::shared_ptr<letters_in_flight> in_flight_;  // guarded by mutex_; the produce awaited now
};

}  // namespace bufferqueue::detail
