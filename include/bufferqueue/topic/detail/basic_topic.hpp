// Internal: the typed topic - routing, bounded admission and consumer groups over storage partitions
// (the parts that depend on neither the item type nor the storage: topic_core.hpp, compiled once).
#pragma once

#include "bufferqueue/detail/thread_number.hpp"
#include "bufferqueue/detail/type_name.hpp"
#include "bufferqueue/storage/group_membership.hpp"
#include "bufferqueue/storage/storage.hpp"
#include "bufferqueue/topic/detail/acknowledged_produce.hpp"
#include "bufferqueue/topic/detail/capacity_gate.hpp"
#include "bufferqueue/topic/detail/partition_slot.hpp"
#include "bufferqueue/topic/detail/produce_waiter.hpp"
#include "bufferqueue/topic/detail/router.hpp"
#include "bufferqueue/topic/detail/topic.hpp"
#include "bufferqueue/topic/detail/topic_core.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
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
        /// Group membership owned outside the topic (see `group_membership`); null: the topic's own
        /// contiguous split.
        std::shared_ptr<group_membership> membership{};
    };

    basic_topic(settings configuration, std::vector<std::unique_ptr<slot_type>> slots)
        : partition_key_(std::move(configuration.partition_key)), slots_(std::move(slots)),
          produce_runner_(storage_appends_block<Partition>() ? configuration.blocking_pool : nullptr),
          router_(slots_, configuration.producer_lanes, configuration.bounded_capacity.has_value()),
          core_(core_settings(std::move(configuration)), erased(slots_))
    {
    }

    ~basic_topic() override { close(); }

    const std::string& name() const noexcept override { return core_.name(); }
    std::type_index item_type() const noexcept override { return typeid(T); }
    const std::string& item_type_name() const noexcept override { return core_.item_type_name(); }
    std::uint32_t partition_count() const noexcept override { return static_cast<std::uint32_t>(slots_.size()); }
    const key_selector<T>& partition_key() const noexcept override { return partition_key_; }
    const boost::asio::any_io_executor& executor() const noexcept override { return core_.executor(); }
    const storage_runner& runner() const noexcept override { return produce_runner_; }
    bool is_closed() const noexcept { return core_.is_closed(); }

    void close() noexcept override { core_.close(); }

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
        if (capacity_gate* gate = core_.gate()) {
            const bool may_wait = allow_wait && core_.full_mode() == full_mode::wait;
            // try_acquire fails while others wait for room, so this produce queues behind them.
            if (items.size() > gate->capacity() || !gate->try_acquire(items.size())) {
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
            capacity_gate* gate = core_.gate();
            if (gate != nullptr && core_.full_mode() == full_mode::wait) {
                auto* waiter = new typed_produce_waiter<T, basic_topic>(this->shared_from_this(), core_,
                                                                        *acknowledgements, producer_thread_number());
                waiter->watch_cancellation();
                waiter->run();
                return;
            }
            produce_operation<T>& started = acknowledgements->operation();
            boost::system::error_code error;
            if (is_closed()) {
                error = make_error_code(errc::closed);
            } else if (gate != nullptr &&
                       (started.items().size() > gate->capacity() || !gate->try_acquire(started.items().size()))) {
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
            auto* waiter = new typed_produce_waiter<T, basic_topic>(this->shared_from_this(), core_,
                                                                    std::move(operation), producer_thread_number());
            waiter->watch_cancellation();
            waiter->run();
        }
    }

    std::vector<std::shared_ptr<consumer_base>> create_consumers(const pull_consumer_options& options,
                                                                 std::size_t count) override
    {
        return core_.create_consumers(options, count, this->shared_from_this());
    }

    topic_stats stats() override { return core_.stats(); }

    bool has_group(const std::string& group) override { return core_.has_group(group); }
    bool remove_group(const std::string& group) override { return core_.remove_group(group); }

    /// Gives back room that every group has committed past.
    void release_capacity(std::size_t count) noexcept { core_.release_capacity(count); }

private:
    friend class typed_produce_waiter<T, basic_topic>;

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

    static topic_core::settings core_settings(settings&& configuration)
    {
        return {.name = std::move(configuration.name),
                .item_type_name = readable_type_name<T>(),
                .backend_name = storage_backend_name<Partition>(),
                .bounded_capacity = configuration.bounded_capacity,
                .full_mode = configuration.full_mode,
                .executor = std::move(configuration.executor),
                .resources = std::move(configuration.resources),
                .blocking_pool = std::move(configuration.blocking_pool),
                .membership = std::move(configuration.membership)};
    }

    const key_selector<T> partition_key_;
    const std::vector<std::unique_ptr<slot_type>> slots_;
    const storage_runner produce_runner_;  // decided once: the pool when appends block, else inline
    topic_router<T, Partition> router_;    // over slots_
    topic_core core_;                      // over slots_, erased; closed by the destructor, before slots_ go
};

}  // namespace bufferqueue::detail
