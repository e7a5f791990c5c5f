// Internal: the typed topic - routing, bounded admission and consumer groups over storage partitions.
#pragma once

#include "bufferqueue/consumer/detail/shared_consumer.hpp"
#include "bufferqueue/detail/partition_signal.hpp"
#include "bufferqueue/detail/thread_number.hpp"
#include "bufferqueue/detail/type_name.hpp"
#include "bufferqueue/storage/storage.hpp"
#include "bufferqueue/topic/detail/capacity_gate.hpp"
#include "bufferqueue/topic/detail/group_cursors.hpp"
#include "bufferqueue/topic/detail/partition_slot.hpp"
#include "bufferqueue/topic/detail/produce_waiter.hpp"
#include "bufferqueue/topic/detail/router.hpp"
#include "bufferqueue/topic/detail/topic.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <typeindex>
#include <vector>

namespace bufferqueue::detail {

/// A typed topic over any `storage_partition`. Routing (topic_router, router.hpp) is per item:
/// round-robin advances once per item (also inside a batch), a key selector sends equal keys to one
/// partition in input order. A bounded topic admits a batch whole before routing it, so a failed admission neither
/// advances round-robin selection nor holds capacity. Admission is FIFO: while producers wait
/// for room, nobody takes room ahead of them. A waiting produce stores its later slices in the
/// lane, and with the round-robin position, of the thread that started it, whichever thread
/// completes it. Thread-safe.
template <class T, class Partition>
class basic_topic final : public topic<T>, public std::enable_shared_from_this<basic_topic<T, Partition>> {
    static_assert(storage_partition<Partition, T>);

public:
    using slot_type = partition_slot<Partition>;

    struct settings {
        std::string name;
        key_selector<T> partition_key;
        std::optional<std::size_t> bounded_capacity;
        bufferqueue::full_mode full_mode = bufferqueue::full_mode::wait;
        boost::asio::any_io_executor executor;
        /// Held until the topic closes, after its partitions (for example a directory lock).
        std::shared_ptr<void> resources{};
        /// Runs the blocking file I/O of asynchronous operations; null when storage never blocks.
        std::shared_ptr<io_pool> blocking_pool{};
        /// Producer lanes: each lane has its own round-robin position (see `producer_lane`).
        std::size_t producer_lanes = 1;
    };

    basic_topic(settings configuration, std::vector<std::unique_ptr<slot_type>> slots)
        : name_(std::move(configuration.name)), type_name_(readable_type_name<T>()),
          partition_key_(std::move(configuration.partition_key)), full_mode_(configuration.full_mode),
          executor_(std::move(configuration.executor)), slots_(std::move(slots)),
          resources_(std::move(configuration.resources)), blocking_pool_(std::move(configuration.blocking_pool)),
          router_(slots_, configuration.producer_lanes, configuration.bounded_capacity.has_value())
    {
        if (configuration.bounded_capacity) {
            gate_.emplace(*configuration.bounded_capacity);
        }
    }

    ~basic_topic() override { close(); }

    const std::string& name() const noexcept override { return name_; }
    std::type_index item_type() const noexcept override { return typeid(T); }
    const std::string& item_type_name() const noexcept override { return type_name_; }
    std::uint32_t partition_count() const noexcept override { return static_cast<std::uint32_t>(slots_.size()); }
    const key_selector<T>& partition_key() const noexcept override { return partition_key_; }
    const boost::asio::any_io_executor& executor() const noexcept override { return executor_; }
    io_pool* blocking_pool() const noexcept override { return blocking_pool_.get(); }
    bool is_closed() const noexcept { return closed_.load(std::memory_order_acquire); }
    slot_type& slot(std::size_t partition) noexcept { return *slots_[partition]; }

    void close() noexcept override
    {
        if (closed_.exchange(true, std::memory_order_acq_rel)) {
            return;
        }
        if (gate_) {
            gate_->close();
        }
        std::vector<std::weak_ptr<consumer_base<T>>> consumers;
        {
            std::lock_guard lock(groups_mutex_);
            consumers.swap(consumers_);
        }
        for (const auto& weak : consumers) {
            if (auto consumer = weak.lock()) {
                consumer->close();
            }
        }
        for (const auto& slot : slots_) {
            slot->storage.close();
        }
        resources_.reset();
    }

    produce_outcome produce_now(std::span<const T> items, const std::uint32_t* partitions, bool allow_wait) override
    {
        if (is_closed()) {
            return produce_outcome::closed;
        }
        if (items.empty()) {
            return produce_outcome::done;
        }
        if (gate_) {
            const bool may_wait = allow_wait && full_mode_ == full_mode::wait;
            // try_acquire fails while others wait for room, so this produce queues behind them.
            if (items.size() > gate_->capacity() || !gate_->try_acquire(items.size())) {
                return may_wait ? produce_outcome::must_wait : produce_outcome::no_room;
            }
        }
        append_admitted(items, partitions);
        return produce_outcome::done;
    }

    void produce_waiting(std::unique_ptr<produce_operation<T>> operation) override
    {
        auto* waiter = new produce_waiter<T, basic_topic>(this->shared_from_this(), std::move(operation),
                                                          producer_thread_number());
        waiter->watch_cancellation();
        waiter->run();
    }

    std::vector<std::shared_ptr<consumer_base<T>>> create_consumers(const pull_consumer_options& options,
                                                                    std::size_t count) override
    {
        const std::size_t partitions = slots_.size();
        if (count < 1 || count > partitions) {
            throw error(errc::too_many_consumers,
                        "topic '" + name_ + "' group '" + options.group + "': " + std::to_string(count) +
                            " consumers requested, but the count must be between 1 and the topic's " +
                            std::to_string(partitions) + " partitions");
        }
        std::lock_guard lock(groups_mutex_);
        if (is_closed()) {
            throw error(errc::closed, "topic '" + name_ + "' is closed");
        }
        if (const auto found = groups_.find(options.group); found != groups_.end() && found->second != 0) {
            throw error(errc::group_exists, "topic '" + name_ + "': consumer group '" + options.group +
                                                "' already exists and " + std::to_string(found->second) +
                                                " of its consumers are open");
        }
        // All or nothing (group_cursors.hpp); a group reopened or known from disk is kept as it was.
        const auto release = [this](std::uint64_t items) { release_capacity(static_cast<std::size_t>(items)); };
        const bool known = groups_.contains(options.group);
        auto opened = open_group_cursors<typename Partition::cursor>(name_, slots_, options.group, release);
        try {
            std::size_t& open = groups_[options.group];
            auto created = make_consumers(options, count, opened.cursors);
            open = created.size();
            return created;
        } catch (...) {
            if (!known) {
                groups_.erase(options.group);
            }
            undo_group_cursors(slots_, options.group, opened.created_in, release);
            throw;
        }
    }

    bool has_group(const std::string& group) override
    {
        std::lock_guard lock(groups_mutex_);
        return groups_.contains(group) || std::any_of(slots_.begin(), slots_.end(),
                                                      [&](const auto& slot) { return slot->storage.has_group(group); });
    }

    bool remove_group(const std::string& group) override
    {
        std::lock_guard lock(groups_mutex_);
        if (is_closed()) {
            throw error(errc::closed, "topic '" + name_ + "' is closed: cannot remove consumer group '" + group + "'");
        }
        const auto found = groups_.find(group);
        if (found != groups_.end() && found->second != 0) {
            throw error(errc::group_in_use, "topic '" + name_ + "': cannot remove consumer group '" + group +
                                                "': " + std::to_string(found->second) +
                                                " of its consumers are still open (close them first)");
        }
        const bool held = remove_group_cursors(
            name_, slots_, group, [this](std::uint64_t items) { release_capacity(static_cast<std::size_t>(items)); });
        const bool known = held || found != groups_.end();
        if (found != groups_.end()) {
            groups_.erase(found);
        }
        return known;
    }

    /// A counted consumer of `group` detached (closed): the group may be opened again once none is left.
    void consumer_released(const std::string& group) noexcept
    {
        std::lock_guard lock(groups_mutex_);
        if (const auto found = groups_.find(group); found != groups_.end() && found->second != 0) {
            --found->second;
        }
    }

    /// Gives back room that every group has committed past.
    void release_capacity(std::size_t count) noexcept
    {
        if (gate_) {
            gate_->release(count);
        }
    }

    /// Items admitted and not yet committed by every group (bounded topics), for tests and metrics.
    std::size_t admitted_items() const noexcept { return gate_ ? gate_->used() : 0; }

private:
    // Builds the consumers of a group over its partitions' cursors; called with groups_mutex_ held.
    std::vector<std::shared_ptr<consumer_base<T>>>
    make_consumers(const pull_consumer_options& options, std::size_t count,
                   const std::vector<typename Partition::cursor*>& cursors)
    {
        const std::size_t partitions = slots_.size();
        std::vector<std::shared_ptr<shared_consumer<T, Partition>>> made;
        const std::size_t base_share = partitions / count;
        const std::size_t larger_shares = partitions % count;
        std::size_t next_partition = 0;
        for (std::size_t consumer = 0; consumer < count; ++consumer) {
            const std::size_t share = base_share + (consumer < larger_shares ? 1 : 0);
            std::vector<typename shared_consumer<T, Partition>::assignment> assignments;
            for (std::size_t i = 0; i < share; ++i, ++next_partition) {
                slot_type& slot = *slots_[next_partition];
                assignments.push_back({next_partition, &slot.storage, &slot.signal, cursors[next_partition]});
            }
            made.push_back(std::make_shared<shared_consumer<T, Partition>>(this->shared_from_this(), options,
                                                                           std::move(assignments)));
        }
        std::erase_if(consumers_, [](const auto& weak) { return weak.expired(); });
        consumers_.reserve(consumers_.size() + made.size());
        std::vector<std::shared_ptr<consumer_base<T>>> created(made.begin(), made.end());
        for (const auto& each : made) {  // nothing throws from here on
            each->mark_counted();
            consumers_.push_back(each);
        }
        return created;
    }

    friend class produce_waiter<T, basic_topic>;

    // Routes and stores items whose room (if bounded) is already reserved, in the lane of the
    // producing thread `producer` (a `producer_thread_number`; `calling_thread`: this one).
    void append_admitted(std::span<const T> items, const std::uint32_t* partitions,
                         std::size_t producer = item_source<T>::calling_thread)
    {
        std::size_t stored = 0;
        try {
            router_.route(items, partitions, stored, producer);
        } catch (...) {
            release_capacity(items.size() - stored);
            throw;
        }
    }

    const std::string name_;
    const std::string type_name_;
    const key_selector<T> partition_key_;
    const bufferqueue::full_mode full_mode_;
    const boost::asio::any_io_executor executor_;
    const std::vector<std::unique_ptr<slot_type>> slots_;
    std::optional<capacity_gate> gate_;
    std::shared_ptr<void> resources_;               // released by close()
    const std::shared_ptr<io_pool> blocking_pool_;  // shared with the queue and its other topics
    topic_router<T, Partition> router_;             // over slots_
    alignas(64) std::atomic<bool> closed_{false};

    std::mutex groups_mutex_;  // registration only, never on a data path
    // Each group created in this process, with how many of its consumers are open (not detached).
    std::map<std::string, std::size_t, std::less<>> groups_;  // guarded by groups_mutex_
    std::vector<std::weak_ptr<consumer_base<T>>> consumers_;  // guarded by groups_mutex_
};

template <class T, class Partition>
const std::string& shared_consumer<T, Partition>::topic_name() const noexcept
{
    return topic_->name();
}

template <class T, class Partition>
const boost::asio::any_io_executor& shared_consumer<T, Partition>::default_executor() const noexcept
{
    return topic_->executor();
}

template <class T, class Partition>
io_pool* shared_consumer<T, Partition>::blocking_pool() const noexcept
{
    return topic_->blocking_pool();
}

template <class T, class Partition>
void shared_consumer<T, Partition>::consumer_released() noexcept
{
    topic_->consumer_released(group_);
}

template <class T, class Partition>
bool shared_consumer<T, Partition>::is_closed() const noexcept
{
    return closed_.load(std::memory_order_acquire) || topic_->is_closed();
}

template <class T, class Partition>
boost::system::error_code shared_consumer<T, Partition>::commit_position(std::size_t index, std::uint64_t next_offset)
{
    const assignment& each = assignments_[index];
    try {
        topic_->release_capacity(each.storage->commit(*each.cursor, next_offset));
    } catch (...) {
        failure_detail_ = exception_message();
        return current_exception_code(errc::io_error);
    }
    return {};
}

}  // namespace bufferqueue::detail
