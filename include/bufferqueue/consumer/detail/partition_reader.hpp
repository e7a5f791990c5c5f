// Internal: the consumer layer's view of one storage partition, with its item type and its storage
// type erased, so the consumer machinery (ring_reader, shared_consumer, the topic's consumer groups)
// is compiled once in src/ instead of once per item type and backend in every user's file (issue 29).
#pragma once

#include "bufferqueue/storage/storage.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace bufferqueue::detail {

/// A batch with its item type erased, the one form it has from the partition's pull to the typed
/// handle: `count` objects of the consumer's item type at `items` (a `pull_result<T>`'s items), their
/// `offsets` when the storage reports them, `next_offset` (the position a commit of the batch
/// stores) and `more_ready` (the pull's hint), and the `partition` the consumer read them from
/// (set by the consumer, not the pull). The typed handle turns it into the user's `batch<T>`
/// (`typed_batch<T>`, consume_operations.hpp). A view; never allocates.
struct untyped_batch {
    const void* items = nullptr;
    std::size_t count = 0;
    std::size_t partition = 0;
    std::span<const std::uint64_t> offsets{};
    std::uint64_t next_offset = 0;
    bool more_ready = false;
};

class partition_reader;
class partition_signal;

/// One partition a consumer reads: its storage, its signal and the group's cursor in it (the
/// storage's own cursor type, which only `storage` knows).
struct partition_assignment {
    std::size_t partition = 0;
    partition_reader* storage = nullptr;
    partition_signal* signal = nullptr;
    void* cursor = nullptr;
};

/// One storage partition as its consumers read it: the calls of the storage concept that take a
/// group's cursor, with the cursor erased to `void*` (the partition's own `Partition::cursor`, which
/// the topic opened for the group). Implemented once per storage type by the topic's partition
/// slots (topic/detail/partition_slot.hpp), which forward each call to the storage. Thread-safety,
/// errors, allocation and blocking: those of the storage concept's member each call forwards to
/// (storage/storage.hpp). Not owned by its users: the topic keeps it alive while consumers exist.
class partition_reader {
public:
    partition_reader(const partition_reader&) = delete;
    partition_reader& operator=(const partition_reader&) = delete;

    /// `storage.pull(cursor, max_items)`, erased into `pulled` (whose `count` is 0, and nothing else
    /// set, when nothing was readable; `partition` is never set). Written field by field, not returned: a scan over
    /// partitions that are mostly empty reads back only the count it wrote (an erased result returned by value cost a
    /// stalled wide load per call, which doubled a 4-partition scan in `bench_memory`).
    virtual void pull(void* cursor, std::size_t max_items, untyped_batch& pulled) = 0;
    /// One rotation of a ring scan: pulls `entries` in turn from index `start` on (wrapping around),
    /// until one delivers; returns its index, with its items in `pulled`, or `entries.size()` when
    /// none did. Every entry's storage must be of this reader's own type (a consumer's entries are
    /// one topic's partitions). `at` holds the index being pulled, so when a pull throws, the caller
    /// knows which partition failed. One call per scan, the storage's pulls inlined in it.
    virtual std::size_t pull_first(std::span<const partition_assignment> entries, std::size_t start,
                                   std::size_t max_items, untyped_batch& pulled, std::size_t& at) = 0;
    /// `storage.commit(cursor, next_offset)`: the items no group holds any more.
    virtual std::uint64_t commit(void* cursor, std::uint64_t next_offset) = 0;
    /// `storage.release_batch(cursor)`.
    virtual void release_batch(void* cursor) noexcept = 0;
    /// `prepare_wait(storage, cursor)` (storage/partition_waker.hpp): the consumer is about to wait on
    /// the partition (it registered with its signal); returns whether there is something to pull.
    /// Never blocks.
    virtual bool prepare_wait(const void* cursor) noexcept = 0;
    /// `storage.unreadable(cursor)` for a `skipping_partition`, else nothing.
    virtual std::optional<unreadable_record> unreadable(const void* cursor) const noexcept = 0;
    /// `storage.committed_items(cursor)`.
    virtual std::uint64_t committed_items(const void* cursor) const noexcept = 0;
    /// `lag_items(storage, cursor)`: the items the cursor's group has not committed. Noexcept,
    /// lock-free as the statistics members are.
    virtual std::uint64_t lag(const void* cursor) const noexcept = 0;

protected:
    partition_reader() = default;
    ~partition_reader() = default;
};

}  // namespace bufferqueue::detail
