// Internal: completing a `co_await produce(...)` on a Kafka topic once every record of the call has
// its delivery report.
#pragma once

#include "bufferqueue/storage/kafka/detail/kafka_producer.hpp"
#include "bufferqueue/topic/detail/topic.hpp"

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

namespace bufferqueue::detail {

/// The delivery reports of one awaited produce call. Holds one reference per record handed to the
/// producer plus one while the call is still handing records over (`finish_enqueueing` drops it);
/// when the last reference goes, the operation completes - with no error when every record was
/// acknowledged, else with the first error reported (in report order) - and the object deletes
/// itself. Thread-safe: reports may arrive on the executor and inside `kafka_producer::close` at once.
template <class T>
class kafka_produce_call final : public kafka_delivery_listener {
public:
    explicit kafka_produce_call(std::unique_ptr<produce_operation<T>> operation) : operation_(std::move(operation)) {}

    /// One more record is about to be handed over (call before `kafka_producer::produce`).
    void add_record() noexcept { outstanding_.fetch_add(1, std::memory_order_relaxed); }

    /// The record announced by `add_record` was not handed over after all: it fails the call with `error`.
    void record_refused(boost::system::error_code error) noexcept
    {
        note_error(error);
        release();
    }

    /// Every record is handed over (or the call stopped at the first refusal); `this` may be gone after.
    void finish_enqueueing() noexcept { release(); }

    void delivered(std::int32_t, boost::system::error_code error, const std::string&) noexcept override
    {
        if (error) {
            note_error(error);
        }
        release();
    }

private:
    void note_error(boost::system::error_code error) noexcept
    {
        const std::lock_guard lock(mutex_);
        if (!first_error_) {
            first_error_ = error;
        }
    }

    void release() noexcept
    {
        if (outstanding_.fetch_sub(1, std::memory_order_acq_rel) != 1) {
            return;
        }
        boost::system::error_code result;
        {
            const std::lock_guard lock(mutex_);
            result = first_error_;
        }
        operation_->completion().complete(result);  // posts: never runs the handler in here
        delete this;
    }

    std::unique_ptr<produce_operation<T>> operation_;  // owns the items until the call completes
    std::atomic<std::size_t> outstanding_{1};          // records without a report, +1 while enqueueing
    std::mutex mutex_;
    boost::system::error_code first_error_{};  // guarded by mutex_
};

}  // namespace bufferqueue::detail
