// bufferqueue: the batch a consumer receives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace bufferqueue {

/// A read-only, contiguous, random-access view of the items one `consume()` delivered, all from
/// one partition and in that partition's order (with producer lanes: all from one lane, in its
/// producing thread's order).
///
/// Lifetime: the items stay valid until the next `consume()` (or `try_consume()`) on the same
/// consumer begins, or until that consumer is closed or destroyed - also under auto-commit and
/// while other groups make the partition recycle segments: the consumer keeps the storage behind
/// its latest batch alive. Copying a batch copies the view, not the items. Copy items out to keep
/// them longer.
///
/// Thread-safety: reading a batch from several threads at once is safe. Never allocates.
template <class T>
class batch {
public:
    using value_type = T;                    ///< The item type.
    using size_type = std::size_t;           ///< Item counts and indices.
    using difference_type = std::ptrdiff_t;  ///< Distances between iterators.
    using reference = const T&;              ///< Read-only, as every access to a batch.
    using const_reference = const T&;        ///< The same as `reference`.
    using pointer = const T*;                ///< Read-only, as every access to a batch.
    using const_pointer = const T*;          ///< The same as `pointer`.
    using iterator = const T*;               ///< A contiguous, read-only iterator (a pointer to const T).
    using const_iterator = const T*;         ///< The same as `iterator`.

    /// An empty batch.
    batch() = default;

    /// A batch over `items` read from `partition`, with each item's offset when the storage reports
    /// them (`offsets` empty or as long as `items`); made by consumers.
    batch(std::span<const T> items, std::size_t partition, std::span<const std::uint64_t> offsets = {}) noexcept
        : items_(items), offsets_(offsets), partition_(partition)
    {
    }

    /// Number of items; at most the consumer's `batch_size`.
    size_type size() const noexcept { return items_.size(); }
    /// True when the batch holds no items (a default-constructed batch).
    bool empty() const noexcept { return items_.empty(); }
    /// Iterator to the first item, in partition order.
    const_iterator begin() const noexcept { return items_.data(); }
    /// Iterator past the last item.
    const_iterator end() const noexcept { return items_.data() + items_.size(); }
    /// Pointer to the first of `size()` contiguous items; not to be dereferenced when the batch is empty.
    const T* data() const noexcept { return items_.data(); }
    /// The item at `index`; `index` must be less than `size()` (not checked: undefined otherwise).
    const T& operator[](size_type index) const noexcept { return items_[index]; }
    /// The first item; the batch must not be empty (not checked).
    const T& front() const noexcept { return items_.front(); }
    /// The last item; the batch must not be empty (not checked).
    const T& back() const noexcept { return items_.back(); }

    /// The items as a span.
    std::span<const T> items() const noexcept { return items_; }

    /// The partition the items come from.
    std::size_t partition() const noexcept { return partition_; }

    /// Each item's offset in its partition, where the backend reports them: mmap topics the byte
    /// position of its record (as in their error messages and `bufferqueue-inspect`), Kafka topics
    /// the record's offset. Empty on memory topics (items of different producer lanes have no one
    /// order of positions). Valid as long as the items.
    std::span<const std::uint64_t> offsets() const noexcept { return offsets_; }

private:
    std::span<const T> items_{};
    std::span<const std::uint64_t> offsets_{};
    std::size_t partition_ = 0;
};

}  // namespace bufferqueue
