// Internal: the in-memory storage partition, a linked list of fixed-size segments.
#pragma once

#include "bufferqueue/detail/spin_mutex.hpp"
#include "bufferqueue/storage.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <list>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace bufferqueue::detail {

/// One fixed-size block of item slots. Slot `i` holds the item at logical offset `base + i`.
/// Every slot of a segment that has a successor is constructed; the tail segment holds the
/// constructed prefix [0, published end - base).
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

/// In-memory storage partition. Appends are serialized by a short spin lock and publish the new
/// end with a release store; readers load it with acquire and read without any lock. A segment
/// goes back to a small free list once every group has committed past it and no handed-out
/// batch points into it, so a slow group never loses unread items.
template <class T>
class memory_partition {
public:
    /// A consumer group's progress in this partition.
    struct cursor {
        std::string group;
        std::atomic<std::uint64_t> committed{0};
        /// Start of the batch the consumer still holds, or `no_pin`.
        std::atomic<std::uint64_t> pinned{no_pin};
        /// The segment holding `committed` (or ending at it); only moves forward.
        std::atomic<memory_segment<T>*> segment{nullptr};
    };

    /// `bounded`: a new group starts where capacity was last given back instead of at the oldest
    /// item still held.
    memory_partition(std::size_t segment_size, bool bounded) : segment_size_(segment_size), bounded_(bounded)
    {
        head_ = new memory_segment<T>(segment_size_);
        tail_ = head_;
    }

    memory_partition(const memory_partition&) = delete;
    memory_partition& operator=(const memory_partition&) = delete;

    ~memory_partition()
    {
        const std::uint64_t end = published_end_.load(std::memory_order_acquire);
        for (memory_segment<T>* segment = head_; segment != nullptr;) {
            memory_segment<T>* next = segment->next.load(std::memory_order_acquire);
            segment->destroy_items(next != nullptr ? segment->capacity : static_cast<std::size_t>(end - segment->base));
            delete segment;
            segment = next;
        }
        for (memory_segment<T>* segment : free_segments_) {
            delete segment;
        }
    }

    void append(const item_source<T>& source, std::size_t& appended)
    {
        std::lock_guard lock(append_mutex_);
        std::uint64_t end = published_end_.load(std::memory_order_relaxed);
        try {
            while (appended < source.count) {
                if (end == tail_->end()) {
                    roll_over();
                }
                const auto slot = static_cast<std::size_t>(end - tail_->base);
                const std::size_t room = std::min<std::size_t>(tail_->capacity - slot, source.count - appended);
                T* destination = tail_->items + slot;
                if constexpr (std::is_trivially_copyable_v<T>) {
                    if (source.indices == nullptr && source.stride == 1 && room > 1) {
                        std::memcpy(static_cast<void*>(destination), source.base + appended, room * sizeof(T));
                        appended += room;
                        end += room;
                        continue;
                    }
                }
                for (std::size_t i = 0; i < room; ++i) {
                    std::construct_at(destination + i, source[appended]);
                    ++appended;
                    ++end;
                }
            }
        } catch (...) {
            published_end_.store(end, std::memory_order_release);
            throw;
        }
        published_end_.store(end, std::memory_order_release);
    }

    cursor& open_cursor(std::string_view group)
    {
        std::lock_guard lock(groups_mutex_);
        cursor& added = cursors_.emplace_back();
        added.group = std::string(group);
        const std::uint64_t start = bounded_ ? released_up_to_ : head_->base;
        memory_segment<T>* segment = head_;
        while (start >= segment->end() && segment->next.load(std::memory_order_acquire) != nullptr) {
            segment = segment->next.load(std::memory_order_acquire);
        }
        added.committed.store(start, std::memory_order_relaxed);
        added.segment.store(segment, std::memory_order_release);
        return added;
    }

    pull_result<T> pull(cursor& reader, std::size_t max_items)
    {
        const std::uint64_t end = published_end_.load(std::memory_order_acquire);
        const std::uint64_t position = reader.committed.load(std::memory_order_relaxed);
        if (position >= end) {
            return {{}, position};
        }
        memory_segment<T>* segment = reader.segment.load(std::memory_order_relaxed);
        if (position == segment->end()) {
            segment = segment->next.load(std::memory_order_acquire);
            reader.segment.store(segment, std::memory_order_release);
        }
        const auto count =
            static_cast<std::size_t>(std::min<std::uint64_t>({max_items, end - position, segment->end() - position}));
        reader.pinned.store(position, std::memory_order_release);
        return {{segment->items + (position - segment->base), count}, position + count};
    }

    std::uint64_t commit(cursor& reader, std::uint64_t next_offset)
    {
        reader.committed.store(next_offset, std::memory_order_release);
        memory_segment<T>* segment = reader.segment.load(std::memory_order_relaxed);
        if (next_offset == segment->end()) {
            if (memory_segment<T>* next = segment->next.load(std::memory_order_acquire)) {
                reader.segment.store(next, std::memory_order_release);
            }
        }

        // Segments are unlinked under the lock and recycled after it, a few at a time, so a commit
        // never allocates.
        std::uint64_t released = 0;
        for (bool first_pass = true;; first_pass = false) {
            std::array<memory_segment<T>*, 8> recycled{};
            std::size_t unlinked = 0;
            {
                std::lock_guard lock(groups_mutex_);
                std::uint64_t minimum_committed = std::numeric_limits<std::uint64_t>::max();
                std::uint64_t minimum_retained = std::numeric_limits<std::uint64_t>::max();
                for (const cursor& each : cursors_) {
                    const std::uint64_t committed = each.committed.load(std::memory_order_acquire);
                    const std::uint64_t pinned = each.pinned.load(std::memory_order_acquire);
                    minimum_committed = std::min(minimum_committed, committed);
                    minimum_retained = std::min({minimum_retained, committed, pinned});
                }
                if (first_pass && minimum_committed > released_up_to_) {
                    released = minimum_committed - released_up_to_;
                    released_up_to_ = minimum_committed;
                }
                while (unlinked < recycled.size() && head_->end() <= minimum_retained) {
                    memory_segment<T>* next = head_->next.load(std::memory_order_acquire);
                    if (next == nullptr || any_cursor_on(head_)) {
                        break;
                    }
                    recycled[unlinked++] = head_;
                    head_ = next;
                }
            }
            for (std::size_t i = 0; i < unlinked; ++i) {
                recycle(recycled[i]);
            }
            if (unlinked < recycled.size()) {
                return released;
            }
        }
    }

    void release_batch(cursor& reader) noexcept { reader.pinned.store(no_pin, std::memory_order_release); }

    bool has_data(const cursor& reader) const noexcept
    {
        return published_end_.load(std::memory_order_acquire) > reader.committed.load(std::memory_order_relaxed);
    }

    /// Memory holds no outside resources: items stay until the partition is destroyed.
    void close() noexcept {}

    /// Logical offset one past the newest item.
    std::uint64_t end_offset() const noexcept { return published_end_.load(std::memory_order_acquire); }

    /// Segments currently allocated (held plus free), for memory accounting in tests.
    std::size_t allocated_segments() const
    {
        std::scoped_lock lock(groups_mutex_, free_mutex_);
        std::size_t count = free_segments_.size();
        for (memory_segment<T>* segment = head_; segment != nullptr;
             segment = segment->next.load(std::memory_order_acquire)) {
            ++count;
        }
        return count;
    }

private:
    static constexpr std::uint64_t no_pin = std::numeric_limits<std::uint64_t>::max();
    static constexpr std::size_t max_free_segments = 2;

    bool any_cursor_on(const memory_segment<T>* segment) const noexcept
    {
        return std::any_of(cursors_.begin(), cursors_.end(), [segment](const cursor& each) {
            return each.segment.load(std::memory_order_acquire) == segment;
        });
    }

    // Called with the append lock held, when the tail is full.
    void roll_over()
    {
        memory_segment<T>* fresh = nullptr;
        {
            std::lock_guard lock(free_mutex_);
            if (!free_segments_.empty()) {
                fresh = free_segments_.back();
                free_segments_.pop_back();
            }
        }
        if (fresh == nullptr) {
            fresh = new memory_segment<T>(segment_size_);
        }
        fresh->base = tail_->end();
        fresh->next.store(nullptr, std::memory_order_relaxed);
        tail_->next.store(fresh, std::memory_order_release);
        tail_ = fresh;
    }

    void recycle(memory_segment<T>* segment)
    {
        segment->destroy_items(segment->capacity);
        {
            std::lock_guard lock(free_mutex_);
            if (free_segments_.size() < max_free_segments) {
                free_segments_.push_back(segment);
                return;
            }
        }
        delete segment;
    }

    const std::size_t segment_size_;
    const bool bounded_;

    alignas(64) spin_mutex append_mutex_;
    memory_segment<T>* tail_ = nullptr;  // guarded by append_mutex_
    alignas(64) std::atomic<std::uint64_t> published_end_{0};

    alignas(64) mutable spin_mutex groups_mutex_;
    memory_segment<T>* head_ = nullptr;  // guarded by groups_mutex_
    std::list<cursor> cursors_;          // guarded by groups_mutex_; stable addresses
    std::uint64_t released_up_to_ = 0;   // guarded by groups_mutex_

    mutable spin_mutex free_mutex_;
    std::vector<memory_segment<T>*> free_segments_;  // guarded by free_mutex_
};

static_assert(storage_partition<memory_partition<int>, int>);

}  // namespace bufferqueue::detail
