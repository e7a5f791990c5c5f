// Internal: the memory backend's storage blocks - a fixed-size segment of item slots and the small
// free list that recycles segments between the lanes of one partition.
#pragma once

#include "bufferqueue/detail/spin_mutex.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

namespace bufferqueue::detail {

/// One fixed-size block of item slots. Slot `i` holds the item at logical offset `base + i`.
/// Every slot of a segment that has a successor is constructed; the tail segment holds the
/// constructed prefix [0, published end - base). Not thread-safe by itself: the lane that appends
/// to it writes `base` and the slots before publishing them (memory_lane.hpp).
template <class T>
struct memory_segment {
    explicit memory_segment(std::size_t capacity) : capacity(capacity), items(std::allocator<T>().allocate(capacity)) {}
    memory_segment(const memory_segment&) = delete;
    memory_segment& operator=(const memory_segment&) = delete;
    ~memory_segment() { std::allocator<T>().deallocate(items, capacity); }

    std::uint64_t end() const noexcept { return base + capacity; }

    void destroy_items(std::size_t constructed) noexcept
    {
        if constexpr (!std::is_trivially_destructible_v<T>) {
            std::destroy_n(items, constructed);
        }
    }

    const std::size_t capacity;
    T* const items;
    std::uint64_t base = 0;
    std::atomic<memory_segment*> next{nullptr};
};

/// The segments of one partition that no lane uses any more, kept for reuse (at most
/// `max_free_segments`; more are deleted). Thread-safe: a short spin lock guards the list.
/// `take` allocates a segment when the list is empty (throws std::bad_alloc); `give_back` and the
/// destructor never allocate more than the list's two slots.
template <class T>
class memory_segment_pool {
public:
    static constexpr std::size_t max_free_segments = 2;

    explicit memory_segment_pool(std::size_t segment_size) : segment_size_(segment_size) {}
    memory_segment_pool(const memory_segment_pool&) = delete;
    memory_segment_pool& operator=(const memory_segment_pool&) = delete;

    ~memory_segment_pool()
    {
        for (memory_segment<T>* segment : free_segments_) {
            delete segment;
        }
    }

    /// A segment with no successor and no constructed item: a recycled one or a new one.
    memory_segment<T>* take()
    {
        memory_segment<T>* fresh = nullptr;
        {
            std::lock_guard lock(mutex_);
            if (!free_segments_.empty()) {
                fresh = free_segments_.back();
                free_segments_.pop_back();
            }
        }
        if (fresh == nullptr) {
            fresh = new memory_segment<T>(segment_size_);
        }
        fresh->next.store(nullptr, std::memory_order_relaxed);
        return fresh;
    }

    /// Destroys every item of `segment` (a full segment no cursor or batch points into) and keeps
    /// it for `take`, or deletes it when the list is full.
    void give_back(memory_segment<T>* segment)
    {
        segment->destroy_items(segment->capacity);
        {
            std::lock_guard lock(mutex_);
            if (free_segments_.size() < max_free_segments) {
                free_segments_.push_back(segment);
                return;
            }
        }
        delete segment;
    }

private:
    const std::size_t segment_size_;
    spin_mutex mutex_;
    std::vector<memory_segment<T>*> free_segments_;  // guarded by mutex_
};

}  // namespace bufferqueue::detail
