// Internal: a produce that waits for room on a bounded topic - FIFO admission in slices, the
// producer's lane kept across threads, cancellation by slot or stop token. The part that depends on
// no item type is compiled once (src/topic/produce_waiter.cpp); `typed_produce_waiter` stores.
#pragma once

#include "bufferqueue/detail/completion.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/topic/detail/acknowledged_produce.hpp"
#include "bufferqueue/topic/detail/capacity_gate.hpp"
#include "bufferqueue/topic/detail/topic.hpp"
#include "bufferqueue/topic/detail/topic_core.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>

namespace bufferqueue::detail {

/// A produce() in wait mode on a bounded topic: admits its input in capacity-sized slices, each
/// whole, in FIFO order with other waiting producers, and stores every slice (`store`), whichever
/// thread runs the continuation. Cancelled by the handler's cancellation slot or the operation's
/// stop token. Owns itself: `run()` starts it, and it deletes itself after it completes
/// (`complete_and_delete`). Holds the topic (`topic`, whose `core` it admits through) until then.
/// Not thread-safe itself: the gate hands it to one thread at a time.
class produce_waiter : public capacity_waiter {
public:
    /// Stores slices while room is free, queues for the rest; completes when every item is stored,
    /// the topic closes or the produce is cancelled. Runs on the producing thread, then on the
    /// operation's executor.
    void run();
    /// Room for the slice was granted: stores it on the operation's executor, then settles the
    /// grant (no other produce is admitted in between, so a later produce of this thread is stored
    /// after it).
    void granted() noexcept override;
    /// The gate gave up on this waiter (closed, or cancelled): completes with `operation_aborted`
    /// on the operation's executor.
    void aborted() noexcept override;
    /// Per-operation cancellation while queued for room: earlier slices stay stored; the slice
    /// being waited for is not. A stop already requested cancels at once (the callback runs here).
    void watch_cancellation();

protected:
    /// `completion` and `stop` belong to the operation, which the derived waiter keeps until it
    /// completes; `items`: how many it produces.
    produce_waiter(std::shared_ptr<const void> topic, topic_core& core,
                   pending_completion<boost::system::error_code>& completion, std::stop_token stop,
                   std::size_t items) noexcept;
    virtual ~produce_waiter();

    /// Stores items [`offset`, `offset + count`), whose room is admitted; the error when it could
    /// not (the room not stored is given back).
    virtual boost::system::error_code store(std::size_t offset, std::size_t count) = 0;
    /// Completes the produce with `error` and deletes the waiter.
    virtual void complete_and_delete(boost::system::error_code error) = 0;

    pending_completion<boost::system::error_code>& completion() const noexcept { return completion_; }

private:
    struct stop_requested {
        produce_waiter* waiter;
        void operator()() const noexcept;
    };

    // Stores the granted slice and counts it; its error.
    boost::system::error_code store_slice();

    const std::shared_ptr<const void> topic_;  // keeps core_ alive
    topic_core& core_;
    pending_completion<boost::system::error_code>& completion_;
    const std::stop_token stop_;
    const std::size_t items_;
    std::size_t done_ = 0;
    // Destroyed first: that waits for a stop callback running on another thread to return (it
    // only unqueues, through core_, which topic_ keeps).
    std::optional<std::stop_callback<stop_requested>> stop_callback_;
};

/// The `produce_waiter` of a `produce_operation<T>` on `Topic` (a `basic_topic`, which befriends
/// it): stores every slice in the lane of the thread that started it (`producer_`). Over partitions
/// that acknowledge appends it hands each slice over with `append_acknowledged` instead, and when
/// done hands the outcome to the `acknowledged_produce`, which completes the operation on the last
/// acknowledgement (the waiter is gone by then; cancellation stops with it).
template <class T, class Topic>
class typed_produce_waiter final : public produce_waiter {
public:
    typed_produce_waiter(std::shared_ptr<Topic> topic, topic_core& core,
                         std::unique_ptr<produce_operation<T>> operation, std::size_t producer)
        : produce_waiter(topic, core, operation->completion(), operation->stop_token(), operation->items().size()),
          topic_(*topic), owned_(std::move(operation)), operation_(owned_.get()), producer_(producer)
    {
    }

    /// Over acknowledging partitions: `acknowledgements` owns the operation and outlives the waiter.
    typed_produce_waiter(std::shared_ptr<Topic> topic, topic_core& core, acknowledged_produce<T>& acknowledgements,
                         std::size_t producer)
        : produce_waiter(topic, core, acknowledgements.operation().completion(),
                         acknowledgements.operation().stop_token(), acknowledgements.operation().items().size()),
          topic_(*topic), operation_(&acknowledgements.operation()), acknowledgements_(&acknowledgements),
          producer_(producer)
    {
    }

private:
    boost::system::error_code store(std::size_t offset, std::size_t count) override
    {
        const std::uint32_t* partitions = operation_->partitions();
        try {
            topic_.append_admitted(operation_->items().subspan(offset, count),
                                   partitions != nullptr ? partitions + offset : nullptr, producer_,
                                   operation_->movable(), acknowledgements_);
        } catch (...) {
            return current_exception_code(errc::invalid_argument);
        }
        return {};
    }

    // Over acknowledging partitions, the cancellation is disconnected and the waiter deleted first,
    // then the acknowledgements get the outcome (they may complete and free the operation at once).
    void complete_and_delete(boost::system::error_code error) override
    {
        if (acknowledged_produce<T>* acknowledgements = acknowledgements_) {
            completion().on_cancel([] {});
            delete this;
            acknowledgements->handed_over(error);
            return;
        }
        completion().complete(error);
        delete this;
    }

    Topic& topic_;                                 // kept by produce_waiter
    std::unique_ptr<produce_operation<T>> owned_;  // null over acknowledging partitions
    produce_operation<T>* const operation_;        // owned_, or the acknowledgements' operation
    acknowledged_produce<T>* const acknowledgements_ = nullptr;
    const std::size_t producer_;  // the producer_thread_number() of the thread that started it
};

}  // namespace bufferqueue::detail
