// Internal: the one pull-consumer implementation, shared by every storage backend: its operations,
// and parking and waking a consume that found nothing. The state and the operation lifecycle are in
// consumer_lifecycle.hpp. Compiled once, for every item type and backend: src/consumer/shared_consumer.cpp.
#pragma once

#include "bufferqueue/consumer/detail/assignment_set.hpp"
#include "bufferqueue/consumer/detail/consumer_base.hpp"
#include "bufferqueue/consumer/detail/consumer_lifecycle.hpp"
#include "bufferqueue/detail/partition_signal.hpp"

#include <cstddef>
#include <memory>
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
class shared_consumer final : public consumer_base,
                              private consumer_lifecycle,
                              private data_waiter,
                              public std::enable_shared_from_this<shared_consumer> {
    using lifecycle = consumer_lifecycle;

public:
    using lifecycle::set_pointer;

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
    ~shared_consumer() override;

    consume_attempt begin_consume(bool will_wait) override;
    void wait(std::unique_ptr<pending_completion<boost::system::error_code, untyped_batch>> completion) override;
    boost::system::error_code commit() override;
    boost::system::error_code skip(skipped_record& skipped) override;
    // A look, not an outcome: `last_error` keeps describing the failed consume.
    boost::system::error_code unreadable(skipped_record& record) override;
    void close() noexcept override;
    /// The latest operation's failure, else what its membership reports (a broker client that
    /// cannot reach its cluster while a consume waits), else empty.
    std::string last_error() const override;
    void cancel() noexcept override { cancel_wait(); }
    bool likely_ready() const noexcept override { return reader_.more_ready(); }
    const std::string& topic_name() const noexcept override { return context_.topic_name; }
    const std::string& group_name() const noexcept override { return reader_.group(); }
    std::vector<std::size_t> partitions() const override { return reader_.assignment().latest()->partitions(); }
    std::uint64_t lag() const override { return reader_.assignment().latest()->lag(); }
    const boost::asio::any_io_executor& default_executor() const noexcept override { return context_.executor; }
    const storage_runner& runner() const noexcept override { return context_.runner; }

    /// Makes `next` this consumer's set (see the class comment). Thread-safe; returns at once. An
    /// idle consumer adopts it here and appends the partitions it let go to `released` (the caller
    /// hands them on; `consumer_membership` is not called from inside this call); a busy one adopts
    /// it when its operation scans again or ends, and reports them to its membership then.
    void reassign(set_pointer next, std::vector<std::size_t>& released);

private:
    using completion_ptr = parked_consume::completion_ptr;
    using entry = partition_assignment;

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
    void park(completion_ptr completion, delivery how);

    // Continues a parked operation that a wake-up resumed, off its initiating call: pulls at once and
    // parks again only when the scan finds nothing (the data went to a batch pulled meanwhile).
    void resume(completion_ptr completion);

    std::shared_ptr<data_waiter> data_arrived() noexcept override;
    void wake() noexcept override;

    // Per-operation cancellation and `cancel()`: completes the consume in progress with
    // operation_aborted - at once when parked, else when it would park or resume; nothing was pulled
    // for it, so nothing is lost or delivered twice. With no consume in progress it does nothing.
    void cancel_wait() noexcept;

    void unregister() noexcept;

    // Ends the operation. With `delivery::dispatch` the handler may run (and start the next operation)
    // before this returns, so callers touch no state afterwards.
    void finish(completion_ptr completion, boost::system::error_code error, untyped_batch delivered, delivery how);
};

}  // namespace bufferqueue::detail
