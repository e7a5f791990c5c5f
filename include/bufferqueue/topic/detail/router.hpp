// Internal: routing - which partition each produced item goes to, and the append that stores it
// and wakes the partition's consumers.
#pragma once

#include "bufferqueue/detail/thread_number.hpp"
#include "bufferqueue/storage/storage.hpp"
#include "bufferqueue/topic/detail/acknowledged_produce.hpp"
#include "bufferqueue/topic/detail/partition_slot.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace bufferqueue::detail {

/// The producer lanes a topic over `slots` keeps (a round-robin position each): the first
/// partition's `lane_count()` for a `laned_partition` (memory), else 1. Never throws.
template <class Partition>
std::size_t producer_lanes_of(const std::vector<std::unique_ptr<partition_slot<Partition>>>& slots) noexcept
{
    if constexpr (laned_partition<Partition>) {
        return slots.empty() ? 1 : std::max<std::size_t>(1, slots.front()->storage.lane_count());
    } else {
        return 1;
    }
}

/// Routes admitted items to a topic's partitions and appends them, waking each partition's
/// consumers after its append. Routing is per item: round-robin advances once per item (also
/// inside a batch), key routing sends each item to the partition the caller computed for it, in
/// input order; a long round-robin batch on memory storage goes in two passes (see
/// `append_round_robin`). The producer lane is computed here, once per produce (see
/// `producer_lane_of`), and handed to the partitions as `item_source::lane`; every lane has its
/// own round-robin position.
/// Thread-safe; the slots must outlive the router.
template <class T, class Partition>
class topic_router {
public:
    using slot_type = partition_slot<Partition>;

    /// `bounded`: the topic admits items against a capacity, so a waiting produce may continue its
    /// round-robin run on another thread (no lane is then written by its owner only).
    topic_router(std::span<const std::unique_ptr<slot_type>> slots, std::size_t producer_lanes, bool bounded)
        : slots_(slots), producer_lanes_(producer_lanes), bounded_(bounded),
          round_robin_(std::make_unique<round_robin_position[]>(producer_lanes))
    {
    }

    /// Stores `items` (their room, if bounded, already reserved) in the lane of the producing thread
    /// `producer` (a `producer_thread_number`; `calling_producer_thread`: this one), the one lane
    /// every partition of this produce gets; `partitions` holds each item's key partition, or is
    /// null for round-robin. `stored` counts the items stored so far,
    /// also when an append throws. `movable`: the producer gave the items up, so storage may move
    /// them in (`item_source::movable`). `acknowledgements`, for partitions that acknowledge appends
    /// (`acknowledging_partition`), makes each append an `append_acknowledged` reporting to it (an
    /// awaited produce); null: the plain `append`. Items a throwing `append_acknowledged` did not take
    /// are answered to `acknowledgements` with the error before it propagates.
    void route(std::span<const T> items, const std::uint32_t* partitions, std::size_t& stored, std::size_t producer,
               bool movable, acknowledged_produce<T>* acknowledgements = nullptr)
    {
        const std::size_t lane = producer == calling_producer_thread ? producer_lane(producer_lanes_)
                                                                     : producer_lane_of(producer, producer_lanes_);
        if (partitions != nullptr) {
            append_by_key(items, partitions, stored, lane, movable, acknowledgements);
        } else {
            append_round_robin(items, stored, lane, movable, acknowledgements);
        }
    }

private:
    void append_to(std::size_t partition, const item_source<T>& source, std::size_t& stored,
                   [[maybe_unused]] acknowledged_produce<T>* acknowledgements)
    {
        slot_type& slot = *slots_[partition];
        std::size_t appended = 0;
        try {
            if constexpr (acknowledging_partition<Partition, T>) {
                if (acknowledgements != nullptr) {
                    acknowledgements->expect(source.count);
                    try {
                        slot.storage.append_acknowledged(source, appended, *acknowledgements);
                    } catch (...) {
                        const std::size_t taken = std::min(appended, source.count);
                        acknowledgements->acknowledged(source.count - taken,
                                                       current_exception_code(errc::invalid_argument));
                        throw;
                    }
                } else {
                    slot.storage.append(source, appended);
                }
            } else {
                slot.storage.append(source, appended);
            }
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
    void append_round_robin(std::span<const T> items, std::size_t& stored, std::size_t lane, bool movable,
                            acknowledged_produce<T>* acknowledgements)
    {
        const std::size_t partitions = slots_.size();
        std::atomic<std::uint64_t>& position = round_robin_[lane].next;
        std::uint64_t first = 0;
        if (lane + 1 < producer_lanes_ && !bounded_) {
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
            append_to(static_cast<std::size_t>(first), item_source<T>{items.data(), 1, 1, nullptr, lane, movable},
                      stored, acknowledgements);
            return;
        }
        // A long batch on storage with cheap appends (memory's lanes) goes in two passes when a
        // consumer waits on one of the partitions: the first `lead_items` of every partition's
        // share, each partition woken at once, then the rest. The consumers parked on the later
        // partitions start while the producer still stores, instead of after every earlier
        // partition's share (the lanes publish each segment they fill, so a consumer already
        // running keeps reading during the second pass). With nobody waiting the second visit of
        // every partition would only cost the producer (batch produce 7-33% slower in an A/B).
        if constexpr (laned_partition<Partition>) {
            if (partitions > 1 && items.size() >= partitions * 4 * lead_items && anyone_waiting()) {
                append_pass(items, first, 0, lead_items, stored, lane, movable, acknowledgements);
                append_pass(items, first, lead_items, items.size(), stored, lane, movable, acknowledgements);
                return;
            }
        }
        append_pass(items, first, 0, items.size(), stored, lane, movable, acknowledgements);
    }

    // Items per partition of a long round-robin batch stored in its first pass.
    static constexpr std::size_t lead_items = 64;

    // Whether a consumer (or a ready set's watcher) waits on any partition now: a hint, read
    // relaxed; only how a long batch is stored depends on it, every append still notifies.
    bool anyone_waiting() const noexcept
    {
        return std::any_of(slots_.begin(), slots_.end(), [](const auto& slot) { return slot->signal.has_waiters(); });
    }

    // Appends to each partition of a round-robin batch starting at partition `first` its share's
    // items `skip` to `skip + limit` (fewer where its share ends).
    void append_pass(std::span<const T> items, std::uint64_t first, std::size_t skip, std::size_t limit,
                     std::size_t& stored, std::size_t lane, bool movable, acknowledged_produce<T>* acknowledgements)
    {
        // Each thread visits the partitions of its batch from its own starting point, so concurrent
        // batches fill different partitions at once instead of queueing on the same lock in turn.
        const std::size_t partitions = slots_.size();
        const std::size_t touched = std::min(partitions, items.size());
        const std::size_t start = producer_thread_number() % touched;
        for (std::size_t visit = 0; visit < touched; ++visit) {
            const std::size_t step = (start + visit) % touched;
            const auto partition = static_cast<std::size_t>((first + step) % partitions);
            const std::size_t share = (items.size() - step + partitions - 1) / partitions;
            if (share <= skip) {
                continue;
            }
            const std::size_t count = std::min(limit, share - skip);
            append_to(
                partition,
                item_source<T>{items.data() + step + skip * partitions, count, partitions, nullptr, lane, movable},
                stored, acknowledgements);
        }
    }

    void append_by_key(std::span<const T> items, const std::uint32_t* partitions, std::size_t& stored, std::size_t lane,
                       bool movable, acknowledged_produce<T>* acknowledgements)
    {
        if (items.size() == 1) {
            append_to(partitions[0], item_source<T>{items.data(), 1, 1, nullptr, lane, movable}, stored,
                      acknowledgements);
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
                append_to(partition,
                          item_source<T>{items.data(), count, 1, order.data() + starts[partition], lane, movable},
                          stored, acknowledgements);
            }
        }
    }

    struct round_robin_position {
        alignas(64) std::atomic<std::uint64_t> next{0};
    };

    const std::span<const std::unique_ptr<slot_type>> slots_;  // owned by the topic
    const std::size_t producer_lanes_;
    const bool bounded_;
    const std::unique_ptr<round_robin_position[]> round_robin_;
};

}  // namespace bufferqueue::detail
