// bufferqueue: the pull consumer handle, which delivers batches to coroutines.
#pragma once

#include "bufferqueue/batch.hpp"
#include "bufferqueue/consumer/detail/consume_operations.hpp"
#include "bufferqueue/consumer/detail/dead_letter_path.hpp"
#include "bufferqueue/dead_letter.hpp"
#include "bufferqueue/detail/completion.hpp"
#include "bufferqueue/detail/config.hpp"
#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/producer.hpp"
#include "bufferqueue/topic/detail/topic.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace bufferqueue {

/// One consumer of a consumer group: it owns a share of the topic's partitions (contiguous and fixed
/// on memory and exclusive mmap topics; on process-shared mmap and Kafka topics, and other backends
/// with a group protocol, assigned and revoked as members come and go; see docs/consumer-model.md)
/// and scans them as a ring (one pull per readable partition per rotation). Move-only; destroying
/// or closing it aborts a pending `consume()` with `boost::asio::error::operation_aborted`.
///
/// Thread-safety: one operation at a time per consumer. A `consume()` or `commit()` started while
/// another is pending on the same consumer fails with `errc::operation_in_progress`; different
/// consumers are fully independent. `close()` and the accessors may be called from any thread.
///
/// Commit: with `auto_commit` a pull commits what it returns before handing it out
/// (at-most-once). Without it, progress advances only on `commit()`, which commits the most recently
/// delivered batch; an uncommitted batch is delivered again when its partition's turn comes
/// (at-least-once).
template <class T>
class pull_consumer {
public:
    /// The type of the items this consumer delivers (`batch<T>`).
    using item_type = T;

    /// Made by `buffer_queue::create_pull_consumers`; `dead_letters` when the options name a
    /// dead-letter topic.
    explicit pull_consumer(std::shared_ptr<detail::consumer_base> state,
                           std::shared_ptr<detail::dead_letter_path> dead_letters = nullptr) noexcept
        : state_(std::move(state)), dead_letters_(std::move(dead_letters))
    {
    }

    /// Takes the source's place in its group; the source is left moved-from: its members throw
    /// `errc::invalid_argument` (`close()` does nothing). Never throws; not thread-safe with other
    /// calls on the source.
    pull_consumer(pull_consumer&&) noexcept = default;

    /// Closes this consumer (see `close`), then takes `other`'s place in its group; `other` is left
    /// moved-from. Self-assignment does nothing. Never throws; not thread-safe with other calls on
    /// either consumer.
    pull_consumer& operator=(pull_consumer&& other) noexcept
    {
        if (this != &other) {
            close();
            state_ = std::move(other.state_);
            dead_letters_ = std::move(other.dead_letters_);
        }
        return *this;
    }

    /// Closes the consumer (see `close`).
    ~pull_consumer() { close(); }

    /// Waits for the next batch of 1..batch_size items from one partition. Suspends without spinning
    /// or blocking a thread while every assigned partition is empty, and resumes on the handler's
    /// executor when any of them receives data. Signature
    /// `void(boost::system::error_code, bufferqueue::batch<T>)`; errors: `errc::closed` (consumer or
    /// queue closed before the call), `boost::asio::error::operation_aborted` (closed while waiting),
    /// `errc::operation_in_progress`, and for persistent topics `errc::io_error` from an auto-commit.
    /// Begins by releasing the previous batch of this consumer. `co_await consume()` (`use_awaitable`)
    /// on a memory topic without a dead-letter topic, after a batch that left more items behind,
    /// resumes the coroutine at once with the next batch (no round trip through the executor); at
    /// most 16 in a row on a thread, the 17th goes through the executor (docs/consumer-model.md).
    /// Allocation (memory topics): none when a batch is ready (Asio recycles the completion's memory
    /// on the io_context's threads). A consume that has to wait allocates once per wait, whatever the
    /// batch size: the type-erased completion that parks the handler (about 120 bytes for
    /// `use_awaitable`), plus a 16-byte cancellation hook with Boost 1.77 or later; posting the
    /// resumption from a producer thread that runs no io_context lets Asio allocate its operation.
    ///
    /// With `pull_consumer_options::dead_letter_topic`, a record that does not decode never reaches
    /// the caller: it becomes a `dead_letter<T>` (no item; its stored bytes, partition, offset and
    /// the decode error) produced to that topic, and once that produce is acknowledged the consumer
    /// steps past the record (`skip()`) and goes on consuming - so such a record is either in the
    /// dead-letter topic or still unread, never neither. If the dead-letter produce fails, the
    /// consume completes with the produce's error (`errc::queue_full`, `errc::io_error`, ...;
    /// `last_error()` names the dead-letter topic) and the record stays where it was, to be routed
    /// by the next consume. Should the step past it fail after the letter was acknowledged, the
    /// next consume sends it again (a duplicate letter, never a lost record). A frame that fails its
    /// checksum has no known end and still fails the consume with `errc::corrupt_data`. Such a
    /// consume runs as a coroutine on the queue's executor and completes on the handler's (it
    /// allocates per consume: the coroutine frame and its spawn); a
    /// `cancel()` or `close()` while the letter is produced takes effect once that produce ends: the
    /// record is stepped past if its letter was acknowledged, and the consume completes with
    /// `boost::asio::error::operation_aborted` instead of consuming on. A produce call that throws
    /// (the dead-letter topic's key selector) fails the consume like a failed produce: with the
    /// thrown `bufferqueue::error`'s code, else `errc::invalid_argument`, and its message in
    /// `last_error()`.
    template <class CompletionToken = default_completion_token>
    auto consume(CompletionToken&& token = default_completion_token())
    {
        if (dead_letters_) {
            return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, batch<T>)>(
                detail::initiate_routed_consume<T>{}, token, require_state(), dead_letters_);
        }
        using awaitable_token = detail::use_awaitable_token<std::decay_t<CompletionToken>>;
        if constexpr (awaitable_token::value) {
            const std::shared_ptr<detail::consumer_base>& state = require_state();
            if (detail::consume_inline(*state)) {
                return detail::awaited_consume<T, typename awaitable_token::executor>(state);
            }
        }
        return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, batch<T>)>(
            detail::initiate_consume<T>{}, token, require_state());
    }

    /// Takes the next batch if one is readable now; never waits. Throws `bufferqueue::error` where
    /// `consume()` would complete with an error. Does not route records that do not decode to a
    /// dead-letter topic (that needs an asynchronous produce): it throws `errc::corrupt_data` as
    /// without one; `unreadable_record()` and `skip()` step past such a record.
    std::optional<batch<T>> try_consume()
    {
        detail::consume_attempt attempt = require_state()->begin_consume(false);
        if (attempt.error) {
            throw error(
                static_cast<errc>(attempt.error.value()),
                detail::format_message("{}: {}", describe(),
                                       attempt.error_detail.empty() ? attempt.error.message() : attempt.error_detail));
        }
        if (!attempt.has_batch()) {
            return std::nullopt;
        }
        return detail::typed_batch<T>(attempt.delivered);
    }

    /// Commits the most recently delivered batch (manual commit). Signature
    /// `void(boost::system::error_code)`; errors: `errc::auto_commit_enabled`,
    /// `errc::nothing_to_commit` (no batch delivered since the last commit), `errc::closed`,
    /// `errc::operation_in_progress` (a `consume()` is pending), `errc::partition_revoked` (a group
    /// protocol revoked the batch's partition from this consumer since it was delivered: nothing is
    /// committed and the partition's next owner receives the records again - at-least-once).
    template <class CompletionToken = default_completion_token>
    auto commit(CompletionToken&& token = default_completion_token())
    {
        using awaitable_token = detail::use_awaitable_token<std::decay_t<CompletionToken>>;
        if constexpr (awaitable_token::value) {
            return detail::awaited_commit<typename awaitable_token::executor>(require_state());
        } else {
            return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
                detail::initiate_commit{}, token, require_state());
        }
    }

    /// Steps past the record that made this consumer's last `consume()` (or `try_consume()`) fail
    /// with `errc::corrupt_data` because its payload does not decode: commits the group's position
    /// just after that record, so it is never delivered and the records after it are, and
    /// completes with where it was. The record stays in the log (`bufferqueue-inspect` shows it)
    /// until retention removes it. Works under auto and manual commit. Signature
    /// `void(boost::system::error_code, bufferqueue::skipped_record)`; errors:
    /// `errc::nothing_to_skip` (the last consume did not fail on an undecodable record: it
    /// succeeded or failed otherwise; an mmap record whose frame fails its checksum has no known
    /// end; memory topics store no encoded records), `errc::partition_revoked` (its partition went to another
    /// consumer since, which meets the record itself), `errc::closed`, `errc::operation_in_progress`,
    /// and the commit's `errc::io_error`. Runs where blocking is allowed, like `commit()`.
    template <class CompletionToken = default_completion_token>
    auto skip(CompletionToken&& token = default_completion_token())
    {
        using awaitable_token = detail::use_awaitable_token<std::decay_t<CompletionToken>>;
        if constexpr (awaitable_token::value) {
            return detail::awaited_skip<typename awaitable_token::executor>(require_state());
        } else {
            return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, skipped_record)>(
                detail::initiate_skip{}, token, require_state());
        }
    }

    /// The record `skip()` would step past now - partition, offsets and a copy of its stored bytes -
    /// without committing anything: nothing when `skip()` would fail with `errc::nothing_to_skip`
    /// or `errc::partition_revoked`. Lets a caller keep the bytes (a dead-letter topic, a file)
    /// before skipping. Never waits; allocates the copy. Throws `bufferqueue::error`
    /// `errc::closed`, `errc::operation_in_progress`.
    std::optional<skipped_record> unreadable_record()
    {
        skipped_record record;
        const boost::system::error_code result = require_state()->unreadable(record);
        if (result == errc::nothing_to_skip || result == errc::partition_revoked) {
            return std::nullopt;
        }
        if (result) {
            throw error(static_cast<errc>(result.value()),
                        detail::format_message("{}: {}", describe(), result.message()));
        }
        return record;
    }

    /// Cancels without closing: a `consume()` waiting for data completes with
    /// `boost::asio::error::operation_aborted` (posted to its handler's executor, never run inside
    /// this call) without having pulled anything, so nothing is skipped or delivered twice. A
    /// consume still scanning when `cancel()` runs is aborted when it would wait or when its
    /// wake-up resumes it; one that finds data first completes normally. With no consume in progress
    /// it does nothing (it is not remembered for the next one; on a persistent topic a `consume()`
    /// whose first pull has not started on the I/O pool yet is not in progress). The consumer stays
    /// open: the next `consume()` works as usual. Works on every Boost version (Boost 1.77 and later
    /// also cancel per operation through the handler's cancellation slot). Thread-safe, never
    /// throws, allocates nothing.
    void cancel() noexcept
    {
        if (dead_letters_) {
            dead_letters_->request_cancel();
        }
        if (state_) {
            state_->cancel();
        }
    }

    /// Aborts a pending `consume()` and rejects later calls with `errc::closed`; the group keeps its
    /// progress and its partitions. Once every consumer of the group is closed, the group may be
    /// created again (resuming from its committed position) or removed. A `close()` that races with
    /// a consume in progress on another thread takes that effect when the consume ends, or - if it
    /// still handed out a batch - at the next `close()` or the destruction. Idempotent,
    /// thread-safe, never throws.
    void close() noexcept
    {
        if (dead_letters_) {
            dead_letters_->request_cancel();
        }
        if (state_) {
            state_->close();
        }
    }

    /// What made this consumer's latest `consume()`, `try_consume()` or failed `commit()` fail, as
    /// text naming the topic and group and, when the storage reported it, the partition, file and
    /// offset ("pull consumer of topic 'events' group 'g': topic 'events' partition 0: cannot decode
    /// the record at offset 4136 of .../00000000000000000000.log: ..."); empty after a consume that
    /// succeeded (delivered a batch, or found nothing). An awaited `consume()` reports only the code,
    /// so read this in the handler (or after the `co_await` threw). Calls rejected at once with
    /// `errc::closed` or `errc::operation_in_progress` leave it unchanged. Thread-safe (takes a short
    /// lock); allocates the copy.
    /// With a dead-letter topic, a consume that failed to produce a letter reports that here.
    std::string last_error() const
    {
        if (dead_letters_) {
            std::string routing = dead_letters_->failure();
            if (!routing.empty()) {
                return routing;
            }
        }
        return require_state()->last_error();
    }

    /// The topic read.
    const std::string& topic() const { return require_state()->topic_name(); }
    /// The consumer group.
    const std::string& group() const { return require_state()->group_name(); }
    /// The partitions this consumer owns now, ascending: a snapshot, returned by value. Without a
    /// group protocol reassigning partitions (process-shared mmap, Kafka) it is the contiguous share
    /// given at creation and never changes; with one, a `consume()` already running may still be
    /// finishing a scan of the previous set, and the share may arrive after creation (a Kafka
    /// group's rebalance, live members of a process-shared topic's group letting go): `consume()`
    /// waits for it, a loop over `partitions()` sees it arrive (docs/consumer-model.md, "Waiting
    /// for the assignment"). Thread-safe (takes a short lock); allocates the copy.
    std::vector<std::size_t> partitions() const { return require_state()->partitions(); }
    /// Items this consumer's partitions hold that its group has not committed yet, summed over the
    /// partitions it owns now (`end - committed` of each, in items, on every backend): a snapshot,
    /// read without a lock on the produce path. Thread-safe (a short lock for the partition set);
    /// never waits, allocates nothing. Throws `bufferqueue::error` `errc::invalid_argument` on a
    /// moved-from consumer, as every member does.
    std::uint64_t lag() const { return require_state()->lag(); }

private:
    const std::shared_ptr<detail::consumer_base>& require_state() const
    {
        if (!state_) {
            throw error(errc::invalid_argument, "pull_consumer: used after it was moved from");
        }
        return state_;
    }

    std::string describe() const { return detail::describe_pull_consumer(*state_); }

    std::shared_ptr<detail::consumer_base> state_;
    std::shared_ptr<detail::dead_letter_path> dead_letters_;  // null without a dead-letter topic
};

}  // namespace bufferqueue
