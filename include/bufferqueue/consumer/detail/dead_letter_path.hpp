// Internal: the one dead-letter path of pull and push consumers - produce the letters of what a
// consumer gives up on, await their acknowledgement, then step past the records (skip one that did
// not decode, commit a batch whose handler failed `max_attempts` times). Compiled once
// (src/consumer/dead_letter_path.cpp) and item-type free: the typed edge is the `letter_producer`
// the registry hands over when the consumer is made, which the topic of `dead_letter<T>` supplied
// when it was registered (topic/detail/letter_producer.hpp).
#pragma once

#include "bufferqueue/detail/config.hpp"

#include "bufferqueue/consumer/detail/consumer_base.hpp"
#include "bufferqueue/consumer/detail/last_error.hpp"
#include "bufferqueue/detail/group_counters.hpp"
#include "bufferqueue/detail/spin_mutex.hpp"
#include "bufferqueue/skipped_record.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace bufferqueue::detail {

/// What the letters of one delivery say, whatever the item type: one letter per item of `items`
/// (`count` contiguous items of the consumer's `T`, which the handler failed on `attempts` times),
/// or - `items` null - the one letter of a record that did not decode (its stored bytes in
/// `payload`). A view: valid during the `letter_producer` call only.
struct letter_contents {
    std::string_view topic;                    // the topic the records were read from
    std::size_t partition = 0;                 // ... and their partition
    const void* items = nullptr;               // `count` items of T, or null (a record that did not decode)
    std::size_t count = 1;                     // letters to produce
    std::span<const std::uint64_t> offsets{};  // each letter's offset, or empty (memory topics)
    std::span<const std::byte> payload{};      // the stored bytes of a record that did not decode
    std::size_t attempts = 1;                  // failed deliveries
    std::string_view error;                    // the last failure's message
};

/// How a letters' produce reports back: called once, with no error when the dead-letter topic
/// acknowledged every letter, else with the produce's error; never inside the produce call.
using letter_acknowledgement = std::function<void(boost::system::error_code)>;

/// Makes the `dead_letter<T>`s that `letter_contents` describes and produces them, as one produce,
/// into the dead-letter topic (as `producer<dead_letter<T>>::produce` does: routed by its key,
/// waiting for room on a bounded topic), the acknowledgement receiving its result. Throws what the
/// produce call throws (the topic's key selector, a copy, `std::bad_alloc`); the acknowledgement is
/// then not called. Thread-safe; made by the topic layer (`make_letter_producer`).
using letter_producer = std::function<void(const letter_contents&, letter_acknowledgement)>;

/// Where a delivery through a `dead_letter_path` ended.
enum class letter_stage {
    done,       ///< the letters were acknowledged and the records stepped past
    produce,    ///< the letters' produce failed (or its call threw): nothing stepped past
    step_past,  ///< acknowledged, but the skip or commit after it failed
    stopped,    ///< `abandon()`: not started, or its produce no longer awaited (`error` set then)
};

/// The outcome of one delivery: its stage, the error of a failed one, and what the produce call
/// threw when it threw (its code is then in `error`: a `bufferqueue::error`'s own,
/// `boost::asio::error::no_memory` for `std::bad_alloc`, else `errc::invalid_argument`).
struct letter_outcome {
    letter_stage stage = letter_stage::done;
    boost::system::error_code error{};
    std::exception_ptr thrown{};
};

/// One consumer's path to its dead-letter topic, for pull consumers (records that do not decode,
/// `pull_consumer_options::dead_letter_topic`) and push loops (those, and batches given up after
/// `max_attempts`): produces the letters, awaits the acknowledgement, counts the letters in the
/// group's statistics, then skips or commits on the consumer. Holds the one set of flags of a
/// delivery: the claim of a pull consumer's routed consume, its cancellation, and the push loop's
/// final `abandon`. One delivery at a time (its consumer's coroutine); the flags are thread-safe as
/// documented per member. Allocates per delivery (its coroutine frame and the letters).
class dead_letter_path {
public:
    /// `consumer` is the consumer the records come from; `letters` writes to the topic named
    /// `dead_letter_topic`; `counters` are the group's.
    dead_letter_path(std::shared_ptr<consumer_base> consumer, letter_producer letters, std::string dead_letter_topic,
                     std::shared_ptr<group_counters> counters);
    dead_letter_path(const dead_letter_path&) = delete;
    dead_letter_path& operator=(const dead_letter_path&) = delete;
    ~dead_letter_path();

    /// Fills `record` with the record the consumer's last consume failed on because it does not
    /// decode (see `consumer_base::unreadable`); false when there is none the storage can step past
    /// (or it cannot be told now: out of memory). For the consumer's own coroutine; allocates the
    /// bytes' copy; never throws.
    bool undecodable_record(skipped_record& record) const noexcept;

    /// Sends the letter of `record`, which the consumer's last consume could not decode (no item, its
    /// stored bytes, one failed attempt, the consumer's `last_error()`), and skips it once the letter
    /// is acknowledged. `record` must outlive the await. Runs on the awaiting coroutine's executor.
    boost::asio::awaitable<letter_outcome> send_undecodable(const skipped_record& record);
    /// Sends one letter per item `contents` describes and commits the consumer's delivered batch once
    /// they are acknowledged. The items must outlive the await.
    boost::asio::awaitable<letter_outcome> send_given_up(letter_contents contents);

    /// Claims the consumer's routed consume, forgetting an earlier `request_cancel`; false while
    /// another one runs. Thread-safe.
    bool try_begin() noexcept;
    /// Ends the claim of `try_begin`. Thread-safe.
    void end() noexcept;

    /// `cancel()` or `close()` of a pull consumer: its routed consume in progress ends with
    /// `operation_aborted` once the letter it produces is acknowledged and stepped past, instead of
    /// consuming on. Not remembered for a later consume. Thread-safe, never throws, allocates nothing.
    void request_cancel() noexcept;
    /// Whether `request_cancel` ran since the routed consume in progress began. Thread-safe.
    bool cancel_requested() const noexcept;

    /// A push loop stops: a produce in flight is no longer awaited (its delivery ends `stopped` with
    /// `operation_aborted`; its letters may still reach the topic) and no delivery begins again.
    /// Final; any thread; never throws, allocates nothing.
    void abandon() noexcept;

    /// The dead-letter topic's name.
    const std::string& dead_letter_topic() const noexcept { return dead_letter_topic_; }

    /// Records how a pull consumer's routed consume ended (nothing, or `error` with `detail`) for
    /// `pull_consumer::last_error`; never throws. `describe()` names the consumer; it is called
    /// only when `error` is set.
    template <class Describe>
    void record(const boost::system::error_code& error, const std::string& detail, Describe&& describe) noexcept
    {
        failure_.record(error, detail, describe);
    }
    /// What the latest routing failed on; empty when it did not. Thread-safe; allocates the copy.
    std::string failure() const { return failure_.text(); }

private:
    class in_flight;  // one produce of letters, ended by its acknowledgement or by `abandon`

    boost::asio::awaitable<letter_outcome> deliver(letter_contents contents, bool commit);
    bool begin_send(const std::shared_ptr<in_flight>& attempt) noexcept;
    void end_send() noexcept;
    bool abandoned() const noexcept;

    const std::shared_ptr<consumer_base> consumer_;
    const letter_producer letters_;
    const std::string dead_letter_topic_;
    const std::shared_ptr<group_counters> counters_;
    mutable spin_mutex mutex_;
    bool busy_ = false;                     // guarded by mutex_; a routed consume holds the claim
    bool cancel_requested_ = false;         // guarded by mutex_; cleared by try_begin
    bool abandoned_ = false;                // guarded by mutex_; set for good by abandon
    std::shared_ptr<in_flight> in_flight_;  // guarded by mutex_; the produce awaited now
    last_error_record failure_;
};

}  // namespace bufferqueue::detail
