// bufferqueue: the storage-backend extension point. A typed topic routes items to partitions and
// runs the shared consumer logic; a storage partition only stores, reads and tracks progress.
#pragma once

#include "bufferqueue/storage/append_listener.hpp"
#include "bufferqueue/storage/partition_waker.hpp"

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bufferqueue {

/// The items one append hands to one partition, in order: either every `stride`-th element of a
/// contiguous input (round-robin routing) or the elements at the given `indices` (key routing).
/// A view; it does not own the items. When `movable`, the producer gave the items up (an rvalue
/// produce, or a batch the operation owns): storage that keeps `T` objects moves them in with
/// `construct_at`; storage that serializes reads them through `operator[]` and may ignore it.
template <class T>
struct item_source {
    /// `lane` for items any thread may append at any time: a partition's last producer lane.
    static constexpr std::size_t shared_lane = std::numeric_limits<std::size_t>::max();

    /// The producer's contiguous input; the items live there, owned by the produce call, and are
    /// valid during the `append` call only.
    const T* base = nullptr;
    /// Number of items to append, at positions 0 to `count - 1`.
    std::size_t count = 0;
    /// Without `indices`: the item at position `i` is `base[i * stride]` (round-robin routing over
    /// several partitions). At least 1.
    std::size_t stride = 1;
    /// Key routing: the item at position `i` is `base[indices[i]]` (`count` ascending indices);
    /// null for round-robin (then `stride` applies).
    const std::uint32_t* indices = nullptr;
    /// The producer lane that takes the items, for a partition with producer lanes
    /// (`laned_partition`); storage without lanes ignores it. The topic's router computes it once
    /// per produce from the producing thread and hands the same lane, below `lane_count()`, to every
    /// partition the produce appends to. Each lane but the last belongs to one producing thread: on
    /// a topic without a bound no two threads append to it at once (on a bounded topic a waiting
    /// produce that another thread completes appends to its producer's lane). The last lane is
    /// every other thread's; `shared_lane`, the default, names it (as does any value past it).
    std::size_t lane = shared_lane;
    /// The items are the producer's to give up: `construct_at` moves each from its place, once.
    /// Set only over items that are not `const` objects (the producer's own copy or its rvalues).
    bool movable = false;

    /// The item at `position` (below `count`), read in place; never allocates or copies.
    const T& operator[](std::size_t position) const noexcept
    {
        return indices != nullptr ? base[indices[position]] : base[position * stride];
    }

    /// Constructs the item at `position` at `destination`: moved from the input when `movable`
    /// (call it once per position), else copied. Throws what `T`'s constructor throws.
    void construct_at(T* destination, std::size_t position) const
    {
        if (movable) {
            std::construct_at(destination, std::move(const_cast<T&>((*this)[position])));
        } else {
            std::construct_at(destination, (*this)[position]);
        }
    }
};

/// What a pull returns: up to the requested number of items, and the log position just after them
/// (what a commit of this batch stores). Empty `items` means nothing was readable. `offsets`, when
/// the backend reports them, holds each item's own position (as long as `items`, valid as long as
/// they are); empty when it does not (a position per item is then not defined, e.g. memory lanes).
/// `more_ready`, optional: true when the backend knows that more items were readable past these
/// when it pulled them - a hint that lets an awaited `consume()` of non-blocking storage complete
/// without a round trip through its executor (see `pull_consumer::consume`); false (the default)
/// costs only that round trip.
template <class T>
struct pull_result {
    /// The items read, in partition order; owned by the partition, valid until `release_batch` or
    /// the cursor's next `pull`.
    std::span<const T> items{};
    /// The log position just after `items`: what committing this batch stores.
    std::uint64_t next_offset = 0;
    /// Each item's own log position (as long as `items`), or empty when the backend reports none.
    std::span<const std::uint64_t> offsets{};
    /// Hint: more items were readable past these when they were pulled (false when unknown).
    bool more_ready = false;
};

/// Whether a partition type's calls block (file or network I/O). The topic layer reads it once,
/// when it builds a topic over `Partition`: a blocking partition's topic gets the queue's shared
/// blocking pool, and the asynchronous operations of its handles (`produce`, `consume`, `commit`)
/// run the partition's calls there, never on an application executor; a non-blocking partition is
/// called inline on the caller's thread. Default: false. A backend whose calls block specializes
/// it next to its partition type:
///
///     template <class T> struct bufferqueue::storage_traits<my_partition<T>> {
///         static constexpr bool blocking = true;
///         static constexpr std::string_view backend_name = "my-backend";  // optional
///     };
///
/// The optional `backend_name` is the `backend` a topic's statistics report (`topic_stats`, the
/// Prometheus label): "memory", "mmap" and "kafka" for the built-in backends; a backend that names
/// itself nowhere is "unnamed".
///
/// Two more optional members refine `blocking` for storage whose blocking waits are on a network:
/// - `static constexpr bool blocking_appends` (default: `blocking`): false when `append` and
///   `append_acknowledged` only hand items to a client and never block (a broker's producer), so
///   `produce` calls them inline while consumers' reads and commits still run on the pool;
/// - `static constexpr std::size_t own_pool_threads` (default 0: the queue's shared pool): a
///   blocking topic gets a pool of this many threads of its own (`topic_context::dedicated_pool`),
///   so an outage of that storage never holds the threads of the queue's other topics.
template <class Partition>
struct storage_traits {
    /// True when the partition's calls block on file or network I/O: the topic's asynchronous
    /// operations then run them on a blocking pool. False for the primary template.
    static constexpr bool blocking = false;
};

/// `storage_traits<Partition>::blocking_appends`, or `blocking`. Compile-time.
template <class Partition>
constexpr bool storage_appends_block() noexcept
{
    if constexpr (requires { bool(storage_traits<Partition>::blocking_appends); }) {
        return storage_traits<Partition>::blocking && storage_traits<Partition>::blocking_appends;
    } else {
        return storage_traits<Partition>::blocking;
    }
}

/// `storage_traits<Partition>::own_pool_threads`, or 0 (the queue's shared pool). Compile-time.
template <class Partition>
constexpr std::size_t storage_own_pool_threads() noexcept
{
    if constexpr (requires { std::size_t(storage_traits<Partition>::own_pool_threads); }) {
        return storage_traits<Partition>::own_pool_threads;
    } else {
        return 0;
    }
}

/// `storage_traits<Partition>::backend_name`, or "unnamed". Compile-time.
template <class Partition>
constexpr std::string_view storage_backend_name() noexcept
{
    if constexpr (requires { std::string_view(storage_traits<Partition>::backend_name); }) {
        return storage_traits<Partition>::backend_name;
    } else {
        return "unnamed";
    }
}

/// The statistics a partition reports, in items (not bytes); every member is noexcept, thread-safe
/// and lock-free or a short lock:
/// - `end_items()`: items ever appended to the partition (for persistent storage, across restarts);
/// - `earliest_items()`: the index of the first item the partition still holds;
/// - `committed_items(cursor)`: the group's committed position, as an item index (its lag is
///   `end_items() - committed_items(cursor)`).
/// Part of `storage_partition`; the operations statistics (lag, depth) build on it. Optional, not in
/// the concept: `maintenance_failures()` (noexcept, lock-free; std::uint64_t), the background work
/// that failed and is retried later (`partition_stats::maintenance_failures`; 0 when absent).
template <class Partition>
concept storage_partition_statistics = requires(const Partition& partition, const typename Partition::cursor& cursor)
{
    {
        partition.end_items()
    }
    noexcept->std::same_as<std::uint64_t>;
    {
        partition.earliest_items()
    }
    noexcept->std::same_as<std::uint64_t>;
    {
        partition.committed_items(cursor)
    }
    noexcept->std::same_as<std::uint64_t>;
};

/// The items `cursor`'s group has not committed in `partition`: `end_items() - committed_items(cursor)`,
/// never below 0. Noexcept, thread-safe, lock-free as the statistics members are.
template <storage_partition_statistics Partition>
std::uint64_t lag_items(const Partition& partition, const typename Partition::cursor& cursor) noexcept
{
    const std::uint64_t end = partition.end_items();
    const std::uint64_t committed = partition.committed_items(cursor);
    return end > committed ? end - committed : 0;
}

/// A group a partition holds a position for, and that position as an item index.
struct stored_group {
    /// The group's name.
    std::string name;
    /// The group's committed position in the partition, as an item index (comparable with
    /// `end_items()`).
    std::uint64_t committed_items = 0;
};

/// A partition that can list the groups it holds positions for (`stored_groups()`), also those no
/// consumer of this process has opened (a persistent partition's groups found on disk), so the
/// statistics report them. Where it lists a group, the statistics take its position from the list
/// rather than from the group's cursor in this process (a process-shared partition lists what other
/// processes committed). Optional: without it, the statistics list the groups created in this
/// process. Thread-safe (a short lock), allocates the list; may throw `std::bad_alloc`.
template <class Partition>
concept group_listing_partition = requires(const Partition& partition)
{
    {
        partition.stored_groups()
        } -> std::same_as<std::vector<stored_group>>;
};

/// A storage partition of items `T`: the one extension point a storage backend implements (see
/// docs/backends.md for a walk-through). The topic routes items to partitions, admits them against
/// a bounded capacity, tracks consumer groups and wakes waiting consumers; a partition only stores,
/// reads and tracks each group's progress.
///
/// Threads: `append` may be called from many threads at once and must serialize internally. Each
/// `cursor` (one consumer group's progress in this partition) is used by one consumer at a time;
/// `pull`, `commit`, `release_batch`, `has_data` and `prepare_wait` on different cursors run concurrently with each
/// other and with appends. `open_cursor`, `has_group` and `remove_group` are serialized by the topic
/// (group registration) but run concurrently with appends and with the other cursors' calls.
///
/// Requirements (every offset is the partition's own log position, in items or whatever unit the
/// backend counts; the topic only hands back what `pull` returned):
/// - `typename Partition::cursor`: a group's progress; the partition owns it, and its address stays
///   valid until `remove_group` or the partition's destruction.
/// - `append(source, appended)` stores `source.count` items in order and publishes them to readers
///   (storage keeping `T` objects constructs them with `source.construct_at`, which moves the items
///   of a producer that gave them up);
///   `appended` counts the items stored so far, so a throwing copy or a storage error reports how
///   much of the slice became visible. Throws `bufferqueue::error` (`errc::closed` after `close`,
///   `errc::io_error`, ...). The topic wakes the partition's waiting consumers after it returns.
/// - `open_cursor(group)` returns a reference to the group's cursor: the one the partition already
///   holds for `group` (a group opened again, or known from disk, resumes from its committed
///   position), or a new one at the partition's earliest readable position. May throw (the topic
///   then removes the group from the partitions where this call created it).
/// - `has_group(group)` (const) says whether the partition holds a position for the group.
/// - `remove_group(group)` forgets the group and its cursor (no consumer uses it any more) and, for
///   persistent storage, deletes its stored position; returns how many items appended through
///   `append` are no longer held for any group (capacity a bounded topic gives back). Removing an
///   unknown group does nothing and returns 0.
/// - `pull(cursor, max_items)` returns up to `max_items` items from the cursor's committed position
///   and the position just after them; empty `items` when nothing is readable (or after `close`).
///   The span stays valid until `release_batch(cursor)` or the next `pull` on the cursor. Must not
///   wait for appends in progress longer than a short lock.
/// - `commit(cursor, next_offset)` stores the group's progress (`next_offset` is what a `pull` on
///   this cursor returned) and returns how many items appended through `append` stopped being held
///   for every group (capacity a bounded topic gives back; items that arrived another way, for
///   example from a broker, were never admitted and must not be counted). Throws on storage errors.
/// - `release_batch(cursor)` (noexcept): the consumer no longer uses the span of its last pull.
/// - `has_data(cursor)` (const, noexcept) says whether `pull` would return something now: a query,
///   with no effect on the partition or on other processes. Must not block.
/// - `close()` (noexcept) releases files, mappings and connections; later appends fail with
///   `errc::closed` and pulls return nothing. Called once, when the topic closes, possibly while
///   other threads still call in.
///
/// Optional members the topic detects:
/// - `void bind_waker(partition_waker waker) noexcept` (`wakeable_partition`): called once, when the
///   partition joins its topic, with the waker of the consumers waiting on it. A partition whose
///   records can arrive from outside (another process, a broker) calls `waker.notify()` after they
///   become visible to `has_data` and `pull`, so a waiting `consume()` wakes up.
///
/// - `bool prepare_wait(const cursor&) noexcept` (`waiting_partition` below): a consumer of the
///   cursor announces that it is about to wait, and learns whether there is something to pull after
///   all. Without it, `has_data` (`prepare_wait`, storage/partition_waker.hpp).
///
/// - `void append_acknowledged(const item_source<T>&, std::size_t& handed, append_listener&)`
///   (`acknowledging_partition` below): appends that complete when the storage acknowledges them.
///
/// - Group membership owned outside the topic (a broker's group protocol, other processes) is not a
///   partition's: a backend hands a `group_membership` to the whole topic
///   (`topic_settings::membership`, storage/group_membership.hpp), which assigns and revokes
///   partitions through the `membership_port` it is bound to.
///
/// - `std::vector<stored_group> stored_groups() const` (`group_listing_partition` above): the
///   groups it holds, for the statistics.
///
/// - `std::size_t lane_count() const noexcept` (`laned_partition` below): producer lanes, which
///   `append` takes as `item_source::lane`.
///
/// - `std::optional<unreadable_record> unreadable(const cursor&) const noexcept`
///   (`skipping_partition` below): lets `pull_consumer::skip` step past a record that does not
///   decode.
///
/// And the statistics members of `storage_partition_statistics` above: `end_items()`,
/// `earliest_items()`, `committed_items(cursor)`.
/// And the compile-time property `storage_traits<Partition>::blocking` above.
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
} && storage_partition_statistics<Partition>;
// clang-format on

/// A record a pull could not read (see `skipping_partition`): its position and the position just
/// after it, in the partition's own offsets, and its stored bytes (a view valid until the cursor's
/// next pull; may be empty when the backend keeps none).
struct unreadable_record {
    /// The record's own position in the partition's log.
    std::uint64_t offset = 0;
    /// The position just after the record: what `pull_consumer::skip` commits.
    std::uint64_t next_offset = 0;
    /// The record's stored bytes, owned by the partition (valid until the cursor's next pull); may be
    /// empty when the backend keeps none.
    std::span<const std::byte> payload{};
};

/// A partition that can step past a record it cannot read (`pull_consumer::skip`). Optional.
/// `unreadable(cursor)` (const, noexcept) returns the record the cursor's last `pull`
/// failed on when the cursor still stands at it and the record's extent is known (a payload the
/// serializer rejected), else nothing (a damaged frame has no trustworthy end). The topic then
/// commits `next_offset` through `commit`, which must accept it like a position `pull` returned.
template <class Partition>
concept skipping_partition = requires(const Partition& partition, const typename Partition::cursor& cursor)
{
    {
        partition.unreadable(cursor)
    }
    noexcept->std::same_as<std::optional<unreadable_record>>;
};

/// A partition whose appends complete when the storage acknowledges them (a broker's delivery
/// report, a replica's answer), optional. `append_acknowledged(source, handed, listener)` hands the
/// `source.count` items to the storage, in order, and returns without waiting for the
/// acknowledgement; `handed` counts the items taken so far, also when it throws (`bufferqueue::error`:
/// `errc::queue_full` when the storage's own send queue is full, `errc::closed` after `close`,
/// `errc::invalid_argument` for an item it cannot encode, ...). Every item taken is acknowledged
/// later through `listener.acknowledged` exactly once (see `append_listener`), also when the
/// partition closes first (with `errc::closed`); the items not taken never are. The items are valid
/// during the call only (like `append`'s): storage that keeps them copies, moves or encodes them
/// there. Called from many threads at once, like `append`; must not wait beyond a short lock.
///
/// With it, the topic completes an awaited `produce()` when the last of its items is acknowledged
/// (with the first error an acknowledgement or a refusal reported), holding no thread meanwhile;
/// a bounded topic still admits the items first. `try_produce()` calls the plain `append`, which
/// for such a partition means "hand over without waiting": it throws `errc::queue_full` when the
/// send queue is full (`try_produce` then returns false; items of its call handed to other
/// partitions before stay handed), and failures found after it returned are the backend's to
/// report (Kafka: `kafka_topic_options::delivery_error_sink`). Routing stays the topic's.
template <class Partition, class T>
concept acknowledging_partition = requires(Partition& partition, const item_source<T>& source, std::size_t& handed,
                                           append_listener& listener)
{
    {
        partition.append_acknowledged(source, handed, listener)
        } -> std::same_as<void>;
};

/// A partition split into producer lanes (memory), optional. `lane_count()` (const, noexcept, at
/// least 1, the same for every partition of a topic and for the partition's whole life) is how many;
/// the topic reads it once, when it is built, from its first partition. The topic's router keeps a
/// round-robin position per lane and computes each produce's lane once, from the producing thread
/// (the first `lane_count() - 1` producing threads own a lane each, every other thread shares the
/// last); `append` and `append_acknowledged` find it in `item_source::lane`. Without it, the topic
/// keeps one round-robin position and passes lane 0.
template <class Partition>
concept laned_partition = requires(const Partition& partition)
{
    {
        partition.lane_count()
    }
    noexcept->std::convertible_to<std::size_t>;
};

/// A partition the topic can hand a `partition_waker` (see `storage_partition`).
template <class Partition>
concept wakeable_partition = requires(Partition& partition, partition_waker waker)
{
    {
        partition.bind_waker(waker)
    }
    noexcept;
};

}  // namespace bufferqueue
