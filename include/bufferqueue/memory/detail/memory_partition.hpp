// Internal: the in-memory storage partition - producer lanes of fixed-size segments
// (memory_lane.hpp, memory_segment.hpp) read through per-group cursors (memory_cursor.hpp).
#pragma once

#include "bufferqueue/detail/spin_mutex.hpp"
#include "bufferqueue/memory/detail/memory_cursor.hpp"
#include "bufferqueue/memory/detail/memory_lane.hpp"
#include "bufferqueue/memory/detail/memory_segment.hpp"
#include "bufferqueue/storage/storage.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace bufferqueue::detail {

/// In-memory storage partition, split into producer lanes. Each lane is a list of segments with
/// its own published end: readers load it with acquire and read without any lock. With one lane,
/// appends take a short spin lock and the partition keeps the exact order of appends across
/// threads. With more, an append goes to the lane its `item_source::lane` names, which the topic's
/// router computed: the first `lanes - 1` producing threads own a lane each and append without a
/// lock or any write another producer reads, and all further threads share the last lane under its
/// lock (`laned_partition`, storage.hpp); a reader takes its batches lane by lane, so the
/// items of one thread keep their order but items of different threads interleave by batch. On a
/// bounded partition an owned lane is locked too (uncontended unless a waiting produce, completed
/// by another thread, appends to its producer's lane at the same time). A
/// segment goes back to a small free list once every group has committed past it and no
/// handed-out batch points into it, so a slow group never loses unread items. Lanes allocate
/// their first segment on their first append.
template <class T>
class memory_partition {
    static constexpr std::uint64_t no_pin = memory_no_pin;

public:
    /// A consumer group's progress in one lane.
    using lane_position = memory_lane_position<T>;
    /// A consumer group's progress in this partition.
    using cursor = memory_cursor<T>;

    /// Most producer lanes a partition can have.
    static constexpr std::size_t max_lanes = 64;

    /// `bounded`: a new group starts where capacity was last given back instead of at the oldest
    /// item still held, and every lane appends under its lock (see `append`). `lanes`: producer
    /// lanes, 1 to `max_lanes` (more are capped).
    memory_partition(std::size_t segment_size, bool bounded, std::size_t lanes = 1)
        : bounded_(bounded), lane_count_(std::clamp<std::size_t>(lanes, 1, max_lanes)),
          lanes_(std::make_unique<lane[]>(lane_count_)), pool_(segment_size)
    {
    }

    memory_partition(const memory_partition&) = delete;
    memory_partition& operator=(const memory_partition&) = delete;

    /// Destroys every item still held (each lane's destructor) and frees every segment.
    ~memory_partition() = default;

    /// Appends to the lane `source.lane` (a value from the last lane on, `item_source::shared_lane`
    /// by default, means the last lane). Every lane but the last takes no lock on an unbounded
    /// partition: the caller appends to one from one thread at a time (the topic's router
    /// guarantees it). A bounded partition takes the lane's lock also for an owned lane: there a
    /// waiting produce that another thread completes appends to its producer's lane. Throws what
    /// `T`'s constructor or an allocation throws; `appended` counts the items published.
    void append(const item_source<T>& source, std::size_t& appended)
    {
        const std::size_t index = std::min(source.lane, lane_count_ - 1);
        lane& target = lanes_[index];
        // Publishes a lane's first segment to the release side, to cursors and to pull. Captures
        // only `this`, so it travels in a register: the call costs what append_to_lane's did.
        const auto on_first_segment = [this](lane& first_used, memory_segment<T>* fresh) {
            const auto used_index = static_cast<std::size_t>(&first_used - lanes_.get());
            {
                std::lock_guard lock(groups_mutex_);
                first_used.head = fresh;
            }
            first_used.first.store(fresh, std::memory_order_release);
            used_lanes_.fetch_or(std::uint64_t{1} << used_index, std::memory_order_release);
        };
        if (index + 1 < lane_count_ && !bounded_) {
            if (source.count == 1 && target.try_append_one(source)) {
                appended = 1;  // a single item with room in the tail: no loop, no roll-over check
                return;
            }
            target.append(source, appended, pool_, on_first_segment);  // this thread's own lane
        } else {
            std::lock_guard lock(target.append_mutex);
            target.append(source, appended, pool_, on_first_segment);
        }
    }

    cursor& open_cursor(std::string_view group)
    {
        std::lock_guard lock(groups_mutex_);
        for (cursor& existing : cursors_) {
            if (existing.group == group) {
                return existing;  // opened again: resumes from its committed positions
            }
        }
        cursor& added = cursors_.emplace_back(lane_count_);
        added.group = std::string(group);
        for (std::size_t index = 0; index < lane_count_; ++index) {
            lane& each = lanes_[index];
            each.minimum.forget();  // the new group may start below the minimum
            lane_position& position = added.lanes[index];
            memory_segment<T>* segment = each.head;
            if (segment == nullptr) {
                continue;  // nothing appended yet: starts at 0 in the lane's first segment
            }
            const std::uint64_t start = bounded_ ? each.released_up_to : segment->base;
            while (start >= segment->end() && segment->next.load(std::memory_order_acquire) != nullptr) {
                segment = segment->next.load(std::memory_order_acquire);
            }
            position.committed.store(start, std::memory_order_relaxed);
            position.segment.store(segment, std::memory_order_release);
        }
        return added;
    }

    pull_result<T> pull(cursor& reader, std::size_t max_items)
    {
        // The lanes with segments, from `next_lane` on and then the ones before it.
        const std::uint64_t used = used_lanes_.load(std::memory_order_acquire);
        const std::uint64_t from_next = used & (~std::uint64_t{0} << reader.next_lane);
        for (std::uint64_t pending : {from_next, used & ~from_next}) {
            for (; pending != 0; pending &= pending - 1) {
                const auto index = static_cast<std::size_t>(std::countr_zero(pending));
                const lane& source = lanes_[index];
                lane_position& position_of = reader.lanes[index];
                const std::uint64_t end = source.published_end.load(std::memory_order_acquire);
                const std::uint64_t position = position_of.committed.load(std::memory_order_relaxed);
                if (position >= end) {
                    continue;
                }
                memory_segment<T>* segment = position_of.segment.load(std::memory_order_relaxed);
                if (segment == nullptr) {
                    segment = source.first.load(std::memory_order_acquire);
                    position_of.segment.store(segment, std::memory_order_release);
                }
                if (position == segment->end()) {
                    segment = segment->next.load(std::memory_order_acquire);
                    position_of.segment.store(segment, std::memory_order_release);
                }
                const auto count = static_cast<std::size_t>(
                    std::min<std::uint64_t>({max_items, end - position, segment->end() - position}));
                position_of.pinned.store(position, std::memory_order_release);
                reader.pulled_lane = index;
                return {
                    {segment->items + (position - segment->base), count}, position + count, {}, position + count < end};
            }
        }
        return {{}, reader.lanes[reader.pulled_lane].committed.load(std::memory_order_relaxed)};
    }

    /// Commits `next_offset` in the lane of the cursor's last pull.
    std::uint64_t commit(cursor& reader, std::uint64_t next_offset)
    {
        const std::size_t index = reader.pulled_lane;
        lane& source = lanes_[index];
        lane_position& position_of = reader.lanes[index];
        reader.next_lane = index + 1 < lane_count_ ? index + 1 : 0;
        const std::uint64_t previous = position_of.committed.load(std::memory_order_relaxed);  // ours alone
        position_of.committed.store(next_offset, std::memory_order_release);
        memory_segment<T>* segment = position_of.segment.load(std::memory_order_relaxed);
        if (segment == nullptr) {
            segment = source.first.load(std::memory_order_acquire);
            position_of.segment.store(segment, std::memory_order_release);
        }
        if (segment != nullptr && next_offset == segment->end()) {
            if (memory_segment<T>* next = segment->next.load(std::memory_order_acquire)) {
                position_of.segment.store(next, std::memory_order_release);
            }
        }

        const group_move moved{previous, next_offset};
        return release_lane(index, &moved);
    }

    bool has_group(std::string_view group) const
    {
        std::lock_guard lock(groups_mutex_);
        return std::any_of(cursors_.begin(), cursors_.end(),
                           [group](const cursor& each) { return each.group == group; });
    }

    /// Forgets `group` (no consumer may use its cursor any more) and gives back what only it held.
    std::uint64_t remove_group(std::string_view group)
    {
        {
            std::lock_guard lock(groups_mutex_);
            const auto found = std::find_if(cursors_.begin(), cursors_.end(),
                                            [group](const cursor& each) { return each.group == group; });
            if (found == cursors_.end()) {
                return 0;
            }
            cursors_.erase(found);
            for (std::size_t index = 0; index < lane_count_; ++index) {
                lanes_[index].minimum.forget();
            }
        }
        std::uint64_t released = 0;
        for (std::size_t index = 0; index < lane_count_; ++index) {
            released += release_lane(index);
        }
        return released;
    }

private:
    // Gives back what every group has committed past in lane `index` and recycles the segments no
    // group and no handed-out batch needs. Without any group nothing is released: the items wait
    // for the next group. Segments are unlinked under the lock and recycled after it, a few at a
    // time, so a commit never allocates.
    // A commit calls it with the group's move: when another group holds the lane's minimum, it
    // returns 0 at once, without the recount over every group (see `memory_lane_minimum`).
    struct group_move {
        std::uint64_t from;
        std::uint64_t to;
    };
    std::uint64_t release_lane(std::size_t index, const group_move* moved = nullptr)
    {
        lane& source = lanes_[index];
        std::uint64_t released = 0;
        for (bool first_pass = true;; first_pass = false) {
            std::array<memory_segment<T>*, 8> recycled{};
            std::size_t unlinked = 0;
            {
                std::lock_guard lock(groups_mutex_);
                if (cursors_.empty()) {
                    return released;
                }
                if (first_pass && moved != nullptr && !source.minimum.may_rise(moved->from, moved->to)) {
                    return 0;  // another group holds the lane's minimum: nothing to give back yet
                }
                std::uint64_t minimum_committed = std::numeric_limits<std::uint64_t>::max();
                std::uint64_t minimum_retained = std::numeric_limits<std::uint64_t>::max();
                std::size_t at_minimum = 0;
                for (const cursor& each : cursors_) {
                    const lane_position& other = each.lanes[index];
                    const std::uint64_t committed = other.committed.load(std::memory_order_acquire);
                    const std::uint64_t pinned = other.pinned.load(std::memory_order_acquire);
                    if (committed < minimum_committed) {
                        minimum_committed = committed;
                        at_minimum = 0;
                    }
                    at_minimum += committed == minimum_committed ? 1 : 0;
                    minimum_retained = std::min({minimum_retained, committed, pinned});
                }
                source.minimum.recounted(minimum_committed, at_minimum);
                if (first_pass && minimum_committed > source.released_up_to) {
                    released = minimum_committed - source.released_up_to;
                    source.released_up_to = minimum_committed;
                }
                while (unlinked < recycled.size() && source.head != nullptr && source.head->end() <= minimum_retained) {
                    memory_segment<T>* next = source.head->next.load(std::memory_order_acquire);
                    if (next == nullptr || any_cursor_on(index, source.head)) {
                        break;
                    }
                    recycled[unlinked++] = source.head;
                    source.head = next;
                }
            }
            for (std::size_t i = 0; i < unlinked; ++i) {
                pool_.give_back(recycled[i]);
            }
            if (unlinked < recycled.size()) {
                return released;
            }
        }
    }

public:
    void release_batch(cursor& reader) noexcept
    {
        reader.lanes[reader.pulled_lane].pinned.store(no_pin, std::memory_order_release);
    }

    bool has_data(const cursor& reader) const noexcept
    {
        for (std::uint64_t used = used_lanes_.load(std::memory_order_acquire); used != 0; used &= used - 1) {
            const auto index = static_cast<std::size_t>(std::countr_zero(used));
            if (lanes_[index].published_end.load(std::memory_order_acquire) >
                reader.lanes[index].committed.load(std::memory_order_relaxed)) {
                return true;
            }
        }
        return false;
    }

    /// Memory holds no outside resources: items stay until the partition is destroyed.
    void close() noexcept {}

    /// Statistics, in items (the storage concept's `end_items`, `earliest_items`, `committed_items`).
    /// Each lane counts its own items from 0; a partition's position is the sum over its lanes, so
    /// `end_items() - committed_items(cursor)` is the group's lag. Thread-safe and noexcept, read
    /// from any thread while producers and consumers run; the sums are not one atomic snapshot
    /// across lanes (with one lane they are exact).

    /// Items ever appended, over every lane. Lock-free.
    std::uint64_t end_items() const noexcept
    {
        std::uint64_t total = 0;
        for (std::size_t index = 0; index < lane_count_; ++index) {
            total += lanes_[index].published_end.load(std::memory_order_acquire);
        }
        return total;
    }

    /// Index of the first item still held: where a group opened now starts (`open_cursor`) - the
    /// start of each lane's oldest segment, or on a bounded partition where capacity was last given
    /// back. Takes the groups lock briefly (a spin lock).
    std::uint64_t earliest_items() const noexcept
    {
        std::lock_guard lock(groups_mutex_);
        std::uint64_t total = 0;
        for (std::size_t index = 0; index < lane_count_; ++index) {
            const lane& each = lanes_[index];
            if (each.head != nullptr) {
                total += bounded_ ? each.released_up_to : each.head->base;
            }
        }
        return total;
    }

    /// The group's committed position: items of every lane it has committed past. Lock-free;
    /// `reader` must be a cursor of this partition (from `open_cursor`, its group not removed).
    std::uint64_t committed_items(const cursor& reader) const noexcept
    {
        std::uint64_t total = 0;
        for (std::size_t index = 0; index < lane_count_; ++index) {
            total += reader.lanes[index].committed.load(std::memory_order_acquire);
        }
        return total;
    }

    /// Producer lanes of this partition (`laned_partition`): 1 to `max_lanes`, fixed at construction.
    std::size_t lane_count() const noexcept { return lane_count_; }

private:
    using lane = memory_lane<T>;

    bool any_cursor_on(std::size_t index, const memory_segment<T>* segment) const noexcept
    {
        return std::any_of(cursors_.begin(), cursors_.end(), [index, segment](const cursor& each) {
            return each.lanes[index].segment.load(std::memory_order_acquire) == segment;
        });
    }

    const bool bounded_;
    const std::size_t lane_count_;
    const std::unique_ptr<lane[]> lanes_;
    alignas(64) std::atomic<std::uint64_t> used_lanes_{0};  // bit i: lane i has a segment

    alignas(64) mutable spin_mutex groups_mutex_;
    std::list<cursor> cursors_;  // guarded by groups_mutex_; stable addresses

    // Thread-safe by its own lock, the innermost: nothing else is locked while it is held.
    memory_segment_pool<T> pool_;
};

static_assert(storage_partition<memory_partition<int>, int>);

}  // namespace bufferqueue::detail

namespace bufferqueue {

/// Memory partitions never block; their statistics report the backend "memory".
template <class T>
struct storage_traits<detail::memory_partition<T>> {
    static constexpr bool blocking = false;
    static constexpr std::string_view backend_name = "memory";
};

}  // namespace bufferqueue
