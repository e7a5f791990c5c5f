// Internal: the one pull-consumer implementation, shared by every storage backend.
#pragma once

#include "bufferqueue/detail/partition_signal.hpp"
#include "bufferqueue/detail/process_barrier.hpp"
#include "bufferqueue/topic/detail/topic.hpp"
#include "bufferqueue/storage/storage.hpp"

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace bufferqueue::detail {

template <class T, class Partition>
class basic_topic;

/// A pull consumer: owns a fixed set of a group's partitions and scans them as a ring, so each
/// readable partition gets one pull per rotation. An empty scan suspends the consume on every
/// assigned partition's signal; the first append to any of them resumes it on the handler's
/// executor. One operation at a time; the handle serializes nothing else.
template <class T, class Partition>
class shared_consumer final : public consumer_base<T>,
                              private data_waiter,
                              public std::enable_shared_from_this<shared_consumer<T, Partition>> {
public:
    struct assignment {
        std::size_t partition;
        Partition* storage;
        partition_signal* signal;
        typename Partition::cursor* cursor;
    };

    shared_consumer(std::shared_ptr<basic_topic<T, Partition>> topic, const pull_consumer_options& options,
                    std::vector<assignment> assignments)
        : topic_(std::move(topic)), group_(options.group), auto_commit_(options.auto_commit),
          batch_size_(options.batch_size), assignments_(std::move(assignments))
    {
        for (const assignment& each : assignments_) {
            partition_numbers_.push_back(each.partition);
        }
    }

    /// Leaves every partition signal: a wake-up dropped with its executor (the io_context destroyed
    /// before running it) leaves the consumer registered with the partitions that did not signal.
    /// A consumer not detached yet (closed while an operation delivered its last batch) detaches now.
    ~shared_consumer() override
    {
        unregister();
        detach();
    }

    /// Called by the topic once the consumer counts as one of its group's open consumers, before
    /// the consumer is shared; only a counted consumer reports its detachment to the topic.
    void mark_counted() noexcept { counted_ = true; }

    consume_attempt<T> begin_consume(bool will_wait) override
    {
        if (is_closed()) {
            return {make_error_code(errc::closed), {}};
        }
        {
            // Under the lock with the reset, so a `cancel()` that sees this operation busy is never lost.
            std::lock_guard lock(mutex_);
            if (busy_.exchange(true, std::memory_order_acquire)) {
                return {make_error_code(busy_error()), {}};
            }
            cancel_requested_ = false;
        }
        if (is_closed()) {
            end_operation(false);
            return {make_error_code(errc::closed), {}};
        }
        release_held_batch();
        boost::system::error_code error;
        auto delivered = scan(error);
        if (delivered || error || !will_wait) {
            record_outcome(error);
            const bool handed_out = delivered.has_value();
            consume_attempt<T> attempt{error, std::move(delivered), std::exchange(failure_detail_, {})};
            end_operation(handed_out);
            return attempt;
        }
        return {};
    }

    void wait(std::unique_ptr<pending_completion<boost::system::error_code, batch<T>>> completion) override
    {
#if BUFFERQUEUE_HAS_CANCELLATION_SLOTS
        // Once per operation (the hook stays until the completion completes); without slots it would
        // do nothing, so Boost < 1.77 does not build it at all.
        completion->on_cancel([weak = this->weak_from_this()] {
            if (auto self = weak.lock()) {
                self->cancel_wait();
            }
        });
#endif
        park(std::move(completion), delivery::post);
    }

    boost::system::error_code commit() override
    {
        if (auto_commit_) {
            return errc::auto_commit_enabled;
        }
        if (busy_.exchange(true, std::memory_order_acquire)) {
            return busy_error();
        }
        boost::system::error_code result;
        if (is_closed()) {
            result = errc::closed;
        } else if (!uncommitted_) {
            result = errc::nothing_to_commit;
        } else {
            failure_detail_.clear();
            result = commit_position(last_assignment_, last_next_offset_);
            if (!result) {
                uncommitted_ = false;
            }
            record_outcome(result);
        }
        end_operation(false);
        return result;
    }

    void close() noexcept override
    {
        std::unique_ptr<pending_completion<boost::system::error_code, batch<T>>> aborted;
        {
            std::lock_guard lock(mutex_);
            closed_.store(true, std::memory_order_seq_cst);
            aborted = std::move(pending_);
        }
        if (aborted) {
            unregister();
            finish(std::move(aborted), boost::asio::error::operation_aborted, {}, delivery::post);
        }
        detach_if_idle();
    }

    std::string last_error() const override
    {
        std::lock_guard lock(mutex_);
        return last_error_;
    }

    void cancel() noexcept override
    {
        cancel_wait();
    }

    const std::string& topic_name() const noexcept override;
    const std::string& group_name() const noexcept override
    {
        return group_;
    }
    const std::vector<std::size_t>& partitions() const noexcept override
    {
        return partition_numbers_;
    }
    const boost::asio::any_io_executor& default_executor() const noexcept override;
    io_pool* blocking_pool() const noexcept override;

private:
    using completion_ptr = std::unique_ptr<pending_completion<boost::system::error_code, batch<T>>>;

    /// How a finished operation reaches its handler.
    enum class delivery {
        post,      ///< always posted: inside the initiating call, or where the caller must not be re-entered
        dispatch,  ///< invoked at once when already running on the handler's executor
    };

    bool is_closed() const noexcept;

    // Parks the operation until data arrives (re-checking after registering), or finishes it.
    void park(completion_ptr completion, delivery how)
    {
        for (;;) {
            {
                std::lock_guard lock(mutex_);
                notified_ = false;
            }
            for (const assignment& each : assignments_) {
                each.signal->add(*this);
            }
            heavy_fence();  // pairs with the producers' light_fence in partition_signal::notify
            bool retry = is_closed();
            for (const assignment& each : assignments_) {
                retry = retry || each.storage->has_data(*each.cursor);
            }
            if (!retry) {
                std::lock_guard lock(mutex_);
                if (!notified_ && !cancel_requested_ && !closed_.load(std::memory_order_relaxed)) {
                    pending_ = std::move(completion);
                    return;
                }
            }
            unregister();
            if (is_closed() || cancellation_requested()) {
                finish(std::move(completion), boost::asio::error::operation_aborted, {}, how);
                return;
            }
            boost::system::error_code error;
            auto delivered = scan(error);
            if (delivered || error) {
                finish(std::move(completion), error, delivered.value_or(batch<T>()), how);
                return;
            }
        }
    }

    // Continues a parked operation that a wake-up resumed, off its initiating call: pulls at once and
    // parks again only when the scan finds nothing (the data went to a batch pulled meanwhile).
    void resume(completion_ptr completion)
    {
        unregister();
        if (is_closed() || cancellation_requested()) {
            finish(std::move(completion), boost::asio::error::operation_aborted, {}, delivery::dispatch);
            return;
        }
        boost::system::error_code error;
        auto delivered = scan(error);
        if (delivered || error) {
            finish(std::move(completion), error, delivered.value_or(batch<T>()), delivery::dispatch);
            return;
        }
        park(std::move(completion), delivery::dispatch);
    }

    std::shared_ptr<data_waiter> data_arrived() noexcept override
    {
        std::lock_guard lock(mutex_);
        notified_ = true;
        if (!pending_) {
            return nullptr;
        }
        auto self = this->weak_from_this().lock();
        if (!self) {
            return nullptr;
        }
        claimed_ = std::move(pending_);
        return std::shared_ptr<data_waiter>(std::move(self), static_cast<data_waiter*>(this));
    }

    void wake() noexcept override
    {
        completion_ptr resumed;
        {
            std::lock_guard lock(mutex_);
            resumed = std::move(claimed_);
        }
        if (resumed) {
            // The pull (and an auto-commit's file I/O) runs where blocking is allowed: on the I/O pool of a
            // persistent topic, else - memory topics, or once the queue (and its pool) is gone, where the
            // closed topic completes at once - on the handler's executor. The posted resumption counts as
            // work itself and `resumed` keeps its own: untracked, the post spares the shared work counter
            // two atomic updates.
            const boost::asio::any_io_executor executor =
                boost::asio::prefer(resumed->executor(), boost::asio::execution::outstanding_work.untracked);
            const auto resumption = [&] {
                return [self = this->shared_from_this(), resumed = std::move(resumed)]() mutable {
                    self->resume(std::move(resumed));
                };
            };
            io_pool* pool = blocking_pool();
            if (pool == nullptr || !pool->post(resumption)) {
                boost::asio::post(executor, resumption());
            }
        }
    }

    // Per-operation cancellation and `cancel()`: completes the consume in progress with
    // operation_aborted - at once when parked, else when it would park or resume; nothing was pulled
    // for it, so nothing is lost or delivered twice. With no consume in progress it does nothing.
    void cancel_wait() noexcept
    {
        completion_ptr cancelled;
        {
            std::lock_guard lock(mutex_);
            if (!busy_.load(std::memory_order_acquire)) {
                return;
            }
            cancel_requested_ = true;
            cancelled = std::move(pending_);
        }
        if (cancelled) {
            unregister();
            finish(std::move(cancelled), boost::asio::error::operation_aborted, {}, delivery::post);
        }
    }

    bool cancellation_requested() noexcept
    {
        std::lock_guard lock(mutex_);
        return cancel_requested_;
    }

    void unregister() noexcept
    {
        for (const assignment& each : assignments_) {
            each.signal->remove(*this);
        }
    }

    // Ends the operation. With `delivery::dispatch` the handler may run (and start the next operation)
    // before this returns, so callers touch no state afterwards.
    void finish(completion_ptr completion, boost::system::error_code error, batch<T> delivered, delivery how)
    {
        record_outcome(error);
        failure_detail_.clear();
        end_operation(!error && !delivered.empty());
        if (how == delivery::dispatch) {
            completion->dispatch(error, std::move(delivered));
        } else {
            completion->complete(error, std::move(delivered));
        }
    }

    // One rotation over the assigned partitions, starting after the last one that delivered.
    // A failed auto-commit sets `error` and hands out nothing.
    std::optional<batch<T>> scan(boost::system::error_code& error)
    {
        failure_detail_.clear();  // a detail left by an earlier (awaited) scan must not describe this one
        const std::size_t count = assignments_.size();
        for (std::size_t step = 0; step < count; ++step) {
            const std::size_t index = (ring_position_ + step) % count;
            const assignment& each = assignments_[index];
            pull_result<T> pulled;
            try {
                pulled = each.storage->pull(*each.cursor, batch_size_);
            } catch (...) {
                // The partition reports its failure, and its turn passes: the next scan starts at the
                // partition after it, so one bad record cannot stall the consumer's other partitions.
                error = current_exception_code(errc::corrupt_data);
                failure_detail_ = exception_message();
                ring_position_ = (index + 1) % count;
                return std::nullopt;
            }
            if (pulled.items.empty()) {
                continue;
            }
            ring_position_ = (index + 1) % count;
            held_batch_ = index;
            last_assignment_ = index;
            last_next_offset_ = pulled.next_offset;
            if (auto_commit_) {
                error = commit_position(index, pulled.next_offset);
                if (error) {
                    release_held_batch();
                    return std::nullopt;
                }
            } else {
                uncommitted_ = true;
            }
            return batch<T>(pulled.items, each.partition);
        }
        return std::nullopt;
    }

    boost::system::error_code commit_position(std::size_t index, std::uint64_t next_offset);

    std::string describe() const
    {
        return "pull consumer of topic '" + topic_name() + "' group '" + group_ + "'";
    }

    // Records how the operation ended for `last_error`; with the operation still owned (busy_).
    // Takes the lock only when the recorded text changes, so a run of successes never locks.
    void record_outcome(const boost::system::error_code& error) noexcept
    {
        if (!error && !has_last_error_) {
            return;
        }
        std::string text;
        if (error) {
            try {
                text = describe() + ": " + (failure_detail_.empty() ? error.message() : failure_detail_);
            } catch (...) {
                text.clear();  // no memory for the description: the code alone reaches the caller
            }
        }
        {
            std::lock_guard lock(mutex_);
            last_error_.swap(text);
        }
        has_last_error_ = static_cast<bool>(error);
    }

    // Ends the operation in progress. A consumer closed meanwhile detaches from its group now, unless
    // the operation handed out a batch: that batch stays valid until the next close() or the destructor.
    void end_operation(bool handed_out_batch) noexcept
    {
        busy_.store(false, std::memory_order_seq_cst);
        if (!handed_out_batch && closed_.load(std::memory_order_seq_cst)) {
            detach_if_idle();
        }
    }

    // Why busy_ was taken when a new operation found it so: a close() that ran meanwhile holds it for
    // a moment to detach, and then the consumer is closed, not busy.
    errc busy_error() const noexcept
    {
        return is_closed() ? errc::closed : errc::operation_in_progress;
    }

    // Detaches a closed consumer unless an operation is in progress (which detaches as it ends).
    void detach_if_idle() noexcept
    {
        if (busy_.exchange(true, std::memory_order_seq_cst)) {
            return;
        }
        detach();
        busy_.store(false, std::memory_order_release);
    }

    // Leaves the group for good: releases the held batch and tells the topic this consumer no longer
    // counts as open, so the group may be opened again or removed. Once.
    void detach() noexcept
    {
        if (detached_.exchange(true, std::memory_order_acq_rel)) {
            return;
        }
        release_held_batch();
        if (counted_) {
            consumer_released();
        }
    }

    void consumer_released() noexcept;

    void release_held_batch() noexcept
    {
        if (held_batch_ != no_batch) {
            const assignment& each = assignments_[held_batch_];
            each.storage->release_batch(*each.cursor);
            held_batch_ = no_batch;
        }
    }

    static constexpr std::size_t no_batch = static_cast<std::size_t>(-1);

    const std::shared_ptr<basic_topic<T, Partition>> topic_;
    const std::string group_;
    const bool auto_commit_;
    const std::size_t batch_size_;
    const std::vector<assignment> assignments_;
    std::vector<std::size_t> partition_numbers_;

    // Owned by the operation in progress (busy_ hands it over between threads).
    std::atomic<bool> busy_{false};
    std::size_t ring_position_ = 0;
    std::size_t held_batch_ = no_batch;
    std::size_t last_assignment_ = 0;
    std::uint64_t last_next_offset_ = 0;
    bool uncommitted_ = false;
    std::string failure_detail_;         // the message of the last pull failure, for try_consume's exception
    bool has_last_error_ = false;        // last_error_ is not empty
    bool counted_ = false;               // set before the consumer is shared
    std::atomic<bool> detached_{false};  // detach() ran: the consumer no longer counts as open

    mutable spin_mutex mutex_;
    std::string last_error_;           // guarded by mutex_
    completion_ptr pending_;           // guarded by mutex_
    completion_ptr claimed_;           // guarded by mutex_: taken from pending_ by a wake-up until it is posted
    bool notified_ = false;            // guarded by mutex_
    bool cancel_requested_ = false;    // guarded by mutex_
    std::atomic<bool> closed_{false};  // written under mutex_
};

}  // namespace bufferqueue::detail
