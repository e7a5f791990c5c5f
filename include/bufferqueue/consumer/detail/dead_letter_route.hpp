// Internal: a pull consumer's dead-letter topic (`pull_consumer_options::dead_letter_topic`) - where
// its records that do not decode go before the consumer steps past them.
#pragma once

#include "bufferqueue/detail/config.hpp"

#include "bufferqueue/consumer/detail/last_error.hpp"
#include "bufferqueue/dead_letter.hpp"
#include "bufferqueue/detail/group_counters.hpp"
#include "bufferqueue/skipped_record.hpp"

#include <boost/system/error_code.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace bufferqueue::detail {

/// The letter of a record of `topic` that did not decode with `error`: its stored bytes, no item,
/// one failed attempt. Allocates.
template <class T>
dead_letter<T> undecodable_letter(const std::string& topic, const skipped_record& record, std::string error)
{
    return {.item = std::nullopt,
            .payload = record.payload,
            .topic = topic,
            .partition = record.partition,
            .offset = record.offset,
            .attempts = 1,
            .error = std::move(error)};
}

/// How a letter's produce reports back: called once, with no error when the dead-letter topic
/// acknowledged the letter, else with the produce's error.
using letter_acknowledgement = std::function<void(boost::system::error_code)>;

/// Where a route's letters go: the dead-letter topic, above this layer, supplies it
/// (`topic_dead_letter_sink`, topic/detail/topic_dead_letter_sink.hpp). Item-type free, so the routed
/// consume is compiled once (src/consumer/routed_consume.cpp).
class dead_letter_sink {
public:
    dead_letter_sink(const dead_letter_sink&) = delete;
    dead_letter_sink& operator=(const dead_letter_sink&) = delete;
    virtual ~dead_letter_sink() = default;

    /// Starts producing the letter of `record` of `topic`, which did not decode with `error` (see
    /// `undecodable_letter`); `acknowledge` receives the produce's result, never inside this call.
    /// Throws what the produce call throws (a key selector, `std::bad_alloc`); `acknowledge` is
    /// then not called. One call at a time per sink (the route's claiming consume).
    virtual void send(const std::string& topic, const skipped_record& record, std::string error,
                      letter_acknowledgement acknowledge) = 0;

protected:
    dead_letter_sink() = default;
};

/// One pull consumer's route to its dead-letter topic: where letters go, the group's counters, and
/// the consumer's routed `consume()` in progress. Thread-safe as documented per member.
class dead_letter_route {
public:
    /// `letters` writes to the topic named `dead_letter_topic`; `counters` are the group's.
    dead_letter_route(std::shared_ptr<dead_letter_sink> letters, std::string dead_letter_topic,
                      std::shared_ptr<group_counters> counters)
        : letters_(std::move(letters)), dead_letter_topic_(std::move(dead_letter_topic)), counters_(std::move(counters))
    {
    }

    /// Claims the consumer's routed consume, forgetting an earlier `request_cancel`; false while
    /// another one runs. Thread-safe.
    bool try_begin() noexcept
    {
        if (busy_.exchange(true, std::memory_order_acq_rel)) {
            return false;
        }
        cancel_requested_.store(false, std::memory_order_release);
        return true;
    }
    /// Ends the claim of `try_begin`. Thread-safe.
    void end() noexcept { busy_.store(false, std::memory_order_release); }

    /// `cancel()` or `close()` of the consumer: the routed consume in progress ends with
    /// `operation_aborted` once the letter it produces is acknowledged and stepped past, instead of
    /// consuming on. Not remembered for a later consume. Thread-safe, lock-free.
    void request_cancel() noexcept { cancel_requested_.store(true, std::memory_order_release); }
    /// Whether `request_cancel` ran since the routed consume in progress began. Thread-safe.
    bool cancel_requested() const noexcept { return cancel_requested_.load(std::memory_order_acquire); }

    /// Where letters go (for the claiming consume only).
    dead_letter_sink& letters() noexcept { return *letters_; }
    const std::string& dead_letter_topic() const noexcept { return dead_letter_topic_; }

    /// Counts one acknowledged letter in the group's statistics. Thread-safe, lock-free.
    void count_letter() noexcept { counters_->dead_letters.fetch_add(1, std::memory_order_relaxed); }

    /// Records how the claiming consume's routing ended (nothing, or `error` with `detail`) for
    /// `pull_consumer::last_error`. For the claiming consume only; never throws.
    /// `describe()` names the consumer; it is called only when `error` is set.
    template <class Describe>
    void record(const boost::system::error_code& error, const std::string& detail, Describe&& describe) noexcept
    {
        failure_.record(error, detail, describe);
    }
    /// What the latest routing failed on; empty when it did not. Thread-safe; allocates the copy.
    std::string failure() const { return failure_.text(); }

private:
    const std::shared_ptr<dead_letter_sink> letters_;
    const std::string dead_letter_topic_;
    const std::shared_ptr<group_counters> counters_;
    std::atomic<bool> busy_{false};              // a routed consume is in progress
    std::atomic<bool> cancel_requested_{false};  // cleared by try_begin
    last_error_record failure_;
};

}  // namespace bufferqueue::detail
