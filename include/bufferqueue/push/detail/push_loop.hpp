// Internal: the push loops behind push consumers and the state they share with the registry.
#pragma once

#include "bufferqueue/detail/config.hpp"

#include "bufferqueue/batch.hpp"
#include "bufferqueue/detail/completion.hpp"
#include "bufferqueue/detail/spin_mutex.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/pull_consumer.hpp"
#include "bufferqueue/push_consumer.hpp"
#include "bufferqueue/retry_backoff.hpp"
#include "bufferqueue/topic/detail/topic.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace bufferqueue::detail {

class push_registry;

/// One push loop, whatever its item type.
class push_loop_base {
public:
    push_loop_base(const push_loop_base&) = delete;
    push_loop_base& operator=(const push_loop_base&) = delete;
    virtual ~push_loop_base() = default;

    /// Spawns the loop on `executor`; it reports its end to `registry`.
    virtual void spawn(const boost::asio::any_io_executor& executor, std::shared_ptr<push_registry> registry) = 0;
    /// Stops pulling: aborts a waiting pull; a running handler finishes first. Thread-safe.
    virtual void request_stop() noexcept = 0;
    /// Ends a retry backoff wait now (the queue closes). Thread-safe; runs no handler inline.
    virtual void cancel_backoff() noexcept = 0;

protected:
    push_loop_base() = default;
};

/// The push consumers of one queue: their loops, start/stop state and the error sink. Shared by the
/// registry and every running loop, so loops never reference the `buffer_queue`. Thread-safe.
class push_registry : public std::enable_shared_from_this<push_registry> {
public:
    /// Adds loops of one subscription, all or none. Throws `errc::invalid_argument` after `start()`,
    /// `errc::closed` after `stop()` or `close()`.
    void add(std::vector<std::shared_ptr<push_loop_base>> loops, const std::string& topic, const std::string& group);
    /// Throws like `add` when nothing may be added now.
    void require_registering(const std::string& topic, const std::string& group) const;
    /// Spawns every loop; idempotent while started. Throws `errc::closed` after `stop()`/`close()`.
    void start(const boost::asio::any_io_executor& executor);
    /// Ends pulling; completes `completion` once every loop has ended.
    void stop(std::unique_ptr<pending_completion<>> completion);
    /// The queue closes: no more starts; loops end on their own as their pulls fail.
    void close() noexcept;
    /// Called by each loop as its last action.
    void loop_ended() noexcept;
    /// True once the queue closed (or is being destroyed): loops must not pull again, since a
    /// persistent topic's pull would go to the queue's I/O threads.
    bool is_closed() const noexcept { return closed_.load(std::memory_order_acquire); }

    void set_error_sink(push_error_sink sink);
    /// Reports the exception being handled (call inside a catch block). Never throws.
    void report(const std::string& topic, const std::string& group) noexcept;
    /// Reports `exception` with `message` (a given-up batch). Never throws.
    void report(const std::string& topic, const std::string& group, const std::exception_ptr& exception,
                const std::string& message) noexcept;

private:
    enum class phase { registering, started, stopped };

    mutable std::mutex mutex_;  // registration, start and stop only, never per batch
    phase phase_ = phase::registering;
    std::vector<std::shared_ptr<push_loop_base>> loops_;
    std::size_t running_ = 0;
    std::vector<std::unique_ptr<pending_completion<>>> stop_waiters_;
    std::shared_ptr<const push_error_sink> sink_;  // null: the default sink
    std::atomic<bool> closed_{false};
};

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
    push_loop(pull_consumer<T> consumer, push_invoker<T> invoker, bool manual_commit,
              boost::asio::any_io_executor executor, std::size_t max_attempts, retry_backoff backoff)
        : consumer_(std::move(consumer)), topic_(consumer_.topic()), group_(consumer_.group()),
          invoker_(std::move(invoker)), manual_commit_(manual_commit), executor_(std::move(executor)),
          max_attempts_(max_attempts), backoff_(backoff)
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
            if (backoff_timer_ != nullptr) {
                backoff_timer_->cancel();  // a failed batch's backoff wait ends now
            }
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
        if (backoff_timer_ != nullptr) {
            backoff_timer_->cancel();
        }
    }

    /// The delay before the attempt after `failed_attempts` failed ones: `initial` grown by
    /// `multiplier` per further attempt, at most `maximum`.
    static std::chrono::milliseconds backoff_delay(const retry_backoff& backoff, std::size_t failed_attempts) noexcept
    {
        if (backoff.initial.count() <= 0) {
            return std::chrono::milliseconds(0);
        }
        const double grown = static_cast<double>(backoff.initial.count()) *
                             std::pow(backoff.multiplier, static_cast<double>(failed_attempts - 1));
        const auto maximum = static_cast<double>(backoff.maximum.count());
        if (!(grown < maximum)) {  // also an infinite product
            return backoff.maximum;
        }
        return std::chrono::milliseconds(static_cast<std::chrono::milliseconds::rep>(grown));
    }

private:
    enum class state { idle, pulling, handling };

    // The loop. `self` and `registry` keep what it uses alive; the buffer_queue may be gone.
    static boost::asio::awaitable<void> run(std::shared_ptr<push_loop> self, std::shared_ptr<push_registry> registry)
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
            try {
                delivered = co_await loop.consumer_.consume();
            } catch (const boost::system::system_error& failure) {
                if (failure.code() == errc::closed || failure.code() == boost::asio::error::operation_aborted) {
                    break;  // stopped, or the queue closed
                }
                registry->report(loop.topic_, loop.group_);
                failed = true;
            }
            if (failed) {
                // A pull that failed for another reason (a persistent topic's I/O error) is retried
                // after a pause, so a lasting failure neither spins nor floods the error sink.
                boost::asio::steady_timer pause(co_await boost::asio::this_coro::executor, retry_pause);
                co_await pause.async_wait(boost::asio::use_awaitable);
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
                    registry->report(loop.topic_, loop.group_);
                    if (loop.manual_commit_ && !loop.batch_committed_) {
                        failure = std::current_exception();
                    }
                }
                if (!failure) {
                    break;
                }
                ++failed_attempts;
                if (loop.max_attempts_ != 0 && failed_attempts >= loop.max_attempts_) {
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
        {
            std::lock_guard lock(loop.mutex_);
            loop.state_ = state::idle;
        }
        loop.consumer_.close();
        registry->loop_ended();
    }

    // Waits the backoff after `failed_attempts` failed deliveries; false when the loop must end
    // (stop requested, queue closed: `request_stop` cancels the timer, so that is prompt). The timer
    // is started and cancelled only under `mutex_`, so the two never race.
    boost::asio::awaitable<bool> back_off(std::size_t failed_attempts, push_registry& registry)
    {
        boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor,
                                        backoff_delay(backoff_, failed_attempts));
        try {
            co_await boost::asio::async_initiate<const boost::asio::use_awaitable_t<>&,
                                                 void(boost::system::error_code)>(
                [this, &timer, &registry](auto handler) {
                    std::lock_guard lock(mutex_);
                    timer.async_wait(std::move(handler));
                    if (stop_requested_ || registry.is_closed()) {
                        timer.cancel();
                    } else {
                        backoff_timer_ = &timer;
                    }
                },
                boost::asio::use_awaitable);
        } catch (const boost::system::system_error&) {
            // Cancelled: the checks below end the loop.
        }
        std::lock_guard lock(mutex_);
        backoff_timer_ = nullptr;
        co_return !stop_requested_ && !registry.is_closed();
    }

    // What the error sink receives once when a batch is given up; empty when out of memory.
    std::string give_up_message(const batch<T>& delivered, std::size_t failed_attempts,
                                const std::exception_ptr& failure) const noexcept
    {
        try {
            std::string last;
            try {
                std::rethrow_exception(failure);
            } catch (...) {
                last = exception_message();
            }
            return "topic '" + topic_ + "' group '" + group_ + "' partition " + std::to_string(delivered.partition()) +
                   ": gave up on a batch of " + std::to_string(delivered.size()) +
                   " items (the group's first uncommitted ones) after " + std::to_string(failed_attempts) +
                   " failed attempts (max_attempts); the batch stays uncommitted and this push loop stopped; "
                   "last error: " +
                   last;
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
    // Written by the loop between handler calls and by a commit's completion, which the handler awaits.
    bool batch_committed_ = false;

    spin_mutex mutex_;
    state state_ = state::idle;    // guarded by mutex_
    bool stop_requested_ = false;  // guarded by mutex_
    // The timer of a backoff wait in progress, cancelled by request_stop; guarded by mutex_.
    boost::asio::steady_timer* backoff_timer_ = nullptr;
};

/// Awaits `handler`'s `consume` member on `items`, with the committer under manual commit.
template <class T, class Handler>
boost::asio::awaitable<void> call_consume(Handler& handler, batch<T> items, committer* commit)
{
    if constexpr (manual_commit_push_handler<Handler, T>) {
        co_await handler.consume(items, *commit);
    } else {
        co_await handler.consume(items);
    }
}

/// Awaits the callable `handler` on `items`, with the committer under manual commit.
template <class T, class Handler>
boost::asio::awaitable<void> call_callable(Handler& handler, batch<T> items, committer* commit)
{
    if constexpr (std::is_invocable_v<Handler&, batch<T>, committer&>) {
        co_await handler(items, *commit);
    } else {
        co_await handler(items);
    }
}

/// A consumer instance from `factory`, which returns the consumer by value, `std::unique_ptr` or
/// `std::shared_ptr`.
template <class Consumer, class Factory>
std::shared_ptr<Consumer> make_consumer_instance(Factory& factory)
{
    using made = std::invoke_result_t<Factory&>;
    if constexpr (std::is_convertible_v<made, std::shared_ptr<Consumer>>) {
        std::shared_ptr<Consumer> instance = factory();
        if (!instance) {
            throw error(errc::invalid_argument, "push consumer factory returned a null pointer");
        }
        return instance;
    } else {
        static_assert(std::is_convertible_v<made, Consumer>,
                      "a push consumer factory must return the consumer, a std::unique_ptr or a std::shared_ptr to it");
        return std::make_shared<Consumer>(factory());
    }
}

/// Per-batch instances: one made for this call, destroyed when it finishes or throws.
template <class T, class Consumer, class Factory>
boost::asio::awaitable<void> call_fresh_consumer(std::shared_ptr<Factory> factory, batch<T> items, committer* commit)
{
    const std::shared_ptr<Consumer> instance = make_consumer_instance<Consumer>(*factory);
    co_await call_consume<T>(*instance, items, commit);
}

/// Per-batch callables: a copy made for this call.
template <class T, class Handler>
boost::asio::awaitable<void> call_fresh_callable(std::shared_ptr<const Handler> prototype, batch<T> items,
                                                 committer* commit)
{
    Handler handler = *prototype;
    co_await call_callable<T>(handler, items, commit);
}

}  // namespace bufferqueue::detail
