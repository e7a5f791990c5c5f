// Internal: an awaited produce into partitions that acknowledge appends (`acknowledging_partition`):
// it completes when the last of its items is acknowledged, holding no thread meanwhile.
#pragma once

#include "bufferqueue/storage/append_listener.hpp"
#include "bufferqueue/topic/detail/topic.hpp"

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>

namespace bufferqueue::detail {

/// The acknowledgements of one awaited produce. Counts the items handed to partitions and not
/// acknowledged yet, plus one while the topic is still handing items over (`handed_over` drops it);
/// when the count reaches zero, the operation completes - with no error when every item was
/// acknowledged and handed over, else with the first error reported (refusals and acknowledgements
/// in the order they arrived) - and the object deletes itself. Owns the operation (its items and
/// completion) until then. Thread-safe: acknowledgements arrive on any thread, also while the topic
/// still hands items over and inside `append_acknowledged`.
template <class T>
class acknowledged_produce final : public append_listener {
public:
    explicit acknowledged_produce(std::unique_ptr<produce_operation<T>> operation) : operation_(std::move(operation)) {}

    produce_operation<T>& operation() noexcept { return *operation_; }

    /// `items` more items are about to be handed to a partition: call before `append_acknowledged`.
    void expect(std::size_t items) noexcept { outstanding_.fetch_add(items, std::memory_order_relaxed); }

    void acknowledged(std::size_t items, boost::system::error_code error) noexcept override
    {
        if (error) {
            note_error(error);
        }
        release(items);
    }

    /// Every item is handed over (`error` empty), or handing over stopped with `error` (the items
    /// not taken were answered with `acknowledged` already). `this` may be gone afterwards.
    void handed_over(boost::system::error_code error) noexcept
    {
        if (error) {
            note_error(error);
        }
        release(1);
    }

private:
    void note_error(boost::system::error_code error) noexcept
    {
        const std::lock_guard lock(error_mutex_);
        if (!first_error_) {
            first_error_ = error;
        }
    }

    void release(std::size_t items) noexcept
    {
        if (items == 0 || outstanding_.fetch_sub(items, std::memory_order_acq_rel) != items) {
            return;
        }
        boost::system::error_code result;
        {
            const std::lock_guard lock(error_mutex_);
            result = first_error_;
        }
        operation_->completion().complete(result);  // posts: never runs the handler in here
        delete this;
    }

    std::unique_ptr<produce_operation<T>> operation_;
    std::atomic<std::size_t> outstanding_{1};  // items not acknowledged, +1 while handing over
    std::mutex error_mutex_;                   // taken only on errors and by the last release
    boost::system::error_code first_error_{};  // guarded by error_mutex_
};

}  // namespace bufferqueue::detail
