// Internal: the typed topic - routing, bounded admission and consumer groups over storage partitions.
#pragma once

#include "bufferqueue/detail/partition_signal.hpp"
#include "bufferqueue/detail/thread_number.hpp"
#include "bufferqueue/detail/type_name.hpp"
#include "bufferqueue/storage/storage.hpp"
#include "bufferqueue/topic/detail/capacity_gate.hpp"
#include "bufferqueue/topic/detail/consumer_groups.hpp"
#include "bufferqueue/topic/detail/produce_waiter.hpp"
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

/// One partition of a topic: its storage and the consumers waiting on it.
template <class Partition>
struct partition_slot {
    template <class... Arguments>
    explicit partition_slot(Arguments&&... arguments) : storage(std::forward<Arguments>(arguments)...)
    {
    }

    Partition storage;
    partition_signal signal;
};

/// A typed topic over any `storage_partition`. Routing is per item: round-robin advances once per
/// item (also inside a batch), a key selector sends equal keys to one partition in input order.
/// A bounded topic admits a batch whole before routing it, so a failed admission neither
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
          resources_(std::move(configuration.resources)), runner_(std::move(configuration.blocking_pool)),
          producer_lanes_(configuration.producer_lanes),
          round_robin_(std::make_unique<round_robin_position[]>(configuration.producer_lanes))
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
    const storage_runner& runner() const noexcept override { return runner_; }
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
        groups_.close_all();
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
        consumer_context context{.topic_name = name_,
                                 .executor = executor_,
                                 .runner = runner_,
                                 .topic_closed = &closed_,
                                 .gate = gate_ ? &*gate_ : nullptr,
                                 .keep_alive = this->shared_from_this()};
        return groups_.create(name_, slots_, options, count, context);
    }

    bool has_group(const std::string& group) override { return groups_.has_group(slots_, group); }

    bool remove_group(const std::string& group) override
    {
        return groups_.remove(name_, slots_, group, closed_, gate_ ? &*gate_ : nullptr);
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

    // Routes and stores items whose room (if bounded) is already reserved, in the lane of the
    // producing thread `producer` (a `producer_thread_number`; `calling_thread`: this one).
    void append_admitted(std::span<const T> items, const std::uint32_t* partitions,
                         std::size_t producer = item_source<T>::calling_thread)
    {
        std::size_t stored = 0;
        try {
            if (partitions != nullptr) {
                append_by_key(items, partitions, stored, producer);
            } else {
                append_round_robin(items, stored, producer);
            }
        } catch (...) {
            release_capacity(items.size() - stored);
            throw;
        }
    }

    void append_to(std::size_t partition, const item_source<T>& source, std::size_t& stored)
    {
        slot_type& slot = *slots_[partition];
        std::size_t appended = 0;
        try {
            slot.storage.append(source, appended);
        } catch (...) {
            stored += appended;
            if (appended != 0) {
                slot.signal.notify();
            }
            throw;
        }
        stored += appended;
        slot.signal.notify();
    }

    // Every producer lane advances its own position, so threads with lanes of their own never
    // write a location another producer writes. An owned lane of an unbounded topic keeps the next
    // partition itself (no read-modify-write, no division for a single item); the shared lane, and
    // every lane of a bounded topic (where a waiting produce continues on another thread), keep a
    // running count.
    void append_round_robin(std::span<const T> items, std::size_t& stored, std::size_t producer)
    {
        const std::size_t partitions = slots_.size();
        const std::size_t lane = producer == item_source<T>::calling_thread
                                     ? producer_lane(producer_lanes_)
                                     : producer_lane_of(producer, producer_lanes_);
        std::atomic<std::uint64_t>& position = round_robin_[lane].next;
        std::uint64_t first = 0;
        if (lane + 1 < producer_lanes_ && !gate_) {
            first = position.load(std::memory_order_relaxed);
            std::uint64_t next = first + items.size();
            if (next >= partitions) {
                next = items.size() == 1 ? 0 : next % partitions;  // a single item wraps without a division
            }
            position.store(next, std::memory_order_relaxed);
        } else {
            first = position.fetch_add(items.size(), std::memory_order_relaxed) % partitions;
        }
        if (items.size() == 1) {
            append_to(static_cast<std::size_t>(first), item_source<T>{items.data(), 1, 1, nullptr, producer}, stored);
            return;
        }
        // Each thread visits the partitions of its batch from its own starting point, so concurrent
        // batches fill different partitions at once instead of queueing on the same lock in turn.
        const std::size_t touched = std::min(partitions, items.size());
        const std::size_t start = producer_thread_number() % touched;
        for (std::size_t visit = 0; visit < touched; ++visit) {
            const std::size_t step = (start + visit) % touched;
            const auto partition = static_cast<std::size_t>((first + step) % partitions);
            const std::size_t count = (items.size() - step + partitions - 1) / partitions;
            append_to(partition, item_source<T>{items.data() + step, count, partitions, nullptr, producer}, stored);
        }
    }

    void append_by_key(std::span<const T> items, const std::uint32_t* partitions, std::size_t& stored,
                       std::size_t producer)
    {
        if (items.size() == 1) {
            append_to(partitions[0], item_source<T>{items.data(), 1, 1, nullptr, producer}, stored);
            return;
        }
        // Counting sort of item indices by partition, in reusable per-thread buffers.
        thread_local std::vector<std::uint32_t> order;
        thread_local std::vector<std::size_t> starts;
        const std::size_t partition_total = slots_.size();
        starts.assign(partition_total + 1, 0);
        for (std::size_t i = 0; i < items.size(); ++i) {
            ++starts[partitions[i] + 1];
        }
        for (std::size_t partition = 0; partition < partition_total; ++partition) {
            starts[partition + 1] += starts[partition];
        }
        order.resize(items.size());
        {
            thread_local std::vector<std::size_t> next;
            next.assign(starts.begin(), starts.end() - 1);
            for (std::size_t i = 0; i < items.size(); ++i) {
                order[next[partitions[i]]++] = static_cast<std::uint32_t>(i);
            }
        }
        for (std::size_t partition = 0; partition < partition_total; ++partition) {
            const std::size_t count = starts[partition + 1] - starts[partition];
            if (count != 0) {
                append_to(partition, item_source<T>{items.data(), count, 1, order.data() + starts[partition], producer},
                          stored);
            }
        }
    }

    const std::string name_;
    const std::string type_name_;
    const key_selector<T> partition_key_;
    const bufferqueue::full_mode full_mode_;
    const boost::asio::any_io_executor executor_;
    const std::vector<std::unique_ptr<slot_type>> slots_;
    std::optional<capacity_gate> gate_;
    std::shared_ptr<void> resources_;  // released by close()
    const storage_runner runner_;      // decided once: the queue's I/O pool for blocking storage

    struct round_robin_position {
        alignas(64) std::atomic<std::uint64_t> next{0};
    };
    const std::size_t producer_lanes_;
    const std::unique_ptr<round_robin_position[]> round_robin_;
    alignas(64) std::atomic<bool> closed_{false};
    consumer_groups<T, Partition> groups_;
};

}  // namespace bufferqueue::detail
