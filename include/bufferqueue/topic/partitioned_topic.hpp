// bufferqueue: building a typed topic over a backend's own partition type - what a backend's
// `make_topic` returns.
#pragma once

#include "bufferqueue/options.hpp"
#include "bufferqueue/partition_key.hpp"
#include "bufferqueue/storage/group_membership.hpp"
#include "bufferqueue/storage/storage.hpp"
#include "bufferqueue/topic/detail/basic_topic.hpp"
#include "bufferqueue/topic/detail/partition_slot.hpp"
#include "bufferqueue/topic/option_checks.hpp"
#include "bufferqueue/topic/topic_context.hpp"

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace bufferqueue {

namespace detail {
struct topic_partitions_access;
}  // namespace detail

/// The topic-level settings of a topic built by `make_partitioned_topic`; the backend translates
/// its options into them.
template <class T>
struct topic_settings {
    /// Topic name, unique per item type; not empty or only whitespace.
    std::string name{};
    /// Optional key routing; round-robin when empty.
    key_selector<T> partition_key{};
    /// Topic-wide limit on items not yet committed by every group; empty means unbounded. The
    /// partitions' `commit` and `remove_group` results give the room back.
    std::optional<std::size_t> bounded_capacity{};
    /// What `produce` does while `bounded_capacity` is reached.
    bufferqueue::full_mode full_mode = bufferqueue::full_mode::wait;
    /// Held until the topic closes and released after every partition's `close()` (for example a
    /// folder lock or a connection shared by the partitions); may be empty.
    std::shared_ptr<void> resources{};
    /// Group membership owned outside the topic (a broker's group protocol, other processes): new
    /// consumers start with no partitions and `membership` assigns and revokes them through the port
    /// it is bound to once, here (storage/group_membership.hpp). Empty: the topic splits the
    /// partitions among a group's consumers itself (contiguous shares).
    std::shared_ptr<group_membership> membership{};
};

/// The partitions of a topic under construction, partition 0 first. Each partition is built in
/// place (a partition type need not be movable) next to the state the topic keeps for it, so the
/// topic reaches a partition with no further indirection. Move-only; not thread-safe (one owner).
template <class Partition>
class topic_partitions {
public:
    /// No partitions yet. Never allocates.
    topic_partitions() = default;
    /// Takes the source's partitions over (they stay where they were built); the source is left
    /// empty. Never throws.
    topic_partitions(topic_partitions&&) noexcept = default;
    /// Takes the source's partitions over and destroys the ones this object held. Never throws.
    topic_partitions& operator=(topic_partitions&&) noexcept = default;

    /// Reserves room for `count` partitions. Allocates.
    void reserve(std::size_t count) { slots_.reserve(count); }

    /// Builds the next partition from `arguments` and returns it. A `wakeable_partition` gets its
    /// `bind_waker` call here. Allocates; throws what the partition's constructor throws (nothing
    /// is added then).
    template <class... Arguments>
    Partition& emplace_back(Arguments&&... arguments)
    {
        slots_.push_back(std::make_unique<detail::partition_slot<Partition>>(std::forward<Arguments>(arguments)...));
        return slots_.back()->storage;
    }

    /// Partitions built so far.
    std::size_t size() const noexcept { return slots_.size(); }
    /// True before the first `emplace_back`.
    bool empty() const noexcept { return slots_.empty(); }
    /// Partition `partition`, which must be below `size()` (not checked). Its address stays valid
    /// while the partitions live, also across `emplace_back` and moves of this object.
    Partition& operator[](std::size_t partition) noexcept { return slots_[partition]->storage; }
    /// Partition `partition` (below `size()`, not checked), read-only.
    const Partition& operator[](std::size_t partition) const noexcept { return slots_[partition]->storage; }

private:
    friend struct detail::topic_partitions_access;

    std::vector<std::unique_ptr<detail::partition_slot<Partition>>> slots_;
};

namespace detail {

struct topic_partitions_access {
    template <class Partition>
    static std::vector<std::unique_ptr<partition_slot<Partition>>>
    take(topic_partitions<Partition>& partitions) noexcept
    {
        return std::move(partitions.slots_);
    }
};

/// For the topic layer (`make_partitioned_topic` and the library's own backends): builds the topic.
/// `pool_source(threads)` is called once, exactly when `storage_traits<Partition>::blocking`, with the
/// threads of the pool of its own the partition asks for (`storage_own_pool_threads<Partition>()`),
/// 0 for the queue's shared pool.
template <class T, class Partition, class PoolSource>
std::shared_ptr<topic<T>> build_topic(topic_settings<T> settings, topic_partitions<Partition> partitions,
                                      boost::asio::any_io_executor executor, PoolSource&& pool_source)
{
    static_assert(storage_partition<Partition, T>,
                  "the partition type does not satisfy bufferqueue::storage_partition<Partition, T> "
                  "(see bufferqueue/storage/storage.hpp)");
    constexpr std::string_view kind = "partitioned";
    require_topic_name(kind, settings.name);
    require_partition_count(kind, settings.name, partitions.size());
    require_bounds(kind, settings.name, settings.bounded_capacity, settings.full_mode);

    using topic_type = basic_topic<T, Partition>;
    typename topic_type::settings configuration{.name = std::move(settings.name),
                                                .partition_key = std::move(settings.partition_key),
                                                .bounded_capacity = settings.bounded_capacity,
                                                .full_mode = settings.full_mode,
                                                .executor = std::move(executor),
                                                .resources = std::move(settings.resources),
                                                .membership = std::move(settings.membership)};
    if constexpr (storage_traits<Partition>::blocking) {
        configuration.blocking_pool = std::forward<PoolSource>(pool_source)(storage_own_pool_threads<Partition>());
    }
    auto slots = topic_partitions_access::take(partitions);
    configuration.producer_lanes = producer_lanes_of(slots);
    return std::make_shared<topic_type>(std::move(configuration), std::move(slots));
}

}  // namespace detail

/// Builds a typed topic over a backend's own partitions: what a backend's `make_topic` returns (see
/// docs/backends.md). The topic routes, admits (when bounded), runs consumer groups and wakes
/// consumers; the partitions store. It reads `storage_traits<Partition>` once: a blocking
/// partition's topic gets `context.blocking_pool()` (or `context.dedicated_pool(own_pool_threads)`)
/// and its handles' asynchronous operations call the partitions there (but for appends that do not
/// block: `blocking_appends`). `Partition` must satisfy `storage_partition<Partition, T>` (checked at compile
/// time). Throws `bufferqueue::error` `errc::invalid_argument` for an empty or only-whitespace name,
/// no partitions or more than `max_partitions`, or invalid bounds (a backend validates its own
/// options first, with its own wording); what `blocking_pool` or `dedicated_pool` throws. Allocates. Does not register
/// the topic (`add_topic` does, after `make_topic` returns).
template <class T, class Partition>
registered_topic make_partitioned_topic(topic_context& context, topic_settings<T> settings,
                                        topic_partitions<Partition> partitions)
{
    return detail::registered_topic_access::make(detail::build_topic(
        std::move(settings), std::move(partitions), context.executor(), [&context](std::size_t own_threads) {
            return own_threads > 0 ? context.dedicated_pool(own_threads) : context.blocking_pool();
        }));
}

}  // namespace bufferqueue
