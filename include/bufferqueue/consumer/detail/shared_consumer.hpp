// Internal: the one pull-consumer implementation, shared by every storage backend: its operations,
// and parking and waking a consume that found nothing. The state and the operation lifecycle are in
// consumer_lifecycle.hpp.
#pragma once

#include "bufferqueue/consumer/detail/assignment_set.hpp"
#include "bufferqueue/consumer/detail/consumer_base.hpp"
#include "bufferqueue/consumer/detail/consumer_lifecycle.hpp"
#include "bufferqueue/detail/partition_signal.hpp"
#include "bufferqueue/detail/process_barrier.hpp"
#include "bufferqueue/storage/storage.hpp"

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace bufferqueue::detail {

/// A pull consumer: reads a set of a group's partitions and scans them as a ring, so each readable
/// partition gets one pull per rotation. An empty scan suspends the consume on every assigned
/// partition's signal; the first append to any of them resumes it on the handler's executor. One
/// operation at a time; the handle serializes nothing else.
///
/// Dynamic assignment (`reassign`, driven by the topic's `consumer_groups` for a group protocol; the
/// rules in docs/consumer-model.md, "Partitions assigned and revoked"): a new set takes effect at
/// the next scan (a parked consume is resumed to wait on it); no scan that starts after `reassign`
/// returned pulls a revoked partition; a delivered batch of a revoked partition cannot be committed
/// (`errc::partition_revoked`), and the partition is handed on only once the batch is released.
/// While nobody reassigns, a scan pays one atomic load for this, and an operation's end another.
template <class T, class Partition>
class shared_consumer final : public consumer_base<T>,
                              private consumer_lifecycle<T, Partition>,
                              private data_waiter,
                              public std::enable_shared_from_this<shared_consumer<T, Partition>> {
    using lifecycle = consumer_lifecycle<T, Partition>;

public:
    using typename lifecycle::set_pointer;

    shared_consumer(consumer_context context, const pull_consumer_options& options, set_pointer assignments)
        : lifecycle(std::move(context), options, std::move(assignments))
    {
    }

    using lifecycle::assignment;
    using lifecycle::is_closed;
    using lifecycle::mark_counted;

    /// Leaves every partition signal: a wake-up dropped with its executor (the io_context destroyed
    /// before running it) leaves the consumer registered with the partitions that did not signal.
    /// A consumer not detached yet (closed while an operation delivered its last batch) detaches now.
    ~shared_consumer() override
    {
        unregister();
        detach();
    }

    consume_attempt<T> begin_consume(bool will_wait) override
    {
        consume_attempt<T> attempt;  // one object, returned everywhere: no move of it on return
        if (is_closed()) {
            attempt.error = make_error_code(errc::closed);
            return attempt;
        }
        if (!parked_.begin_operation(busy_)) {
            attempt.error = make_error_code(busy_error());
            return attempt;
        }
        if (is_closed()) {
            end_operation(false);
            attempt.error = make_error_code(errc::closed);
            return attempt;
        }
        reader_.release_held_batch();
        attempt.delivered = reader_.scan(attempt.error);
        if (attempt.delivered || attempt.error || !will_wait) {
            record_outcome(attempt.error);
            if (attempt.error) {
                attempt.error_detail = std::exchange(reader_.failure_detail(), {});
            }
            end_operation(attempt.delivered.has_value());
        }
        return attempt;  // neither delivered nor failed, and will_wait: the caller waits
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
        if (reader_.auto_commit()) {
            return errc::auto_commit_enabled;
        }
        return run_operation([this] { return reader_.commit(); }, errc::nothing_to_commit);
    }

    boost::system::error_code skip(skipped_record& skipped) override
    {
        return run_operation([&] { return reader_.skip(skipped); }, errc::nothing_to_skip);
    }

    // A look, not an outcome: `last_error` keeps describing the failed consume.
    boost::system::error_code unreadable(skipped_record& record) override
    {
        return run_operation([&] { return reader_.unreadable(record); }, std::nullopt);
    }

    void close() noexcept override
    {
        if (completion_ptr aborted = parked_.close()) {
            unregister();
            finish(std::move(aborted), boost::asio::error::operation_aborted, {}, delivery::post);
        }
        detach_if_idle();
    }

    /// The latest operation's failure, else what its membership reports (a broker client that
    /// cannot reach its cluster while a consume waits), else empty.
    std::string last_error() const override
    {
        std::string text = last_error_.text();
        if (text.empty() && context_.membership != nullptr) {
            text = context_.membership->consumer_problem(reader_.group(), context_.index);
        }
        return text;
    }
    void cancel() noexcept override
    {
        cancel_wait();
    }
    bool likely_ready() const noexcept override
    {
        return reader_.more_ready();
    }
    const std::string& topic_name() const noexcept override
    {
        return context_.topic_name;
    }
    const std::string& group_name() const noexcept override
    {
        return reader_.group();
    }
    std::vector<std::size_t> partitions() const override
    {
        return reader_.assignment().latest()->partitions();
    }
    std::uint64_t lag() const override
    {
        return reader_.assignment().latest()->lag();
    }
    const boost::asio::any_io_executor& default_executor() const noexcept override
    {
        return context_.executor;
    }
    const storage_runner& runner() const noexcept override
    {
        return context_.runner;
    }

    /// Makes `next` this consumer's set (see the class comment). Thread-safe; returns at once. An
    /// idle consumer adopts it here and appends the partitions it let go to `released` (the caller
    /// hands them on; `consumer_membership` is not called from inside this call); a busy one adopts
    /// it when its operation scans again or ends, and reports them to its membership then.
    void reassign(set_pointer next, std::vector<std::size_t>& released)
    {
        reader_.assignment().publish(std::move(next));
        // A parked consume re-registers with the new set: resumed like a wake-up.
        if (const std::shared_ptr<data_waiter> parked = data_arrived()) {
            parked->wake();
            return;
        }
        reader_.adopt_while_idle(busy_, released);
    }

private:
    using completion_ptr = typename parked_consume<T>::completion_ptr;
    using entry = partition_assignment<Partition>;

    using lifecycle::busy_;
    using lifecycle::context_;
    using lifecycle::last_error_;
    using lifecycle::parked_;
    using lifecycle::reader_;

    using lifecycle::busy_error;
    using lifecycle::detach;
    using lifecycle::detach_if_idle;
    using lifecycle::end_operation;
    using lifecycle::record_outcome;
    using lifecycle::run_operation;

    /// How a finished operation reaches its handler.
    enum class delivery {
        post,      ///< always posted: inside the initiating call, or where the caller must not be re-entered
        dispatch,  ///< invoked at once when already running on the handler's executor
    };

    // Parks the operation until data arrives (re-checking after registering), or finishes it.
    void park(completion_ptr completion, delivery how)
    {
        for (;;) {
            parked_.prepare();
            reader_.adopt_if_reassigned();  // the signals registered with are always those of the current set
            for (const entry& each : reader_.current().entries()) {
                each.signal->add(*this);
            }
            heavy_fence();  // pairs with the producers' light_fence in partition_signal::notify
            bool retry = is_closed();
            const std::span<const entry> entries = reader_.current().entries();
            for (std::size_t index = 0; !retry && index < entries.size(); ++index) {
                if (entries[index].storage->has_data(*entries[index].cursor)) {
                    reader_.note_data(index);  // its producer's notify may not have marked it yet
                    retry = true;
                }
            }
            if (parked_.park(completion, retry || reader_.assignment().reassigned())) {
                return;
            }
            unregister();
            if (is_closed() || parked_.cancel_requested()) {
                finish(std::move(completion), boost::asio::error::operation_aborted, {}, how);
                return;
            }
            boost::system::error_code error;
            auto delivered = reader_.scan(error);
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
        if (is_closed() || parked_.cancel_requested()) {
            finish(std::move(completion), boost::asio::error::operation_aborted, {}, delivery::dispatch);
            return;
        }
        boost::system::error_code error;
        auto delivered = reader_.scan(error);
        if (delivered || error) {
            finish(std::move(completion), error, delivered.value_or(batch<T>()), delivery::dispatch);
            return;
        }
        park(std::move(completion), delivery::dispatch);
    }

    std::shared_ptr<data_waiter> data_arrived() noexcept override
    {
        return parked_.arrive([this]() -> std::shared_ptr<data_waiter> {
            auto self = this->weak_from_this().lock();
            if (!self) {
                return nullptr;
            }
            return std::shared_ptr<data_waiter>(std::move(self), static_cast<data_waiter*>(this));
        });
    }

    void wake() noexcept override
    {
        if (completion_ptr resumed = parked_.take_claimed()) {
            // The pull (and an auto-commit's file I/O) runs where the runner allows blocking. The
            // posted resumption counts as work itself and `resumed` keeps its own: untracked, the post
            // spares the shared work counter two atomic updates.
            const boost::asio::any_io_executor executor =
                boost::asio::prefer(resumed->executor(), boost::asio::execution::outstanding_work.untracked);
            context_.runner.resume(executor, [&] {
                return [self = this->shared_from_this(), resumed = std::move(resumed)]() mutable {
                    self->resume(std::move(resumed));
                };
            });
        }
    }

    // Per-operation cancellation and `cancel()`: completes the consume in progress with
    // operation_aborted - at once when parked, else when it would park or resume; nothing was pulled
    // for it, so nothing is lost or delivered twice. With no consume in progress it does nothing.
    void cancel_wait() noexcept
    {
        if (completion_ptr cancelled = parked_.cancel(busy_)) {
            unregister();
            finish(std::move(cancelled), boost::asio::error::operation_aborted, {}, delivery::post);
        }
    }

    void unregister() noexcept
    {
        for (const entry& each : reader_.current().entries()) {
            each.signal->remove(*this);
        }
    }

    // Ends the operation. With `delivery::dispatch` the handler may run (and start the next operation)
    // before this returns, so callers touch no state afterwards.
    void finish(completion_ptr completion, boost::system::error_code error, batch<T> delivered, delivery how)
    {
        record_outcome(error);
        reader_.failure_detail().clear();
        end_operation(!error && !delivered.empty());
        if (how == delivery::dispatch) {
            completion->dispatch(error, std::move(delivered));
        } else {
            completion->complete(error, std::move(delivered));
        }
    }
};

}  // namespace bufferqueue::detail
