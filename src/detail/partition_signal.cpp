// partition_signal's registration and wake-up (detail/partition_signal.hpp): compiled once; the
// producer's check for waiters (`notify`) stays inline in the header.
#include "bufferqueue/detail/partition_signal.hpp"

#include <algorithm>
#include <array>
#include <mutex>

namespace bufferqueue::detail {

void partition_signal::add(data_waiter& waiter)
{
    std::lock_guard lock(mutex_);
    waiters_.push_back(&waiter);
    waiting_.fetch_add(1, std::memory_order_seq_cst);
}

void partition_signal::remove(data_waiter& waiter) noexcept
{
    std::lock_guard lock(mutex_);
    const auto found = std::find(waiters_.begin(), waiters_.end(), &waiter);
    if (found != waiters_.end()) {
        waiters_.erase(found);
        waiting_.fetch_sub(1, std::memory_order_seq_cst);
    }
}

void partition_signal::append_waiters(std::vector<const data_waiter*>& out)
{
    std::lock_guard lock(mutex_);
    for (const data_waiter* waiter : waiters_) {
        if (waiter->is_parked_consume()) {
            out.push_back(waiter);
        }
    }
}

void partition_signal::wake_waiters() noexcept
{
    std::array<std::shared_ptr<data_waiter>, inline_wakes> woken;
    std::vector<std::shared_ptr<data_waiter>> more;
    std::size_t count = 0;
    {
        std::lock_guard lock(mutex_);
        for (data_waiter* waiter : waiters_) {
            if (auto claimed = waiter->data_arrived()) {
                if (count < inline_wakes) {
                    woken[count++] = std::move(claimed);
                } else {
                    more.push_back(std::move(claimed));
                }
            }
        }
        waiting_.fetch_sub(static_cast<std::uint32_t>(waiters_.size()), std::memory_order_seq_cst);
        waiters_.clear();
    }
    for (std::size_t index = 0; index < count; ++index) {
        woken[index]->wake();
    }
    for (const auto& waiter : more) {
        waiter->wake();
    }
}

}  // namespace bufferqueue::detail
