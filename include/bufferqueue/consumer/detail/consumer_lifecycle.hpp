// Internal: the state of a pull consumer and its operation lifecycle (begin, end, close, detach), the
// base of `shared_consumer`, which adds parking and waking.
#pragma once

#include "bufferqueue/consumer/detail/consumer_context.hpp"
#include "bufferqueue/consumer/detail/last_error.hpp"
#include "bufferqueue/consumer/detail/operation_flag.hpp"
#include "bufferqueue/consumer/detail/parked_consume.hpp"
#include "bufferqueue/consumer/detail/ring_reader.hpp"
#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/options.hpp"

#include <boost/system/error_code.hpp>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace bufferqueue::detail {

/// What a pull consumer is between operations: its context, its ring reader, who owns the operation
/// state (`busy_`), its parked operation and its last error; and the rules every operation follows to
/// begin and end - one operation at a time, `errc::closed` once closed, a closed consumer detaching
/// from its group when its last operation ends. Not thread-safe by itself: `busy_` hands the reader
/// from one thread to the next; `parked_` and the assignment's published sets are thread-safe.
/// Allocation: `record_outcome` builds `last_error` text; `detach` calls the group's membership.
class consumer_lifecycle {
public:
    using set_pointer = consumer_assignment::set_pointer;

    consumer_lifecycle(consumer_context context, const pull_consumer_options& options, set_pointer assignments)
        : context_(std::move(context)),
          reader_(context_, options.group, options.auto_commit, options.batch_size, std::move(assignments))
    {
    }

    consumer_lifecycle(const consumer_lifecycle&) = delete;
    consumer_lifecycle& operator=(const consumer_lifecycle&) = delete;

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
        return parked_.closed() || context_.topic_closed->load(std::memory_order_acquire);
    }

    /// The latest set published for this consumer. Thread-safe.
    set_pointer assignment() const { return reader_.assignment().latest(); }

protected:
    ~consumer_lifecycle() = default;

    // Runs `operation()` (returning its code) as this consumer's operation; `errc::closed` once
    // closed. Every outcome but `unrecorded` becomes `last_error` (none with `std::nullopt`).
    template <class Operation>
    boost::system::error_code run_operation(Operation operation, std::optional<errc> unrecorded)
    {
        if (!busy_.try_begin()) {
            return busy_error();
        }
        boost::system::error_code result = errc::closed;
        if (!is_closed()) {
            result = operation();
            if (unrecorded && result != *unrecorded) {
                record_outcome(result);
            }
        }
        end_operation(false);
        return result;
    }

    // Records how the operation ended for `last_error`; with the operation still owned (busy_).
    void record_outcome(const boost::system::error_code& error) noexcept
    {
        last_error_.record(error, reader_.failure_detail(), [this] {
            return format_message("pull consumer of topic '{}' group '{}'", context_.topic_name, reader_.group());
        });
    }

    // Ends the operation in progress. A consumer closed meanwhile detaches from its group now, unless
    // the operation handed out a batch: that batch stays valid until the next close() or the destructor.
    // A set published while the operation ran is adopted now, so an idle consumer lets go at once.
    void end_operation(bool handed_out_batch) noexcept
    {
        busy_.end();
        reader_.adopt_between_operations(busy_);
        if (!handed_out_batch && parked_.closed(std::memory_order_seq_cst)) {
            detach_if_idle();
        }
    }

    // Why busy_ was taken when a new operation found it so: a close() that ran meanwhile holds it for
    // a moment to detach, and then the consumer is closed, not busy.
    errc busy_error() const noexcept { return is_closed() ? errc::closed : errc::operation_in_progress; }

    // Detaches a closed consumer unless an operation is in progress (which detaches as it ends).
    void detach_if_idle() noexcept
    {
        if (!busy_.try_begin()) {
            return;
        }
        detach();
        busy_.end();
    }

    // Leaves the group for good: releases the held batch and tells the membership this consumer no
    // longer counts as open, so the group may be opened again or removed. Once.
    void detach() noexcept
    {
        if (detached_.exchange(true, std::memory_order_acq_rel)) {
            return;
        }
        reader_.release_held_batch();
        reader_.stop_reporting();
        if (counted_ && context_.membership != nullptr) {
            context_.membership->consumer_released(reader_.group(), context_.index);
        }
    }

    const consumer_context context_;  // keeps the topic (and what the assignments point into) alive

    // Owned by the operation in progress (busy_ hands it over between threads), except the
    // assignment's thread-safe members.
    ring_reader reader_;
    operation_flag busy_;
    bool counted_ = false;               // set before the consumer is shared
    std::atomic<bool> detached_{false};  // detach() ran: the consumer no longer counts as open
    last_error_record last_error_;

    parked_consume parked_;  // thread-safe
};

}  // namespace bufferqueue::detail
