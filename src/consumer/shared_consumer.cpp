// The one pull-consumer implementation, shared by every storage backend and item type:
// consumer/detail/shared_consumer.hpp.
#include "bufferqueue/consumer/detail/shared_consumer.hpp"

#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/detail/process_barrier.hpp"

namespace bufferqueue::detail {

shared_consumer::~shared_consumer()
{
    unregister();
    detach();
}

template <class Operation>
boost::system::error_code shared_consumer::run_operation(Operation operation, std::optional<errc> unrecorded)
{
    if (!state_.try_begin()) {
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

void shared_consumer::record_outcome(const boost::system::error_code& error) noexcept
{
    last_error_.record(error, reader_.failure_detail(), [this] {
        return format_message("pull consumer of topic '{}' group '{}'", context_.topic_name, reader_.group());
    });
}

void shared_consumer::end_operation(bool handed_out_batch) noexcept
{
    state_.end();
    while (reader_.assignment().reassigned() && state_.try_begin_once() == operation_state::attempt::taken) {
        reader_.adopt_if_reassigned();
        state_.end();
    }
    if (!handed_out_batch && state_.closed(std::memory_order_seq_cst)) {
        detach_if_idle();
    }
}

void shared_consumer::detach_if_idle() noexcept
{
    if (!state_.try_begin()) {
        return;
    }
    detach();
    state_.end();
}

void shared_consumer::detach() noexcept
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

consume_attempt shared_consumer::begin_consume(bool will_wait)
{
    consume_attempt attempt;  // one object, returned everywhere: no move of it on return
    if (is_closed()) {
        attempt.error = make_error_code(errc::closed);
        return attempt;
    }
    if (!state_.try_begin()) {
        attempt.error = make_error_code(busy_error());
        return attempt;
    }
    if (is_closed()) {
        end_operation(false);
        attempt.error = make_error_code(errc::closed);
        return attempt;
    }
    reader_.release_held_batch();
    const bool delivered = reader_.scan(attempt.delivered, attempt.error);
    if (delivered || attempt.error || !will_wait) {
        record_outcome(attempt.error);
        if (attempt.error) {
            attempt.error_detail = std::exchange(reader_.failure_detail(), {});
        }
        end_operation(delivered);
    }
    return attempt;  // neither delivered nor failed, and will_wait: the caller waits
}

void shared_consumer::wait(completion_ptr completion)
{
#if BUFFERQUEUE_HAS_CANCELLATION_SLOTS
    // Once per operation (the hook stays until the completion completes); without slots it would
    // do nothing, so Boost < 1.77 does not build it at all.
    completion->on_cancel([weak = this->weak_from_this()] {
        if (auto self = weak.lock()) {
            self->cancel_wait();
        }
    });
#endif
    park(std::move(completion), delivery::post);
}

boost::system::error_code shared_consumer::commit()
{
    if (reader_.auto_commit()) {
        return errc::auto_commit_enabled;
    }
    return run_operation([this] { return reader_.commit(); }, errc::nothing_to_commit);
}

boost::system::error_code shared_consumer::skip(skipped_record& skipped)
{
    return run_operation([&] { return reader_.skip(skipped); }, errc::nothing_to_skip);
}

boost::system::error_code shared_consumer::unreadable(skipped_record& record)
{
    return run_operation([&] { return reader_.unreadable(record); }, std::nullopt);
}

void shared_consumer::close() noexcept
{
    if (completion_ptr aborted = state_.close()) {
        unregister();
        finish(std::move(aborted), boost::asio::error::operation_aborted, {}, delivery::post);
    }
    detach_if_idle();
}

std::string shared_consumer::last_error() const
{
    std::string text = last_error_.text();
    if (text.empty() && context_.membership != nullptr) {
        text = context_.membership->consumer_problem(reader_.group(), context_.index);
    }
    return text;
}

void shared_consumer::reassign(set_pointer next, std::vector<std::size_t>& released)
{
    reader_.assignment().publish(std::move(next));
    // A parked consume re-registers with the new set: resumed like a wake-up.
    if (const std::shared_ptr<data_waiter> parked = data_arrived()) {
        parked->wake();
        return;
    }
    // Idle: adopted here, holding the state for each adoption.
    while (reader_.assignment().reassigned() && state_.try_adopt()) {
        reader_.adopt_latest([&released](std::size_t partition) { released.push_back(partition); });
        state_.end();
    }
}

void shared_consumer::park(completion_ptr completion, delivery how)
{
    for (;;) {
        state_.prepare();
        reader_.adopt_if_reassigned();  // the signals registered with are always those of the current set
        for (const entry& each : reader_.current().entries()) {
            each.signal->add(*this);
        }
        heavy_fence();  // pairs with the producers' light_fence in partition_signal::notify
        bool retry = is_closed();
        const std::span<const entry> entries = reader_.current().entries();
        for (std::size_t index = 0; !retry && index < entries.size(); ++index) {
            if (entries[index].storage->prepare_wait(entries[index].cursor)) {
                reader_.note_data(index);  // its producer's notify may not have marked it yet
                retry = true;
            }
        }
        if (state_.park(completion, retry || reader_.assignment().reassigned())) {
            return;
        }
        unregister();
        if (is_closed() || state_.cancel_requested()) {
            finish(std::move(completion), boost::asio::error::operation_aborted, {}, how);
            return;
        }
        boost::system::error_code error;
        untyped_batch delivered;
        if (reader_.scan(delivered, error) || error) {
            finish(std::move(completion), error, delivered, how);
            return;
        }
    }
}

void shared_consumer::resume(completion_ptr completion)
{
    unregister();
    if (is_closed() || state_.cancel_requested()) {
        finish(std::move(completion), boost::asio::error::operation_aborted, {}, delivery::dispatch);
        return;
    }
    boost::system::error_code error;
    untyped_batch delivered;
    if (reader_.scan(delivered, error) || error) {
        finish(std::move(completion), error, delivered, delivery::dispatch);
        return;
    }
    park(std::move(completion), delivery::dispatch);
}

std::shared_ptr<data_waiter> shared_consumer::data_arrived() noexcept
{
    return state_.arrive([this]() -> std::shared_ptr<data_waiter> {
        auto self = this->weak_from_this().lock();
        if (!self) {
            return nullptr;
        }
        return std::shared_ptr<data_waiter>(std::move(self), static_cast<data_waiter*>(this));
    });
}

void shared_consumer::wake() noexcept
{
    if (completion_ptr resumed = state_.take_claimed()) {
        // The pull (and an auto-commit's file I/O) runs where the runner allows blocking. The
        // posted resumption counts as work itself and `resumed` keeps its own: untracked, the post
        // spares the shared work counter two atomic updates.
        const boost::asio::any_io_executor executor =
            boost::asio::prefer(resumed->executor(), boost::asio::execution::outstanding_work.untracked);
        context_.runner.resume(executor, [&] {
            return [self = this->shared_from_this(), resumed = std::move(resumed)]() mutable {
                self->resume(std::move(resumed));
            };
        });
    }
}

void shared_consumer::cancel_wait() noexcept
{
    if (completion_ptr cancelled = state_.cancel()) {
        unregister();
        finish(std::move(cancelled), boost::asio::error::operation_aborted, {}, delivery::post);
    }
}

void shared_consumer::unregister() noexcept
{
    for (const entry& each : reader_.current().entries()) {
        each.signal->remove(*this);
    }
}

void shared_consumer::finish(completion_ptr completion, boost::system::error_code error, untyped_batch delivered,
                             delivery how)
{
    record_outcome(error);
    reader_.failure_detail().clear();
    end_operation(!error && delivered.count != 0);
    if (how == delivery::dispatch) {
        completion->dispatch(error, delivered);
    } else {
        completion->complete(error, delivered);
    }
}

}  // namespace bufferqueue::detail
