#include "bufferqueue/push_consumer.hpp"

#include "bufferqueue/push/detail/pause_for.hpp"
#include "bufferqueue/push/detail/push_registry.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "bufferqueue/detail/message.hpp"

#include <cstdio>
#include <string_view>

namespace bufferqueue {

void default_push_error_sink(const push_error& failure)
{
    // One fprintf call: one line, not interleaved with other threads' writes to stderr.
    const auto length = [](std::string_view text) { return static_cast<int>(text.size()); };
    std::fprintf(stderr, "bufferqueue: push consumer of topic '%.*s' group '%.*s' failed: %.*s\n",
                 length(failure.topic), failure.topic.data(), length(failure.group), failure.group.data(),
                 length(failure.message), failure.message.data());
}

namespace detail {

boost::asio::awaitable<void> pause_for(std::chrono::steady_clock::duration duration)
{
    boost::asio::steady_timer pause(co_await boost::asio::this_coro::executor, duration);
    co_await pause.async_wait(boost::asio::use_awaitable);
}

void push_registry::require_registering(const std::string& topic, const std::string& group) const
{
    std::lock_guard lock(mutex_);
    switch (phase_) {
    case phase::registering: return;
    case phase::started:
        throw error(
            errc::invalid_argument,
            detail::format_message("push consumer of topic '{}' group '{}': push consumers must be added before "
                                   "buffer_queue::start()",
                                   topic, group));
    case phase::stopped:
        throw error(errc::closed,
                    detail::format_message("push consumer of topic '{}' group '{}': the queue's push consumers were "
                                           "stopped or the queue is closed",
                                           topic, group));
    }
}

void push_registry::add(std::vector<std::shared_ptr<push_loop_base>> loops, const std::string& topic,
                        const std::string& group)
{
    require_registering(topic, group);
    std::lock_guard lock(mutex_);
    loops_.insert(loops_.end(), loops.begin(), loops.end());
}

void push_registry::start(const boost::asio::any_io_executor& executor)
{
    std::vector<std::shared_ptr<push_loop_base>> starting;
    std::shared_ptr<push_registry> self;
    {
        std::lock_guard lock(mutex_);
        if (phase_ == phase::started) {
            return;
        }
        if (phase_ == phase::stopped) {
            throw error(errc::closed, "buffer_queue::start(): the push consumers were stopped or the queue is "
                                      "closed; a stopped queue does not start them again");
        }
        phase_ = phase::started;
        running_ = loops_.size();
        starting = loops_;
        self = shared_from_this();
    }
    for (const auto& loop : starting) {
        loop->spawn(executor, self);
    }
}

void push_registry::stop(std::unique_ptr<pending_completion<>> completion)
{
    std::vector<std::shared_ptr<push_loop_base>> stopping;
    {
        std::lock_guard lock(mutex_);
        phase_ = phase::stopped;
        if (running_ != 0) {
            stop_waiters_.push_back(std::move(completion));
            stopping = loops_;
        }
    }
    if (completion) {
        completion->complete();
        return;
    }
    for (const auto& loop : stopping) {
        loop->request_stop();
    }
}

void push_registry::close() noexcept
{
    closed_.store(true, std::memory_order_release);
    std::lock_guard lock(mutex_);
    phase_ = phase::stopped;
    // Wakes loops waiting out a retry backoff (waiting pulls end as the topics close). Cancelling
    // takes only the loop's own lock and runs no handler inline.
    for (const auto& loop : loops_) {
        loop->cancel_backoff();
    }
}

void push_registry::loop_ended() noexcept
{
    std::vector<std::unique_ptr<pending_completion<>>> waiters;
    {
        std::lock_guard lock(mutex_);
        if (--running_ == 0) {
            waiters.swap(stop_waiters_);
            loops_.clear();  // the loops own nothing more that anyone needs
        }
    }
    for (auto& waiter : waiters) {
        waiter->complete();
    }
}

void push_registry::set_error_sink(push_error_sink sink)
{
    auto shared = sink ? std::make_shared<const push_error_sink>(std::move(sink)) : nullptr;
    std::lock_guard lock(mutex_);
    sink_ = std::move(shared);
}

void push_registry::report(const std::string& topic, const std::string& group, const std::exception_ptr& exception,
                           const std::string& message) noexcept
{
    std::shared_ptr<const push_error_sink> sink;
    {
        std::lock_guard lock(mutex_);
        sink = sink_;
    }
    try {
        const push_error failure{.topic = topic, .group = group, .exception = exception, .message = message};
        if (sink) {
            (*sink)(failure);
        } else {
            default_push_error_sink(failure);
        }
    } catch (...) {
        // A throwing sink must not end the loop.
    }
}

void push_registry::report(const std::string& topic, const std::string& group) noexcept
{
    std::shared_ptr<const push_error_sink> sink;
    {
        std::lock_guard lock(mutex_);
        sink = sink_;
    }
    try {
        const std::string message = exception_message();
        const push_error failure{
            .topic = topic, .group = group, .exception = std::current_exception(), .message = message};
        if (sink) {
            (*sink)(failure);
        } else {
            default_push_error_sink(failure);
        }
    } catch (...) {
        // A throwing sink (or no memory for the message) must not end the loop.
    }
}

}  // namespace detail

}  // namespace bufferqueue
