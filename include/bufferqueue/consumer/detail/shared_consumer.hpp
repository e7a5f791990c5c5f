// Internal: the one pull-consumer implementation, shared by every storage backend: its state, its
// operations and their rules (one at a time, `closed` once closed, detaching from the group when a
// closed consumer's last operation ends), and parking and waking a consume that found nothing.
// Compiled once, for every item type and backend: src/consumer/shared_consumer.cpp.
#pragma once

#include "bufferqueue/consumer/detail/assignment_set.hpp"
#include "bufferqueue/consumer/detail/consumer_base.hpp"
#include "bufferqueue/consumer/detail/consumer_context.hpp"
#include "bufferqueue/consumer/detail/last_error.hpp"
#include "bufferqueue/consumer/detail/operation_state.hpp"
#include "bufferqueue/consumer/detail/ring_reader.hpp"
#include "bufferqueue/detail/partition_signal.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/options.hpp"

#include <boost/system/error_code.hpp>

#include <atomic>
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
/// operation at a time (`operation_state`); the handle serializes nothing else.
///
/// Dynamic assignment (`reassign`, driven by the topic's `consumer_groups` for a group protocol; the
/// rules in docs/consumer-model.md, "Partitions assigned and revoked"): a new set takes effect at
/// the next scan (a parked consume is resumed to wait on it); no scan that starts after `reassign`
/// returned pulls a revoked partition; a delivered batch of a revoked partition cannot be committed
/// (`errc::partition_revoked`), and the partition is handed on only once the batch is released.
/// While nobody reassigns, a scan pays one atomic load for this, and an operation's end another.
///
/// Thread-safety: the reader belongs to the operation that owns `state_` (which hands it from one
/// thread to the next), except the assignment's thread-safe members; `state_`, `last_error_` and
/// the const members are thread-safe. Allocation: a waiting consume's completion (made by the
/// caller), `last_error` text, the membership's calls at detach.
class shared_consumer final : public consumer_base,
                              private data_waiter,
                              public std::enable_shared_from_this<shared_consumer> {
public:
    using set_pointer = consumer_assignment::set_pointer;

    shared_consumer(consumer_context context, const pull_consumer_options& options, set_pointer assignments)
        : context_(std::move(context)),
          reader_(context_, options.group, options.auto_commit, options.batch_size, std::move(assignments))
    {
    }

    /// Called by the topic once the consumer counts as one of its group's open consumers, before
    /// the consumer is shared; only a counted consumer reports to its membership.
    void mark_counted() noexcept
    {
        counted_ = true;
        reader_.start_reporting();
    }

    /// True once the consumer or its topic is closed. Thread-safe.
    bool is_closed() const noexcept
    {
        return state_.closed() || context_.topic_closed->load(std::memory_order_acquire);
    }

    /// The latest set published for this consumer. Thread-safe.
    set_pointer assignment() const { return reader_.assignment().latest(); }

    /// Leaves every partition signal: a wake-up dropped with its executor (the io_context destroyed
    /// before running it) leaves the consumer registered with the partitions that did not signal.
    /// A consumer not detached yet (closed while an operation delivered its last batch) detaches now.
    ~shared_consumer() override;

    consume_attempt begin_consume(bool will_wait) override;
    void wait(operation_state::completion_ptr completion) override;
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
    using completion_ptr = operation_state::completion_ptr;
    using entry = partition_assignment;

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

    // Runs `operation()` (returning its code) as this consumer's operation; `errc::closed` once
    // closed. Every outcome but `unrecorded` becomes `last_error` (none with `std::nullopt`).
    template <class Operation>
    boost::system::error_code run_operation(Operation operation, std::optional<errc> unrecorded);

    // Records how the operation ended for `last_error`; with the operation still owned.
    void record_outcome(const boost::system::error_code& error) noexcept;

    // Ends the operation in progress. A consumer closed meanwhile detaches from its group now, unless
    // the operation handed out a batch: that batch stays valid until the next close() or the destructor.
    // A set published while the operation ran is adopted now, as an operation of its own, so the
    // membership hears at once of the partitions let go (that may take the group lock: an adoption
    // never blocks); it gives way to any other holder of the state.
    void end_operation(bool handed_out_batch) noexcept;

    // Why the state was taken when a new operation found it so: a close() that ran meanwhile holds it
    // for a moment to detach, and then the consumer is closed, not busy.
    errc busy_error() const noexcept { return is_closed() ? errc::closed : errc::operation_in_progress; }

    // Detaches a closed consumer unless an operation is in progress (which detaches as it ends).
    void detach_if_idle() noexcept;

    // Leaves the group for good: releases the held batch and tells the membership this consumer no
    // longer counts as open, so the group may be opened again or removed. Once.
    void detach() noexcept;

    // Ends the operation. With `delivery::dispatch` the handler may run (and start the next operation)
    // before this returns, so callers touch no state afterwards.
    void finish(completion_ptr completion, boost::system::error_code error, untyped_batch delivered, delivery how);

    const consumer_context context_;     // keeps the topic (and what the assignments point into) alive
    ring_reader reader_;                 // owned by the operation in progress (see the class comment)
    operation_state state_;              // thread-safe
    bool counted_ = false;               // set before the consumer is shared
    std::atomic<bool> detached_{false};  // detach() ran: the consumer no longer counts as open
    last_error_record last_error_;       // thread-safe
};

}  // namespace bufferqueue::detail
