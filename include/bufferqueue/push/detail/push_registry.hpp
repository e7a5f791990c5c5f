// Internal: the push loops of one queue as the registry sees them, and the state every loop shares
// with it (start/stop, the error sink).
#pragma once

#include "bufferqueue/detail/config.hpp"

#include "bufferqueue/detail/completion.hpp"
#include "bufferqueue/push_consumer.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
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

}  // namespace bufferqueue::detail
