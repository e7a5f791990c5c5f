// Internal: one partition of a topic - its storage and the consumers waiting on it - and its face
// with the storage type erased, which the topic's consumer groups and statistics use (compiled once,
// src/topic/).
#pragma once

#include "bufferqueue/consumer/detail/partition_reader.hpp"
#include "bufferqueue/detail/partition_signal.hpp"
#include "bufferqueue/storage/storage.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace bufferqueue::detail {

/// One partition of a topic, whatever its storage: the signal its waiting consumers register with
/// (declared first, so it outlives the storage, which may notify it from a thread of its own until
/// it is destroyed), the cursor calls its consumers make (`partition_reader`), and the group and
/// statistics calls of the storage concept, with cursors erased to `void*`. Thread-safety, errors
/// and allocation: those of the storage concept's member each call forwards to. Not movable: the
/// waker and the consumers point into it.
class partition_slot_base : public partition_reader {
public:
    partition_signal signal;

    /// `storage.open_cursor(group)`: the group's cursor, erased.
    virtual void* open_cursor(std::string_view group) = 0;
    /// `storage.has_group(group)`.
    virtual bool has_group(std::string_view group) const = 0;
    /// `storage.remove_group(group)`: the items no group holds any more.
    virtual std::uint64_t remove_group(std::string_view group) = 0;
    /// `storage.end_items()`.
    virtual std::uint64_t end_items() const noexcept = 0;
    /// `storage.earliest_items()`.
    virtual std::uint64_t earliest_items() const noexcept = 0;
    /// `storage.maintenance_failures()` where the storage has it, else 0.
    virtual std::uint64_t maintenance_failures() const noexcept = 0;
    /// `storage.stored_groups()` for a `group_listing_partition`, else none.
    virtual std::vector<stored_group> stored_groups() const = 0;
    /// `storage.close()`.
    virtual void close_storage() noexcept = 0;

protected:
    partition_slot_base() = default;
    ~partition_slot_base() = default;
};

/// One partition of a topic over `Partition`: its storage, behind the erased face. A partition
/// that takes a waker (`wakeable_partition`) gets the one over `signal` here, once.
template <class Partition>
class partition_slot final : public partition_slot_base {
public:
    using cursor = typename Partition::cursor;

    template <class... Arguments>
    explicit partition_slot(Arguments&&... arguments) : storage(std::forward<Arguments>(arguments)...)
    {
        if constexpr (wakeable_partition<Partition>) {
            storage.bind_waker(partition_waker(signal));
        }
    }

    ~partition_slot() = default;

    Partition storage;

    void pull(void* position, std::size_t max_items, untyped_batch& pulled) override
    {
        const auto result = storage.pull(*static_cast<cursor*>(position), max_items);
        const std::size_t count = result.items.size();
        pulled.count = count;
        if (count == 0) {
            return;
        }
        pulled.items = result.items.data();
        pulled.next_offset = result.next_offset;
        pulled.offsets = result.offsets;
        pulled.more_ready = result.more_ready;
    }
    std::size_t pull_first(std::span<const partition_assignment> entries, std::size_t start, std::size_t max_items,
                           untyped_batch& pulled, std::size_t& at) override
    {
        const std::size_t count = entries.size();
        for (std::size_t step = 0; step < count; ++step) {
            std::size_t index = start + step;  // start < count: no division needed
            if (index >= count) {
                index -= count;
            }
            at = index;
            const partition_assignment& each = entries[index];
            auto& slot = static_cast<partition_slot&>(*each.storage);  // one topic's partitions: this type
            const auto result = slot.storage.pull(*static_cast<cursor*>(each.cursor), max_items);
            if (!result.items.empty()) {
                pulled.items = result.items.data();
                pulled.count = result.items.size();
                pulled.next_offset = result.next_offset;
                pulled.offsets = result.offsets;
                pulled.more_ready = result.more_ready;
                return index;
            }
        }
        return count;
    }
    std::uint64_t commit(void* position, std::uint64_t next_offset) override
    {
        return storage.commit(*static_cast<cursor*>(position), next_offset);
    }
    void release_batch(void* position) noexcept override { storage.release_batch(*static_cast<cursor*>(position)); }
    bool prepare_wait(const void* position) noexcept override
    {
        return bufferqueue::prepare_wait(storage, *static_cast<const cursor*>(position));
    }
    std::optional<unreadable_record> unreadable(const void* position) const noexcept override
    {
        if constexpr (skipping_partition<Partition>) {
            return storage.unreadable(*static_cast<const cursor*>(position));
        } else {
            return std::nullopt;
        }
    }
    std::uint64_t committed_items(const void* position) const noexcept override
    {
        return storage.committed_items(*static_cast<const cursor*>(position));
    }
    std::uint64_t lag(const void* position) const noexcept override
    {
        return lag_items(storage, *static_cast<const cursor*>(position));
    }

    void* open_cursor(std::string_view group) override { return &storage.open_cursor(group); }
    bool has_group(std::string_view group) const override { return storage.has_group(group); }
    std::uint64_t remove_group(std::string_view group) override { return storage.remove_group(group); }
    std::uint64_t end_items() const noexcept override { return storage.end_items(); }
    std::uint64_t earliest_items() const noexcept override { return storage.earliest_items(); }
    std::uint64_t maintenance_failures() const noexcept override
    {
        if constexpr (requires { storage.maintenance_failures(); }) {  // optional in the storage concept
            return storage.maintenance_failures();
        } else {
            return 0;
        }
    }
    std::vector<stored_group> stored_groups() const override
    {
        if constexpr (group_listing_partition<Partition>) {
            return storage.stored_groups();
        } else {
            return {};
        }
    }
    void close_storage() noexcept override { storage.close(); }
};

}  // namespace bufferqueue::detail
