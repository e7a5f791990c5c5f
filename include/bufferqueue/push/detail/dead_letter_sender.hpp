// Internal: what a push loop sends to its subscription's dead-letter topic, and how it waits for
// that produce to be acknowledged before the loop commits or skips past the records.
#pragma once

#include "bufferqueue/detail/config.hpp"

#include "bufferqueue/batch.hpp"
#include "bufferqueue/consumer/detail/dead_letter_route.hpp"
#include "bufferqueue/dead_letter.hpp"
#include "bufferqueue/detail/group_counters.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/producer.hpp"
#include "bufferqueue/push/detail/push_registry.hpp"
#include "bufferqueue/skipped_record.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
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
        return dead_letter_route<T>::letter_for(topic_, record, std::move(error));
    }

    /// Produces `letters` until the produce completes without error; true then. A failure is
    /// reported to `registry` (prefixed by `where`) and tried again once `back_off(tries)` - an
    /// awaitable<bool>, false when the loop must end - allows; false when it does not.
    template <class BackOff>
    boost::asio::awaitable<bool> produce(const std::vector<dead_letter<T>>& letters, const std::string& where,
                                         push_registry& registry, BackOff back_off)
    {
        for (std::size_t tries = 1;; ++tries) {
            boost::system::error_code produced;
            co_await producer_.produce(std::span<const dead_letter<T>>(letters),
                                       boost::asio::redirect_error(boost::asio::use_awaitable, produced));
            if (!produced) {
                counters_->dead_letters.fetch_add(letters.size(), std::memory_order_relaxed);
                co_return true;
            }
            registry.report(topic_, group_, std::make_exception_ptr(boost::system::system_error(produced)),
                            where + "; producing its dead letters failed (" + produced.message() +
                                "), tried again after the backoff; the records stay uncommitted");
            if (!co_await back_off(tries)) {
                co_return false;
            }
        }
    }

private:
    producer<dead_letter<T>> producer_;
    const std::string topic_;
    const std::string group_;
    const std::shared_ptr<group_counters> counters_;
};

}  // namespace bufferqueue::detail
