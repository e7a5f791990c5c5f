// bufferqueue: the storage-backend extension point. A typed topic routes items to partitions and
// runs the shared consumer logic; a storage partition only stores, reads and tracks progress.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string_view>

namespace bufferqueue {

/// The items one append hands to one partition, in order: either every `stride`-th element of a
/// contiguous input (round-robin routing) or the elements at the given `indices` (key routing).
/// A view; it does not own the items.
template <class T>
struct item_source {
    /// `producer` when the appending thread is the producing one.
    static constexpr std::size_t calling_thread = std::numeric_limits<std::size_t>::max();

    const T* base = nullptr;
    std::size_t count = 0;
    std::size_t stride = 1;
    const std::uint32_t* indices = nullptr;
    /// The producing thread whose lane takes the items, as a `detail::producer_thread_number()`:
    /// a waiting produce that another thread completes keeps its producer's lane. Storage
    /// without producer lanes ignores it.
    std::size_t producer = calling_thread;

    const T& operator[](std::size_t position) const noexcept
    {
        return indices != nullptr ? base[indices[position]] : base[position * stride];
    }
};

/// What a pull returns: up to the requested number of items, and the log position just after them
/// (what a commit of this batch stores). Empty `items` means nothing was readable.
template <class T>
struct pull_result {
    std::span<const T> items{};
    std::uint64_t next_offset = 0;
};

/// A storage partition of items `T`: the one extension point a storage backend implements. The topic
/// serializes appends to a partition only as far as the partition itself does: `append` may be
/// called from many threads at once and must serialize internally. Each `cursor` (one consumer
/// group's progress in this partition) is used by one consumer at a time; `pull`, `commit`,
/// `release_batch` and `has_data` on different cursors run concurrently with each other and with
/// appends.
///
/// - `append(source, appended)` stores `source.count` items in order and publishes them to readers;
///   `appended` counts the items stored so far, so a throwing copy or a storage error reports how
///   much of the slice became visible.
/// - `open_cursor(group)` returns the group's cursor, owned by the partition: the one it already has
///   (a group opened again resumes from its committed position), or a new one.
/// - `has_group(group)` says whether the partition holds a position for the group.
/// - `remove_group(group)` forgets the group and its cursor (no consumer uses it any more) and, for
///   persistent storage, deletes its checkpoint; returns the items no longer held for any group
///   (capacity the topic may give back). Removing an unknown group does nothing and returns 0.
/// - `pull(cursor, max_items)` returns up to `max_items` items from the cursor's committed position
///   without the append lock; the span stays valid until `release_batch(cursor)`.
/// - `commit(cursor, next_offset)` persists progress; it returns how many items stopped being held
///   for every group (capacity the topic may give back).
/// - `has_data(cursor)` says whether `pull` would return something now.
/// - `close()` releases files and mappings; later appends fail with `errc::closed` and pulls return
///   nothing. Called once the topic is closed, possibly while other threads still call in.
// clang-format off
template <class Partition, class T>
concept storage_partition = requires(Partition& partition, const Partition& const_partition,
                                     typename Partition::cursor& cursor, const item_source<T>& source,
                                     std::size_t& appended, std::size_t max_items, std::uint64_t offset,
                                     std::string_view group) {
    typename Partition::cursor;
    { partition.append(source, appended) } -> std::same_as<void>;
    { partition.open_cursor(group) } -> std::same_as<typename Partition::cursor&>;
    { const_partition.has_group(group) } -> std::same_as<bool>;
    { partition.remove_group(group) } -> std::same_as<std::uint64_t>;
    { partition.pull(cursor, max_items) } -> std::same_as<pull_result<T>>;
    { partition.commit(cursor, offset) } -> std::same_as<std::uint64_t>;
    { partition.release_batch(cursor) } noexcept;
    { const_partition.has_data(cursor) } noexcept -> std::same_as<bool>;
    { partition.close() } noexcept;
};
// clang-format on

}  // namespace bufferqueue
