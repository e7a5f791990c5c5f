// Internal: the push loop behind each push consumer: pull, await the handler, retry, dead-letter.
#pragma once

#include "bufferqueue/detail/config.hpp"

#include "bufferqueue/batch.hpp"
#include "bufferqueue/consumer/detail/dead_letter_path.hpp"
#include "bufferqueue/detail/completion.hpp"
#include "bufferqueue/detail/group_counters.hpp"
#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/detail/spin_mutex.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/pull_consumer.hpp"
#include "bufferqueue/push/detail/backoff_timer.hpp"
#include "bufferqueue/push/detail/pause_for.hpp"
#include "bufferqueue/push/detail/push_dead_letters.hpp"
#include "bufferqueue/push/detail/push_registry.hpp"
#include "bufferqueue/push_consumer.hpp"
#include "bufferqueue/retry_backoff.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace bufferqueue::detail {

/// Calls a subscription's handler on one batch (a per-batch instance lives as long as that call):
/// the erased face of every kind of handler. The committer pointer is null under auto commit.
template <class T>
using push_invoker = std::function<boost::asio::awaitable<void>(batch<T>, committer*)>;

/// One loop of a subscription: pulls batches with its own pull consumer and awaits the handler on
/// each. Owned by the registry until it ends and by its own coroutine while it runs.
template <class T>
class push_loop final : public push_loop_base,
                        private commit_target,
                        public std::enable_shared_from_this<push_loop<T>> {
public:
    /// `dead_letters`: the path of `consumer`'s records to the dead-letter topic (manual commit,
    /// `max_attempts` > 0) - given-up batches and records that do not decode -, or null.
    push_loop(pull_consumer<T> consumer, push_invoker<T> invoker, bool manual_commit,
              boost::asio::any_io_executor executor, std::size_t max_attempts, retry_backoff backoff,
              std::shared_ptr<dead_letter_path> dead_letters, std::shared_ptr<group_counters> counters)
        : consumer_(std::move(consumer)), topic_(consumer_.topic()), group_(consumer_.group()),
          invoker_(std::move(invoker)), manual_commit_(manual_commit), executor_(std::move(executor)),
          max_attempts_(max_attempts), backoff_(backoff), counters_(std::move(counters)),
          dead_letters_(std::move(dead_letters))
    {
    }

    void spawn(const boost::asio::any_io_executor& executor, std::shared_ptr<push_registry> registry) override
    {
        boost::asio::co_spawn(executor, run(this->shared_from_this(), std::move(registry)), boost::asio::detached);
    }

    void request_stop() noexcept override
    {
        bool abort_pull = false;
        {
            std::lock_guard lock(mutex_);
            stop_requested_ = true;
            abort_pull = state_ == state::pulling;
            backoff_timer_.cancel();  // a failed batch's backoff wait ends now
        }
        if (dead_letters_) {
            dead_letters_->abandon();  // a dead-letter produce in flight is no longer awaited
        }
        // A loop busy in its handler is left to finish and then sees the request; only a waiting pull
        // is aborted. Closing the consumer is sticky, so a pull that begins after this fails at once.
        if (abort_pull) {
            consumer_.close();
        }
    }

    void cancel_backoff() noexcept override
    {
        std::lock_guard lock(mutex_);
        backoff_timer_.cancel();
    }

private:
    enum class state { idle, pulling, handling };

    // The loop. `self` and `registry` keep what it uses alive; the buffer_queue may be gone. An
    // exception that escapes `serve` (none is expected: every failure of a pull, a handler or a
    // dead-letter produce is handled there) is reported and ends this loop, never silently: the
    // consumer is closed and the registry learns of the end, so `stop()` completes.
    static boost::asio::awaitable<void> run(std::shared_ptr<push_loop> self, std::shared_ptr<push_registry> registry)
    {
        push_loop& loop = *self;
        std::exception_ptr escaped;
        try {
            co_await serve(self, registry);
        } catch (...) {
            escaped = std::current_exception();
        }
        if (escaped) {
            registry->report(loop.topic_, loop.group_, escaped, loop.ended_message(escaped));
        }
        {
            std::lock_guard lock(loop.mutex_);
            loop.state_ = state::idle;
        }
        loop.consumer_.close();
        registry->loop_ended();
    }

    // What the error sink receives when an exception ended the loop; empty when out of memory.
    std::string ended_message(const std::exception_ptr& escaped) const noexcept
    {
        try {
            return format_message("topic '{}' group '{}': this push loop stopped on an unexpected failure ({}); a "
                                  "batch it held under manual commit stays uncommitted",
                                  topic_, group_, exception_text(escaped));
        } catch (...) {
            return {};
        }
    }

    // Pulls and handles batches until stopped, closed, or a batch is given up for good.
    static boost::asio::awaitable<void> serve(std::shared_ptr<push_loop> self, std::shared_ptr<push_registry> registry)
    {
        push_loop& loop = *self;
        for (;;) {
            {
                std::lock_guard lock(loop.mutex_);
                if (loop.stop_requested_ || registry->is_closed()) {
                    break;
                }
                loop.state_ = state::pulling;
            }
            batch<T> delivered;
            bool failed = false;
            bool undecodable = false;
            try {
                delivered = co_await loop.consumer_.consume();
            } catch (const boost::system::system_error& failure) {
                if (failure.code() == errc::closed || failure.code() == boost::asio::error::operation_aborted) {
                    break;  // stopped, or the queue closed
                }
                registry->report(loop.topic_, loop.group_);
                failed = true;
                undecodable = failure.code() == errc::corrupt_data;
            }
            if (failed && undecodable && loop.dead_letters_ &&
                co_await dead_letter_undecodable(loop.letter_route(*registry))) {
                continue;  // dead-lettered and skipped: the records after it come next
            }
            if (failed) {
                // A pull that failed for another reason (a persistent topic's I/O error) is retried
                // after a pause, so a lasting failure neither spins nor floods the error sink.
                co_await pause_for(retry_pause);
                continue;
            }
            bool stopping = false;
            {
                std::lock_guard lock(loop.mutex_);
                loop.state_ = state::handling;
                stopping = loop.stop_requested_;
            }
            // A batch that arrived while stop() closed the consumer: under manual commit it stays
            // uncommitted for the next run; under auto commit it is already committed, so the handler
            // must still see it (the consumer, closed but alive, keeps the batch's storage).
            if (stopping && loop.manual_commit_) {
                break;
            }
            // Under manual commit a batch whose handler throws (without committing) is delivered again in
            // place, after the backoff, until it succeeds or `max_attempts` deliveries failed. The
            // success path adds nothing per batch: no allocation, no lock, no timer.
            std::size_t failed_attempts = 0;
            bool end_loop = false;
            for (;;) {
                std::exception_ptr failure;
                try {
                    if (loop.manual_commit_) {
                        loop.batch_committed_ = false;
                        committer commit(loop);
                        co_await loop.invoker_(delivered, &commit);
                    } else {
                        co_await loop.invoker_(delivered, nullptr);
                    }
                } catch (...) {
                    loop.counters_->failed_deliveries.fetch_add(1, std::memory_order_relaxed);
                    registry->report(loop.topic_, loop.group_);
                    if (loop.manual_commit_ && !loop.batch_committed_) {
                        failure = std::current_exception();
                    }
                }
                if (!failure || !loop.owns(delivered.partition())) {
                    // Succeeded; or the batch's partition was revoked (a rebalance gave it to another
                    // consumer, which gets the batch again from the group's last commit): retried
                    // here it could never be committed, and the loop would never let go of it.
                    break;
                }
                ++failed_attempts;
                if (loop.max_attempts_ != 0 && failed_attempts >= loop.max_attempts_) {
                    loop.counters_->given_up_batches.fetch_add(1, std::memory_order_relaxed);
                    if (loop.dead_letters_) {
                        // Committed only once its dead letters are acknowledged: never neither.
                        end_loop = !co_await loop.send_to_dead_letters(delivered, failed_attempts, failure, *registry);
                        break;
                    }
                    registry->report(loop.topic_, loop.group_, failure,
                                     loop.give_up_message(delivered, failed_attempts, failure));
                    end_loop = true;  // the batch stays uncommitted: never skipped, never lost
                    break;
                }
                if (!co_await loop.back_off(failed_attempts, *registry)) {
                    end_loop = true;  // stopped or closed while waiting; the batch stays uncommitted
                    break;
                }
            }
            if (end_loop) {
                break;
            }
        }
    }

    // Whether this loop's consumer still owns `partition` (a rebalance may have revoked it). True when
    // that cannot be told (out of memory): the batch is then retried as before.
    bool owns(std::size_t partition) const noexcept
    {
        try {
            const std::vector<std::size_t> owned = consumer_.partitions();
            return std::find(owned.begin(), owned.end(), partition) != owned.end();
        } catch (...) {
            return true;
        }
    }

    // Waits the backoff after `failed_attempts` failed deliveries; false when the loop must end
    // (stop requested, queue closed: `request_stop` cancels the wait, so that is prompt).
    boost::asio::awaitable<bool> back_off(std::size_t failed_attempts, push_registry& registry)
    {
        co_await backoff_timer_.wait(backoff_.delay_after(failed_attempts), mutex_,
                                     [this, &registry] { return stop_requested_ || registry.is_closed(); });
        std::lock_guard lock(mutex_);
        co_return !stop_requested_ && !registry.is_closed();
    }

    // The loop as its dead letters see it (push_dead_letters.hpp); only with a dead-letter topic.
    push_letter_route letter_route(push_registry& registry)
    {
        return {.path = *dead_letters_,
                .registry = registry,
                .topic = topic_,
                .group = group_,
                .back_off = [this, &registry](std::size_t tries) { return back_off(tries, registry); }};
    }

    // Produces one dead letter per item of the given-up batch and, once that produce is
    // acknowledged, commits the batch; true when the loop goes on with the next batch; false when
    // the loop was stopped meanwhile or the commit failed (see `dead_letter_batch`).
    boost::asio::awaitable<bool> send_to_dead_letters(const batch<T>& delivered, std::size_t attempts,
                                                      const std::exception_ptr& failure, push_registry& registry)
    {
        const std::string last = exception_text(failure);
        co_return co_await dead_letter_batch(letter_route(registry),
                                             {.topic = topic_,
                                              .partition = delivered.partition(),
                                              .items = delivered.data(),
                                              .count = delivered.size(),
                                              .offsets = delivered.offsets(),
                                              .payload = {},
                                              .attempts = attempts,
                                              .error = last},
                                             failure);
    }

    // What the error sink receives once when a batch is given up; empty when out of memory.
    std::string give_up_message(const batch<T>& delivered, std::size_t failed_attempts,
                                const std::exception_ptr& failure) const noexcept
    {
        try {
            return format_message("topic '{}' group '{}' partition {}: gave up on a batch of {} items (the group's "
                                  "first uncommitted ones) after {} failed attempts (max_attempts); the batch stays "
                                  "uncommitted and this push loop stopped; last error: {}",
                                  topic_, group_, delivered.partition(), delivered.size(), failed_attempts,
                                  exception_text(failure));
        } catch (...) {
            return {};
        }
    }

    void start_commit(std::unique_ptr<pending_completion<boost::system::error_code>> completion) override
    {
        consumer_.commit([this, completion = std::move(completion)](boost::system::error_code result) mutable {
            if (!result) {
                batch_committed_ = true;
            }
            completion->complete(result);
        });
    }

    bool batch_committed() const noexcept override { return batch_committed_; }

    const boost::asio::any_io_executor& executor() const noexcept override { return executor_; }

    static constexpr std::chrono::milliseconds retry_pause{100};

    pull_consumer<T> consumer_;
    const std::string topic_;
    const std::string group_;
    const push_invoker<T> invoker_;
    const bool manual_commit_;
    const boost::asio::any_io_executor executor_;
    const std::size_t max_attempts_;  // 0: unlimited
    const retry_backoff backoff_;
    const std::shared_ptr<group_counters> counters_;        // the group's, for its statistics
    const std::shared_ptr<dead_letter_path> dead_letters_;  // null without a dead-letter topic
    // Written by the loop between handler calls and by a commit's completion, which the handler awaits.
    bool batch_committed_ = false;

    spin_mutex mutex_;
    state state_ = state::idle;    // guarded by mutex_
    bool stop_requested_ = false;  // guarded by mutex_
    backoff_timer backoff_timer_;  // a backoff wait in progress, cancelled by request_stop; under mutex_
};

}  // namespace bufferqueue::detail
