// The partitions one consumer reads: consumer/detail/assignment_set.hpp.
#include "bufferqueue/consumer/detail/assignment_set.hpp"

#include <algorithm>
#include <mutex>

namespace bufferqueue::detail {

assignment_set::assignment_set(std::vector<entry> entries) : entries_(std::move(entries))
{
    std::sort(entries_.begin(), entries_.end(),
              [](const entry& left, const entry& right) { return left.partition < right.partition; });
    entries_.erase(std::unique(entries_.begin(), entries_.end(),
                               [](const entry& left, const entry& right) { return left.partition == right.partition; }),
                   entries_.end());
    partitions_.reserve(entries_.size());
    for (const entry& each : entries_) {
        partitions_.push_back(each.partition);
    }
}

std::uint64_t assignment_set::lag() const noexcept
{
    std::uint64_t total = 0;
    for (const entry& each : entries_) {
        total += each.storage->lag(each.cursor);
    }
    return total;
}

std::shared_ptr<const assignment_set> assignment_set::with(std::span<const entry> added) const
{
    std::vector<entry> joined(entries_.begin(), entries_.end());
    joined.insert(joined.end(), added.begin(), added.end());
    return std::make_shared<const assignment_set>(std::move(joined));
}

std::shared_ptr<const assignment_set> assignment_set::without(std::span<const std::size_t> removed) const
{
    std::vector<entry> kept;
    for (const entry& each : entries_) {
        if (std::find(removed.begin(), removed.end(), each.partition) == removed.end()) {
            kept.push_back(each);
        }
    }
    return std::make_shared<const assignment_set>(std::move(kept));
}

void consumer_assignment::publish(set_pointer next)
{
    std::lock_guard lock(mutex_);
    for (const std::size_t partition : latest_->partitions()) {
        if (!next->contains(partition)) {
            dropped_.push_back(partition);
        }
    }
    latest_ = std::move(next);
    reassigned_.store(true, std::memory_order_seq_cst);
}

consumer_assignment::set_pointer consumer_assignment::latest() const
{
    std::lock_guard lock(mutex_);
    return latest_;
}

std::optional<std::size_t> consumer_assignment::release_held() noexcept
{
    if (!holding_) {
        return std::nullopt;
    }
    holding_ = false;
    last_.storage->release_batch(last_.cursor);
    if (!held_left_) {
        return std::nullopt;
    }
    held_left_ = false;
    return last_.partition;
}

}  // namespace bufferqueue::detail
