// The item-type-free part of a produce that waits for room: topic/detail/produce_waiter.hpp.
#include "bufferqueue/topic/detail/produce_waiter.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <utility>

namespace bufferqueue::detail {

produce_waiter::produce_waiter(std::shared_ptr<const void> topic, topic_core& core,
                               pending_completion<boost::system::error_code>& completion, std::stop_token stop,
                               std::size_t items) noexcept
    : capacity_waiter(0), topic_(std::move(topic)), core_(core), completion_(completion), stop_(std::move(stop)),
      items_(items)
{
}

produce_waiter::~produce_waiter() = default;

void produce_waiter::run()
{
    capacity_gate& gate = *core_.gate();
    for (;;) {
        // Everything stored is a success, even when a close or cancel came in meanwhile.
        const std::size_t remaining = items_ - done_;
        if (remaining == 0) {
            complete_and_delete({});
            return;
        }
        if (core_.is_closed() || cancel_requested()) {
            complete_and_delete(boost::asio::error::operation_aborted);
            return;
        }
        set_requested(std::min(remaining, gate.capacity()));
        if (!gate.acquire_or_enqueue(*this)) {
            return;  // granted() or aborted() continues
        }
        if (const boost::system::error_code error = store_slice()) {
            complete_and_delete(error);
            return;
        }
    }
}

void produce_waiter::granted() noexcept
{
    boost::asio::post(completion_.executor(), [this] {
        capacity_gate& gate = *core_.gate();
        if (core_.is_closed() || cancel_requested()) {
            // Cancelled after the room was granted: the slice is not stored; the room goes on.
            core_.release_capacity(requested());
            gate.settle();
            complete_and_delete(boost::asio::error::operation_aborted);
            return;
        }
        const boost::system::error_code error = store_slice();
        gate.settle();
        if (error) {
            complete_and_delete(error);
        } else {
            run();
        }
    });
}

void produce_waiter::watch_cancellation()
{
    completion_.on_cancel([this] { core_.gate()->cancel(*this); });
    if (stop_.stop_possible()) {
        stop_callback_.emplace(stop_, stop_requested{this});
    }
}

void produce_waiter::aborted() noexcept
{
    boost::asio::post(completion_.executor(), [this] { complete_and_delete(boost::asio::error::operation_aborted); });
}

void produce_waiter::stop_requested::operator()() const noexcept
{
    waiter->core_.gate()->cancel(*waiter);
}

boost::system::error_code produce_waiter::store_slice()
{
    const std::size_t count = requested();
    if (const boost::system::error_code error = store(done_, count)) {
        return error;
    }
    done_ += count;
    return {};
}

}  // namespace bufferqueue::detail
