// A memory topic that counts the admitted items its storage holds, for tests of bounded admission
// under concurrency: a backend written in the tests (the memory backend's partitions behind a thin
// subclass that counts appends and releases), plugged in through the storage concept and
// `make_partitioned_topic` like every backend. The topic and its capacity gate are unchanged.
#pragma once

#include "bufferqueue/memory/detail/memory_partition.hpp"
#include "bufferqueue/memory/memory_topic.hpp"
#include "bufferqueue/storage/storage.hpp"
#include "bufferqueue/topic/partitioned_topic.hpp"
#include "bufferqueue/topic/topic_context.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>

namespace bufferqueue::test {

/// The items the partitions of one topic hold of those its producers stored (each admitted by the
/// topic's capacity gate first): appended and not yet handed back by a `commit` or `remove_group`.
/// A partition counts an append once it returned and a release before its `commit` returns it to
/// the topic, so the count never exceeds what the gate holds (admitted and not released); `most`
/// is its highest value, taken at every append. Relaxed atomics only, so counting adds no
/// synchronization between producers and consumers. Thread-safe; never allocates.
class held_items {
public:
    void appended(std::size_t count) noexcept
    {
        const std::int64_t now = held_.fetch_add(static_cast<std::int64_t>(count), std::memory_order_relaxed) +
                                 static_cast<std::int64_t>(count);
        std::int64_t most = most_.load(std::memory_order_relaxed);
        while (now > most && !most_.compare_exchange_weak(most, now, std::memory_order_relaxed)) {
        }
    }

    void released(std::uint64_t count) noexcept
    {
        held_.fetch_sub(static_cast<std::int64_t>(count), std::memory_order_relaxed);
    }

    /// Held now (negative for a moment when a commit hands back items before their append returned).
    std::int64_t now() const noexcept { return held_.load(std::memory_order_relaxed); }
    /// The most ever held at once.
    std::int64_t most() const noexcept { return most_.load(std::memory_order_relaxed); }

private:
    std::atomic<std::int64_t> held_{0};
    std::atomic<std::int64_t> most_{0};
};

/// A memory partition (`detail::memory_partition<T>`, unchanged) that reports its appends and
/// releases to a `held_items`.
template <class T>
class counted_memory_partition final : public detail::memory_partition<T> {
    using base = detail::memory_partition<T>;

public:
    counted_memory_partition(std::shared_ptr<held_items> held, std::size_t segment_size, bool bounded,
                             std::size_t lanes)
        : base(segment_size, bounded, lanes), held_(std::move(held))
    {
    }

    void append(const item_source<T>& source, std::size_t& appended)
    {
        const std::size_t before = appended;
        try {
            base::append(source, appended);
        } catch (...) {
            held_->appended(appended - before);
            throw;
        }
        held_->appended(appended - before);
    }

    std::uint64_t commit(typename base::cursor& reader, std::uint64_t next_offset)
    {
        const std::uint64_t released = base::commit(reader, next_offset);
        held_->released(released);
        return released;
    }

    std::uint64_t remove_group(std::string_view group)
    {
        const std::uint64_t released = base::remove_group(group);
        held_->released(released);
        return released;
    }

private:
    const std::shared_ptr<held_items> held_;
};

/// Registration options of a counted memory topic: the memory topic `memory` (every option as the
/// memory backend reads it), whose partitions count into `held`.
template <class T>
struct counted_memory_topic_options {
    memory_topic_options<T> memory{};
    std::shared_ptr<held_items> held = std::make_shared<held_items>();
};

/// Found by `buffer_queue::add_topic`: the memory backend's partitions (its option checks and
/// producer lanes, as `detail::make_memory_partitions` builds them), counted, built through
/// `make_partitioned_topic`.
template <class T>
registered_topic make_topic(counted_memory_topic_options<T> options, topic_context& context)
{
    const memory_topic_options<T>& memory = options.memory;
    const std::size_t lanes =
        detail::checked_memory_lanes(memory.name, memory.partitions, memory.segment_size, memory.bounded_capacity,
                                     memory.full_mode, memory.producer_lanes, static_cast<bool>(memory.partition_key));
    topic_partitions<counted_memory_partition<T>> partitions;
    partitions.reserve(options.memory.partitions);
    for (std::size_t partition = 0; partition < options.memory.partitions; ++partition) {
        partitions.emplace_back(options.held, options.memory.segment_size, options.memory.bounded_capacity.has_value(),
                                lanes);
    }
    return make_partitioned_topic(context,
                                  topic_settings<T>{.name = std::move(options.memory.name),
                                                    .partition_key = std::move(options.memory.partition_key),
                                                    .bounded_capacity = options.memory.bounded_capacity,
                                                    .full_mode = options.memory.full_mode},
                                  std::move(partitions));
}

}  // namespace bufferqueue::test

template <class T>
struct bufferqueue::storage_traits<bufferqueue::test::counted_memory_partition<T>> {
    static constexpr bool blocking = false;
    static constexpr std::string_view backend_name = "memory";
};
