// Internal: the typed topic - routing, bounded admission and consumer groups over storage partitions.
#pragma once

#include "bufferqueue/detail/partition_signal.hpp"
#include "bufferqueue/detail/thread_number.hpp"
#include "bufferqueue/detail/type_name.hpp"
#include "bufferqueue/storage/group_membership.hpp"
#include "bufferqueue/storage/storage.hpp"
#include "bufferqueue/topic/detail/acknowledged_produce.hpp"
#include "bufferqueue/topic/detail/capacity_gate.hpp"
#include "bufferqueue/topic/detail/consumer_groups.hpp"
#include "bufferqueue/topic/detail/partition_slot.hpp"
#include "bufferqueue/topic/detail/produce_waiter.hpp"
#include "bufferqueue/topic/detail/router.hpp"
#include "bufferqueue/topic/detail/topic.hpp"
#include "bufferqueue/topic/detail/topic_statistics.hpp"

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
/// completes it. Over partitions that acknowledge appends (`acknowledging_partition`), an awaited
/// produce completes on the last acknowledgement of its items (`acknowledged_produce`), a bounded
/// topic admitting them first. Thread-safe.
template <class T, class Partition>
class basic_topic final : public topic<T>,
                          public membership_target,
                          public std::enable_shared_from_this<basic_topic<T, Partition>> {
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
        /// Group membership owned outside the topic (see `group_membership`); null: the topic's own
        /// contiguous split.
        std::shared_ptr<group_membership> membership{};
    };

    basic_topic(settings configuration, std::vector<std::unique_ptr<slot_type>> slots)
        : name_(std::move(configuration.name)), type_name_(readable_type_name<T>()),
          partition_key_(std::move(configuration.partition_key)), full_mode_(configuration.full_mode),
          executor_(std::move(configuration.executor)), slots_(std::move(slots)), slot_bases_(erased(slots_)),
          resources_(std::move(configuration.resources)),
          produce_runner_(storage_appends_block<Partition>() ? configuration.blocking_pool : nullptr),
          runner_(std::move(configuration.blocking_pool)),
          router_(slots_, configuration.producer_lanes, configuration.bounded_capacity.has_value())
    {
        if (configuration.bounded_capacity) {
            gate_.emplace(*configuration.bounded_capacity);
        }
        if (configuration.membership) {
            membership_ = std::move(configuration.membership);
            link_ = std::make_shared<membership_link>(static_cast<membership_target&>(*this));
            groups_.use_outside_membership(*membership_);
            membership_->bind(membership_port(link_));
        }
    }

    ~basic_topic() override { close(); }

    const std::string& name() const noexcept override { return name_; }
    std::type_index item_type() const noexcept override { return typeid(T); }
    const std::string& item_type_name() const noexcept override { return type_name_; }
    std::uint32_t partition_count() const noexcept override { return static_cast<std::uint32_t>(slots_.size()); }
    const key_selector<T>& partition_key() const noexcept override { return partition_key_; }
    const boost::asio::any_io_executor& executor() const noexcept override { return executor_; }
    const storage_runner& runner() const noexcept override { return produce_runner_; }
    bool is_closed() const noexcept { return closed_.load(std::memory_order_acquire); }
    /// Partition `partition`'s storage, to look at (tests, tools); `partition` < `partition_count()`.
    const Partition& storage_of(std::size_t partition) const noexcept { return slots_[partition]->storage; }

    void close() noexcept override
    {
        if (closed_.exchange(true, std::memory_order_acq_rel)) {
            return;
        }
        if (membership_) {
            membership_->close();  // leaves the groups; then the port refuses
            link_->clear();
        }
        if (gate_) {
            gate_->close();
        }
        groups_.close_all();
        for (const auto& slot : slots_) {
            slot->storage.close();
        }
        resources_.reset();
    }

    produce_outcome produce_now(std::span<const T> items, const std::uint32_t* partitions, bool allow_wait,
                                bool movable) override
    {
        if (is_closed()) {
            return produce_outcome::closed;
        }
        if (items.empty()) {
            return produce_outcome::done;
        }
        if constexpr (acknowledging_partition<Partition, T>) {
            if (allow_wait) {
                return produce_outcome::must_wait;  // produce_waiting completes it on the acknowledgements
            }
        }
        if (gate_) {
            const bool may_wait = allow_wait && full_mode_ == full_mode::wait;
            // try_acquire fails while others wait for room, so this produce queues behind them.
            if (items.size() > gate_->capacity() || !gate_->try_acquire(items.size())) {
                return may_wait ? produce_outcome::must_wait : produce_outcome::no_room;
            }
        }
        if constexpr (acknowledging_partition<Partition, T>) {
            try {
                append_admitted(items, partitions, calling_producer_thread, movable);
            } catch (const error& failure) {
                if (failure.code().value() != static_cast<int>(errc::queue_full)) {
                    throw;
                }
                return produce_outcome::no_room;  // the storage's own send queue is full
            }
        } else {
            append_admitted(items, partitions, calling_producer_thread, movable);
        }
        return produce_outcome::done;
    }

    void produce_waiting(std::unique_ptr<produce_operation<T>> operation) override
    {
        if constexpr (acknowledging_partition<Partition, T>) {
            auto* acknowledgements = new acknowledged_produce<T>(std::move(operation));  // deletes itself
            if (gate_ && full_mode_ == full_mode::wait) {
                auto* waiter = new produce_waiter<T, basic_topic>(this->shared_from_this(), *acknowledgements,
                                                                  producer_thread_number());
                waiter->watch_cancellation();
                waiter->run();
                return;
            }
            produce_operation<T>& started = acknowledgements->operation();
            boost::system::error_code error;
            if (is_closed()) {
                error = make_error_code(errc::closed);
            } else if (gate_ &&
                       (started.items().size() > gate_->capacity() || !gate_->try_acquire(started.items().size()))) {
                error = make_error_code(errc::queue_full);  // full_mode::fail: refused whole, nothing handed over
            } else {
                try {
                    append_admitted(started.items(), started.partitions(), calling_producer_thread, started.movable(),
                                    acknowledgements);
                } catch (...) {
                    error = current_exception_code(errc::invalid_argument);
                }
            }
            acknowledgements->handed_over(error);
        } else {
            auto* waiter = new produce_waiter<T, basic_topic>(this->shared_from_this(), std::move(operation),
                                                              producer_thread_number());
            waiter->watch_cancellation();
            waiter->run();
        }
    }

    std::vector<std::shared_ptr<consumer_base>> create_consumers(const pull_consumer_options& options,
                                                                 std::size_t count) override
    {
        consumer_context context{.topic_name = name_,
                                 .executor = executor_,
                                 .runner = runner_,
                                 .topic_closed = &closed_,
                                 .gate = gate_ ? &*gate_ : nullptr,
                                 .keep_alive = this->shared_from_this()};
        return groups_.create(name_, slot_bases_, options, count, context);  // tells the membership
    }

    topic_stats stats() override
    {
        if (membership_) {
            membership_->refresh_statistics();
        }
        return collect_topic_stats(name_, type_name_, storage_backend_name<Partition>(), slot_bases_, groups_,
                                   gate_ ? &*gate_ : nullptr);
    }

    bool has_group(const std::string& group) override { return groups_.has_group(slot_bases_, group); }

    bool remove_group(const std::string& group) override
    {
        const bool here = groups_.remove(name_, slot_bases_, group, closed_, gate_ ? &*gate_ : nullptr);
        const bool elsewhere = membership_ ? membership_->remove_group(group) : false;
        return here || elsewhere;
    }

    void assign_partitions(const std::string& group, std::size_t consumer,
                           std::span<const std::size_t> partitions) override
    {
        groups_.assign(name_, group, consumer, partitions);
    }

    void revoke_partitions(const std::string& group, std::size_t consumer,
                           std::span<const std::size_t> partitions) override
    {
        groups_.revoke(name_, group, consumer, partitions);
    }

    std::vector<std::size_t> partitions_in_use(const std::string& group) override
    {
        return groups_.partitions_in_use(name_, group);
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
    friend class produce_waiter<T, basic_topic>;

    static std::vector<partition_slot_base*> erased(const std::vector<std::unique_ptr<slot_type>>& slots)
    {
        std::vector<partition_slot_base*> bases;
        bases.reserve(slots.size());
        for (const auto& slot : slots) {
            bases.push_back(slot.get());
        }
        return bases;
    }

    // Routes and stores items whose room (if bounded) is already reserved, in the lane of the
    // producing thread `producer` (a `producer_thread_number`; `calling_producer_thread`: this
    // one), moving them in when `movable`; `acknowledgements`: the awaited produce the partitions'
    // acknowledgements go to (`acknowledging_partition`), or null.
    void append_admitted(std::span<const T> items, const std::uint32_t* partitions, std::size_t producer, bool movable,
                         acknowledged_produce<T>* acknowledgements = nullptr)
    {
        std::size_t stored = 0;
        try {
            router_.route(items, partitions, stored, producer, movable, acknowledgements);
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
    const std::vector<partition_slot_base*> slot_bases_;  // slots_, erased: what the consumer groups use
    std::optional<capacity_gate> gate_;
    std::shared_ptr<void> resources_;      // released by close()
    const storage_runner produce_runner_;  // decided once: the pool when appends block, else inline
    const storage_runner runner_;          // decided once: the consumers' (the I/O pool for blocking storage)
    topic_router<T, Partition> router_;    // over slots_
    alignas(64) std::atomic<bool> closed_{false};
    consumer_groups groups_;
    // Outside membership, when the backend has it (destroyed before groups_, which the port reaches).
    std::shared_ptr<group_membership> membership_;
    std::shared_ptr<membership_link> link_;  // the port's way in; cleared when the topic closes
};

}  // namespace bufferqueue::detail
