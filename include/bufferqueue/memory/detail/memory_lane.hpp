// Internal: one producer lane of a memory partition - a list of segments with its own published end,
// the append that fills it and the roll-over to the next segment.
#pragma once

#include "bufferqueue/detail/spin_mutex.hpp"
#include "bufferqueue/memory/detail/memory_segment.hpp"
#include "bufferqueue/storage/storage.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>

namespace bufferqueue::detail {

/// The lowest committed position of a lane's groups and how many stand at it, as the last recount
/// over every group found them (the count may since be low, never high). It lets the commit of a
/// group that does not hold the minimum skip that recount: with one group every commit recounts,
/// with many a round of commits recounts about once instead of once per group. Not thread-safe
/// (the partition's groups lock guards it); never allocates.
class memory_lane_minimum {
public:
    /// A group committed from `previous` to `next`: true when the minimum may have risen, so the
    /// caller must recount (and then call `recounted`). A group above the minimum - or counted at
    /// its new position by a recount that ran meanwhile - cannot raise it; one of several at the
    /// minimum leaves it and only lowers the count.
    bool may_rise(std::uint64_t previous, std::uint64_t next) noexcept
    {
        if (!known_) {
            return true;
        }
        if (next == previous || previous != minimum_) {
            return false;
        }
        if (groups_at_minimum_ > 1) {
            --groups_at_minimum_;
            return false;
        }
        return true;
    }

    /// A recount found `minimum`, held by `groups` groups.
    void recounted(std::uint64_t minimum, std::size_t groups) noexcept
    {
        minimum_ = minimum;
        groups_at_minimum_ = groups;
        known_ = true;
    }

    /// A group was opened (it may start below the minimum) or removed: the next commit recounts.
    void forget() noexcept { known_ = false; }

private:
    std::uint64_t minimum_ = 0;
    std::size_t groups_at_minimum_ = 0;
    bool known_ = false;
};

/// One producer lane: segments linked from `head` (the oldest still held) to `tail` (the one being
/// filled). One thread appends at a time - the lane's owner, or whoever holds `append_mutex` -
/// and publishes with a release store of `published_end`; readers load it with acquire and read
/// the slots before it without any lock. `head` and `released_up_to` belong to the partition's
/// release side and are guarded by its groups lock. The destructor destroys the items still
/// held and frees the lane's segments; no other thread may use the lane then.
template <class T>
struct memory_lane {
    memory_lane() = default;
    memory_lane(const memory_lane&) = delete;
    memory_lane& operator=(const memory_lane&) = delete;

    ~memory_lane()
    {
        const std::uint64_t end = published_end.load(std::memory_order_acquire);
        for (memory_segment<T>* segment = head; segment != nullptr;) {
            memory_segment<T>* next = segment->next.load(std::memory_order_acquire);
            segment->destroy_items(next != nullptr ? segment->capacity : static_cast<std::size_t>(end - segment->base));
            delete segment;
            segment = next;
        }
    }

    /// Appends `source` from item `appended` on, counting `appended` up as items are constructed;
    /// the caller owns the lane (its own lane, or `append_mutex` held). Publishes each segment it
    /// fills as it rolls over to the next, and the rest at the end, so a long append is readable
    /// segment by segment. When a copy throws, the constructed prefix is published and the
    /// exception propagates. A full tail rolls over to a segment from `pool`; the lane's first
    /// segment is passed to `on_first_segment(*this, segment)`, which must set `head` (under the
    /// partition's groups lock), store `first` and mark the lane used before the items in it are
    /// published. `OnFirstSegment` is taken by value: a small function object (the partition
    /// passes one capturing only itself).
    template <class OnFirstSegment>
    void append(const item_source<T>& source, std::size_t& appended, memory_segment_pool<T>& pool,
                OnFirstSegment on_first_segment)
    {
        std::uint64_t end = published_end.load(std::memory_order_relaxed);
        try {
            while (appended < source.count) {
                if (tail == nullptr || end == tail->end()) {
                    if (tail != nullptr) {
                        // The full tail, before the next segment is linked: a consumer already
                        // running reads it while the rest of a long append is still being stored.
                        published_end.store(end, std::memory_order_release);
                    }
                    roll_over(pool, on_first_segment);
                }
                memory_segment<T>* filled = tail;
                const auto slot = static_cast<std::size_t>(end - filled->base);
                const std::size_t room = std::min<std::size_t>(filled->capacity - slot, source.count - appended);
                T* destination = filled->items + slot;
                if constexpr (std::is_trivially_copyable_v<T>) {
                    // Copies that cannot throw: a memcpy of a contiguous run, or a strided gather
                    // (round-robin routing) with its counters in registers instead of `appended`.
                    if (source.indices == nullptr && room > 1) {
                        const T* from = source.base + appended * source.stride;
                        if (source.stride == 1) {
                            std::memcpy(static_cast<void*>(destination), from, room * sizeof(T));
                        } else {
                            for (std::size_t i = 0; i < room; ++i) {
                                std::memcpy(static_cast<void*>(destination + i), from + i * source.stride, sizeof(T));
                            }
                        }
                        appended += room;
                        end += room;
                        continue;
                    }
                }
                for (std::size_t i = 0; i < room; ++i) {
                    source.construct_at(destination + i, appended);
                    ++appended;
                    ++end;
                }
            }
        } catch (...) {
            published_end.store(end, std::memory_order_release);
            throw;
        }
        published_end.store(end, std::memory_order_release);
    }

    /// Appends the single item of `source` when the tail segment has room for it - the common case
    /// of a single-item produce - and returns true; returns false, having done nothing, when the
    /// lane has no segment yet or its tail is full (the caller then calls `append`). The caller
    /// owns the lane, as for `append`. When the item's copy throws, nothing was published.
    bool try_append_one(const item_source<T>& source)
    {
        const std::uint64_t end = published_end.load(std::memory_order_relaxed);
        if (tail == nullptr || end == tail->end()) {
            return false;  // no segment yet, or the tail is full
        }
        source.construct_at(tail->items + (end - tail->base), 0);
        published_end.store(end + 1, std::memory_order_release);
        return true;
    }

    alignas(64) spin_mutex append_mutex;  // the shared (last) lane; every lane when bounded
    // The end the appending thread publishes, and beside it (one line) the segment it fills.
    alignas(64) std::atomic<std::uint64_t> published_end{0};
    memory_segment<T>* tail = nullptr;               // written by the appending thread
    std::atomic<memory_segment<T>*> first{nullptr};  // the lane's first segment, set once
    alignas(64) memory_segment<T>* head = nullptr;   // guarded by the partition's groups lock
    std::uint64_t released_up_to = 0;                // guarded by the partition's groups lock
    memory_lane_minimum minimum;                     // guarded by the partition's groups lock

private:
    // Called by the appender when the tail is full or the lane has no segment yet.
    template <class OnFirstSegment>
    void roll_over(memory_segment_pool<T>& pool, OnFirstSegment& on_first_segment)
    {
        memory_segment<T>* fresh = pool.take();
        if (tail == nullptr) {
            fresh->base = 0;
            on_first_segment(*this, fresh);
        } else {
            fresh->base = tail->end();
            tail->next.store(fresh, std::memory_order_release);
        }
        tail = fresh;
    }
};

}  // namespace bufferqueue::detail
