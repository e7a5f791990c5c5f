// Internal: the shared state of one partition's log in a process-shared topic, stored in the
// partition's slot of the shared header (shared_topic_header.hpp) right after its append lock. Every
// process's writer adopts it when it takes the append lock and stores its own state back before it
// lets go, so the processes append to one log; readers learn from it what other processes published.
//
// Bytes 64..255 of partition slot p (docs/mmap-format.md, "Shared header"), integers in the host's
// byte order, read and written only under the partition's append lock:
//
//   offset size field
//       64    8 tail segment index (the segment appends go to)
//       72    8 tail position: where the next record goes in the tail segment
//       80    8 the item index of the tail segment's first record
//       88    8 records appended to the partition, ever
//       96    8 1 when the tail segment holds a segment-end marker (the next append rolls over), else 0
//      104    8 pending end: while a record (or marker) is being written at the tail position, the
//                position it ends at; the tail position otherwise (what a dead writer may have torn)
//      112    8 flushed end, a logical offset: the log before it was msynced
//      120    8 records before the flushed end
//      128    8 published end, a logical offset: consumers may read the log before it
//      136    8 records before the published end
//      144    8 1 while a consumer of some process found nothing new and may wait (prepare_wait): the
//                next append that publishes takes it (back to 0) and wakes the watchers; 0 otherwise
//      152    8 flush event: a futex sequence and waiter count (process_shared_event), notified after
//                an msync of the log by a process that claimed the flush target
//      160    8 flush target, a logical offset: an msync of the log up to it is in flight (0: none)
//      168    8 msynced end, a logical offset: the log before it was msynced (raised without the lock,
//                before the flush event is notified; the flushed end above follows under the lock)
//      176    8 retained-from offset: where the log's first retained record is (earliest.offset).
//                Retention, in any process, raises it (and earliest.offset) before it deletes the
//                segment files below it; the other processes then drop their mappings of them
//      184    8 the item index at the retained-from offset (earliest.items)
//      192    8 bytes of log the last claimed msync covered beyond the msynced end before it (without
//                the lock): how much a leader that claims the next one gathers first
//      200    8 1 while a leader that claimed a flush gathers the records of other processes (without
//                the lock): each record written then notifies the flush event; 0 otherwise
//      208   48 reserved, 0
#pragma once

#include "bufferqueue/mmap/detail/checkpoint_format.hpp"
#include "bufferqueue/mmap/detail/process_shared_sync.hpp"

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace bufferqueue::detail {

/// The fields above, as one value.
struct shared_log_state {
    std::uint64_t tail_segment = 0;
    std::uint64_t tail_position = 0;
    std::uint64_t tail_first_item = 0;
    std::uint64_t items = 0;
    std::uint64_t tail_ended = 0;
    std::uint64_t pending_end = 0;
    std::uint64_t flushed_end = 0;
    std::uint64_t flushed_items = 0;
    std::uint64_t published_end = 0;
    std::uint64_t published_items = 0;
};

/// Checks `state` and `retained_from`, read from a partition's slot under its append lock, against
/// what the writers of a log of `segment_size`-byte segments store (docs/mmap-format.md, "Shared
/// header"): the tail's segment index keeps logical offsets within 64 bits; its position is a record
/// boundary between the segment header and the segment's end (and leaves room for a segment-end
/// marker unless the tail holds one); the pending end is between the tail position and the segment's
/// end; the flushed, published and retained-from ends and their record counts are not past the
/// tail's. Every process checks it before it uses it (another process wrote it). Throws
/// `error(errc::corrupt_data)` "{partition}: {header_path}: ..." naming the field and its value;
/// allocates only then.
void check_shared_log_state(const shared_log_state& state, log_position retained_from, std::uint64_t segment_size,
                            std::string_view partition, std::string_view header_path);

/// A view of one partition's shared log state inside the mapped shared header. Copyable; valid
/// while the header's mapping lives. `load` and `store` only under the partition's append lock; each
/// field is accessed as one relaxed atomic, so `published_end` may also be read without the lock
/// (a hint: the watcher takes the lock only when it moved).
class shared_log_slot {
public:
    /// Where the state starts within a partition slot.
    static constexpr std::size_t offset_in_slot = 64;
    /// Bytes of the slot the state may use (up to the slot's end).
    static constexpr std::size_t size = 192;
    static_assert(sizeof(shared_log_state) <= size);
    static constexpr std::size_t fields = sizeof(shared_log_state) / sizeof(std::uint64_t);
    /// The consumer-waiting mark (byte 144 of the slot) is outside `shared_log_state`: it is set
    /// without the lock, so `store` must never write it back.
    static constexpr std::size_t consumer_waiting_field = fields;
    static constexpr std::size_t flush_event_field = fields + 1;
    static constexpr std::size_t flush_target_field = fields + 2;
    static constexpr std::size_t msynced_end_field = fields + 3;
    static constexpr std::size_t retained_offset_field = fields + 4;
    static constexpr std::size_t retained_items_field = fields + 5;
    static constexpr std::size_t last_flush_bytes_field = fields + 6;
    static constexpr std::size_t gathering_field = fields + 7;
    /// Bytes of the slot in use (the rest up to `size` is reserved, 0).
    static constexpr std::size_t used_size = (gathering_field + 1) * sizeof(std::uint64_t);
    static_assert(used_size <= size);
    static_assert(process_shared_event::storage_size == sizeof(std::uint64_t));

    shared_log_slot() noexcept = default;

    /// A view of the state at `storage` (8-aligned, `size` bytes). Never throws.
    explicit shared_log_slot(std::byte* storage) noexcept : storage_(storage) {}

    /// The stored state. Never throws.
    shared_log_state load() const noexcept
    {
        std::array<std::uint64_t, fields> values{};
        for (std::size_t field = 0; field < fields; ++field) {
            values[field] = at(field).load(std::memory_order_acquire);
        }
        return std::bit_cast<shared_log_state>(values);
    }

    /// Stores `state`. Never throws.
    void store(const shared_log_state& state) noexcept
    {
        const auto values = std::bit_cast<std::array<std::uint64_t, fields>>(state);
        for (std::size_t field = 0; field < fields; ++field) {
            at(field).store(values[field], std::memory_order_release);
        }
    }

    /// A consumer found nothing new and may wait (without the lock; a full barrier follows). Never throws.
    void mark_consumer_waiting() const noexcept
    {
        at(consumer_waiting_field).exchange(1, std::memory_order_seq_cst);
        std::atomic_thread_fence(std::memory_order_seq_cst);
    }

    /// Takes the waiting mark (without the lock, after a full barrier): true when a consumer may
    /// wait for what was just published. Never throws.
    bool take_consumer_waiting() const noexcept
    {
        std::atomic_thread_fence(std::memory_order_seq_cst);
        auto mark = at(consumer_waiting_field);
        return mark.load(std::memory_order_relaxed) != 0 && mark.exchange(0, std::memory_order_seq_cst) != 0;
    }

    /// Group commit across processes, all without the lock. The event notified after an msync.
    process_shared_event flush_event() const noexcept
    {
        return process_shared_event(storage_ + flush_event_field * sizeof(std::uint64_t));
    }

    /// Where the log's written records end, read without the lock (a record's bytes are written
    /// before its end is stored): the logical offset of the tail position, or nothing while the tail
    /// moved to another segment than `segment`, or when the position read is past `segment_size`
    /// (not one a writer stores). Never throws.
    std::optional<std::uint64_t> written_end_in(std::uint64_t segment, std::uint64_t segment_size) const noexcept
    {
        const std::uint64_t tail =
            at(offsetof(shared_log_state, tail_segment) / sizeof(std::uint64_t)).load(std::memory_order_acquire);
        const std::uint64_t position =
            at(offsetof(shared_log_state, tail_position) / sizeof(std::uint64_t)).load(std::memory_order_acquire);
        const std::uint64_t again =
            at(offsetof(shared_log_state, tail_segment) / sizeof(std::uint64_t)).load(std::memory_order_acquire);
        if (tail != segment || again != segment || position > segment_size) {
            return std::nullopt;
        }
        return segment * segment_size + position;
    }

    /// The end of the msync in flight, 0 when none. Never throws.
    std::uint64_t flush_target() const noexcept { return at(flush_target_field).load(std::memory_order_acquire); }

    /// Claims the flush: sets the target from `seen` to `end`; false when it changed meanwhile.
    bool claim_flush(std::uint64_t seen, std::uint64_t end) const noexcept
    {
        return at(flush_target_field).compare_exchange_strong(seen, end, std::memory_order_acq_rel);
    }

    /// Moves the claimed flush's target from `claimed` to `end` (the claimant only). Never throws.
    void extend_flush(std::uint64_t claimed, std::uint64_t end) const noexcept
    {
        at(flush_target_field).compare_exchange_strong(claimed, end, std::memory_order_acq_rel);
    }

    /// Ends the claimed flush to `end` (the target goes back to 0 unless another claimed since):
    /// raises the msynced end to `end` when the msync succeeded (noting how much it added), then
    /// notifies the flush event.
    void finish_flush(std::uint64_t end, bool succeeded) const noexcept
    {
        if (succeeded) {
            auto msynced = at(msynced_end_field);
            std::uint64_t current = msynced.load(std::memory_order_relaxed);
            while (current < end && !msynced.compare_exchange_weak(current, end, std::memory_order_acq_rel)) {
            }
            if (current < end && current != 0) {
                at(last_flush_bytes_field).store(end - current, std::memory_order_relaxed);
            }
        }
        std::uint64_t claimed = end;
        at(flush_target_field).compare_exchange_strong(claimed, 0, std::memory_order_acq_rel);
        flush_event().notify();
    }

    /// Bytes the last claimed msync added to the msynced end (0 before the second one). Never throws.
    std::uint64_t last_flush_bytes() const noexcept
    {
        return at(last_flush_bytes_field).load(std::memory_order_relaxed);
    }

    /// A claimant gathers other processes' records (`true`) or stopped (`false`); a full barrier
    /// follows, as writers check `gathering` right after they stored a record. Never throws.
    void set_gathering(bool gathering) const noexcept
    {
        at(gathering_field).store(gathering ? 1 : 0, std::memory_order_seq_cst);
        std::atomic_thread_fence(std::memory_order_seq_cst);
    }

    /// True while a claimant gathers: a writer that just stored a record notifies the flush event.
    bool gathering() const noexcept
    {
        std::atomic_thread_fence(std::memory_order_seq_cst);
        return at(gathering_field).load(std::memory_order_relaxed) != 0;
    }

    /// The log before this logical offset was msynced (by any process). Never throws.
    std::uint64_t msynced_end() const noexcept { return at(msynced_end_field).load(std::memory_order_acquire); }

    /// Where the retained log starts (the earliest position). Under the lock; never throws.
    log_position retained_from() const noexcept
    {
        return {at(retained_offset_field).load(std::memory_order_acquire),
                at(retained_items_field).load(std::memory_order_acquire)};
    }

    /// The retained-from offset, read without the lock (a hint: it may be moving). Never throws.
    std::uint64_t retained_from_offset() const noexcept
    {
        return at(retained_offset_field).load(std::memory_order_relaxed);
    }

    /// Stores where the retained log starts. Under the lock; never throws.
    void store_retained_from(log_position start) const noexcept
    {
        at(retained_offset_field).store(start.offset, std::memory_order_release);
        at(retained_items_field).store(start.items, std::memory_order_release);
    }

    /// The published end, read without the lock (it may be moving). Never throws.
    std::uint64_t published_end() const noexcept
    {
        return at(offsetof(shared_log_state, published_end) / sizeof(std::uint64_t)).load(std::memory_order_relaxed);
    }

private:
    std::atomic_ref<std::uint64_t> at(std::size_t field) const noexcept
    {
        return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(  // NOLINT: the mapped field
            storage_ + field * sizeof(std::uint64_t)));
    }

    std::byte* storage_ = nullptr;
};

}  // namespace bufferqueue::detail
