// Internal: where a topic's storage calls run - decided once per topic, so no handle branches on it.
#pragma once

#include "bufferqueue/detail/completion.hpp"
#include "bufferqueue/detail/config.hpp"
#include "bufferqueue/detail/io_pool.hpp"
#include "bufferqueue/error.hpp"

#include <memory>
#include <optional>
#include <tuple>
#include <utility>

namespace bufferqueue::detail {

/// Runs the storage calls of asynchronous operations where blocking is allowed, then completes them
/// on the handler's executor. Chosen once per topic from `storage_traits<Partition>::blocking`:
/// - storage that never blocks (memory): the call runs inline, inside the initiating call, and the
///   completion is posted to the handler's executor (no extra post, no allocation beyond the
///   handler's own);
/// - blocking storage (mmap): the call runs on the queue's I/O pool; once the queue is destroyed the
///   pool refuses work and the operation completes with `errc::closed` without running the call.
///
/// Thread-safety: every member is const and may be called from any thread. The runner shares
/// ownership of the pool, so a copy stays valid after its topic is gone.
class storage_runner {
public:
    /// Storage that never blocks.
    storage_runner() noexcept = default;

    /// `pool` null: storage that never blocks; else blocking storage whose calls run on `pool`.
    explicit storage_runner(std::shared_ptr<io_pool> pool) noexcept : pool_(std::move(pool)) {}

    /// True when storage calls run on an I/O pool (tests and diagnostics only).
    bool blocking() const noexcept { return pool_ != nullptr; }

    /// Runs `work()` (returning `boost::system::error_code`, never throwing) where blocking is
    /// allowed and completes `handler` with its result, posted to the handler's executor (or
    /// `fallback`), never inside this call.
    template <class Handler, class Work>
    void complete(Handler&& handler, const boost::asio::any_io_executor& fallback, Work work) const
    {
        if (pool_) {
            complete_after_blocking_work(std::forward<Handler>(handler), fallback, *pool_, std::move(work));
            return;
        }
        post_completion(std::forward<Handler>(handler), fallback, work());
    }

    /// Starts an operation that may have to wait. `operation.attempt()` runs where blocking is
    /// allowed and returns the completion arguments (`std::optional<std::tuple<Args...>>`, the
    /// first an error code), or nothing when the operation must wait; then
    /// `std::move(operation).wait(completion)` parks the type-erased completion (allocated only
    /// then, for storage that never blocks). The arguments reach the handler through
    /// `Operation::delivery` when the operation names one (see `invoke_handler`), else as they are.
    /// Completions are posted, never run inside this call; the pool refusing the work completes
    /// with `errc::closed` (the other arguments empty).
    template <class... Args, class Handler, class Operation>
    void start(Handler&& handler, const boost::asio::any_io_executor& fallback, Operation operation) const
    {
        using delivery = typename delivery_of<Operation>::type;
        if (pool_) {
            auto completion = make_delivering_completion<delivery, Args...>(std::forward<Handler>(handler), fallback);
            const bool posted = pool_->post([&] {
                return [completion = std::move(completion), operation = std::move(operation)]() mutable {
                    if (std::optional<std::tuple<Args...>> done = operation.attempt()) {
                        std::apply([&](Args&... arguments) { completion->complete(std::move(arguments)...); }, *done);
                    } else {
                        std::move(operation).wait(std::move(completion));
                    }
                };
            });
            if (!posted) {
                complete_closed(*completion);  // the queue is gone
            }
            return;
        }
        if (std::optional<std::tuple<Args...>> done = operation.attempt()) {
            std::apply(
                [&](Args&... arguments) {
                    post_completion<delivery>(std::forward<Handler>(handler), fallback, std::move(arguments)...);
                },
                *done);
            return;
        }
        std::move(operation).wait(
            make_delivering_completion<delivery, Args...>(std::forward<Handler>(handler), fallback));
    }

    /// Continues a parked operation off the thread that woke it: posts the function `make()`
    /// returns to the I/O pool (blocking storage), else - storage that never blocks, or the pool
    /// refused it because the queue is gone (the closed topic then completes at once) - to
    /// `executor`. `make` is called once.
    template <class Make>
    void resume(const boost::asio::any_io_executor& executor, Make&& make) const
    {
        if (!pool_ || !pool_->post(make)) {
            boost::asio::post(executor, make());
        }
    }

private:
    template <class Operation>
    struct delivery_of {
        using type = invoke_handler;
    };
    template <class Operation>
        requires requires
        {
            typename Operation::delivery;
        }
    struct delivery_of<Operation> {
        using type = typename Operation::delivery;
    };

    template <class Error, class... Rest>
    static void complete_closed(pending_completion<Error, Rest...>& completion)
    {
        completion.complete(make_error_code(errc::closed), Rest()...);
    }

    std::shared_ptr<io_pool> pool_;  // null: storage never blocks
};

}  // namespace bufferqueue::detail
