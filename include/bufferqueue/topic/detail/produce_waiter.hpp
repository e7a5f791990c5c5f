// Internal: a produce that waits for room on a bounded topic - FIFO admission in slices, the
// producer's lane kept across threads, cancellation by slot or stop token.
#pragma once

#include "bufferqueue/detail/completion.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/topic/detail/acknowledged_produce.hpp"
#include "bufferqueue/topic/detail/capacity_gate.hpp"
#include "bufferqueue/topic/detail/topic.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>

namespace bufferqueue::detail {

/// A produce() in wait mode on a bounded `Topic` (a `basic_topic`, which befriends it): admits its
/// input in capacity-sized slices, each whole, in FIFO order with other waiting producers, and
/// stores every slice in the lane of the thread that started it (`producer_`), whichever thread
/// runs the continuation. Cancelled by the handler's cancellation slot or the operation's stop
/// token. Owns itself: `run()` starts it, and it deletes itself after it completes. Over partitions
/// that acknowledge appends it hands each slice over with `append_acknowledged` instead, and when
/// done hands the outcome to the `acknowledged_produce`, which completes the operation on the last
/// acknowledgement (the waiter is gone by then; cancellation stops with it).
template <class T, class Topic>
class produce_waiter final : public capacity_waiter {
public:
    produce_waiter(std::shared_ptr<Topic> topic, std::unique_ptr<produce_operation<T>> operation, std::size_t producer)
        : capacity_waiter(0), topic_(std::move(topic)), owned_(std::move(operation)), operation_(owned_.get()),
          producer_(producer)
    {
    }

    /// Over acknowledging partitions: `acknowledgements` owns the operation and outlives the waiter.
    produce_waiter(std::shared_ptr<Topic> topic, acknowledged_produce<T>& acknowledgements, std::size_t producer)
        : capacity_waiter(0), topic_(std::move(topic)), operation_(&acknowledgements.operation()),
          acknowledgements_(&acknowledgements), producer_(producer)
    {
    }

    void run()
    {
        capacity_gate& gate = topic_->admission();
        for (;;) {
            // Everything stored is a success, even when a close or cancel came in meanwhile.
            const std::size_t remaining = operation_->items().size() - done_;
            if (remaining == 0) {
                finish({});
                return;
            }
            if (topic_->is_closed() || cancel_requested()) {
                finish(boost::asio::error::operation_aborted);
                return;
            }
            set_requested(std::min(remaining, gate.capacity()));
            if (!gate.acquire_or_enqueue(*this)) {
                return;  // granted() or aborted() continues
            }
            if (const boost::system::error_code error = store_slice()) {
                finish(error);
                return;
            }
        }
    }

    // Stores the granted slice on the operation's executor, then settles the grant (no other
    // produce is admitted in between, so a later produce of this thread is stored after it).
    void granted() noexcept override
    {
        boost::asio::post(operation_->completion().executor(), [this] {
            capacity_gate& gate = topic_->admission();
            if (topic_->is_closed() || cancel_requested()) {
                // Cancelled after the room was granted: the slice is not stored; the room goes on.
                topic_->release_capacity(requested());
                gate.settle();
                finish(boost::asio::error::operation_aborted);
                return;
            }
            const boost::system::error_code error = store_slice();
            gate.settle();
            if (error) {
                finish(error);
            } else {
                run();
            }
        });
    }

    // Per-operation cancellation while queued for room: earlier slices stay stored; the slice
    // being waited for is not. A stop already requested cancels at once (the callback runs here).
    void watch_cancellation()
    {
        operation_->completion().on_cancel([this] { topic_->admission().cancel(*this); });
        if (operation_->stop_token().stop_possible()) {
            stop_callback_.emplace(operation_->stop_token(), stop_requested{this});
        }
    }

    void aborted() noexcept override
    {
        boost::asio::post(operation_->completion().executor(),
                          [this] { finish(boost::asio::error::operation_aborted); });
    }

private:
    struct stop_requested {
        produce_waiter* waiter;
        void operator()() const noexcept { waiter->topic_->admission().cancel(*waiter); }
    };

    // Stores the admitted slice; the error when it could not (the room not stored is given back).
    boost::system::error_code store_slice()
    {
        const std::size_t count = requested();
        const std::uint32_t* partitions = operation_->partitions();
        try {
            topic_->append_admitted(operation_->items().subspan(done_, count),
                                    partitions != nullptr ? partitions + done_ : nullptr, producer_,
                                    operation_->movable(), acknowledgements_);
        } catch (...) {
            return current_exception_code(errc::invalid_argument);
        }
        done_ += count;
        return {};
    }

    // Completes and deletes the waiter. Destroying `stop_callback_` (declared last, destroyed
    // first) waits for a stop callback running on another thread to return; that callback only
    // unqueues and posts.
    // Over acknowledging partitions, the cancellation is disconnected and the waiter deleted first,
    // then the acknowledgements get the outcome (they may complete and free the operation at once).
    void finish(boost::system::error_code error)
    {
        if (acknowledged_produce<T>* acknowledgements = acknowledgements_) {
            operation_->completion().on_cancel([] {});
            delete this;
            acknowledgements->handed_over(error);
            return;
        }
        operation_->completion().complete(error);
        delete this;
    }

    std::shared_ptr<Topic> topic_;
    std::unique_ptr<produce_operation<T>> owned_;  // null over acknowledging partitions
    produce_operation<T>* const operation_;        // owned_, or the acknowledgements' operation
    acknowledged_produce<T>* const acknowledgements_ = nullptr;
    const std::size_t producer_;  // the producer_thread_number() of the thread that started it
    std::size_t done_ = 0;
    std::optional<std::stop_callback<stop_requested>> stop_callback_;
};

}  // namespace bufferqueue::detail
