// Internal: the half of a typed topic that neither its item type nor its storage changes - its
// name, bounded admission, consumer groups over the erased partitions, outside group membership,
// statistics and closing - compiled once (src/topic/topic_core.cpp) instead of once per item type.
#pragma once

#include "bufferqueue/detail/io_pool.hpp"
#include "bufferqueue/detail/storage_runner.hpp"
#include "bufferqueue/options.hpp"
#include "bufferqueue/stats.hpp"
#include "bufferqueue/storage/group_membership.hpp"
#include "bufferqueue/topic/detail/capacity_gate.hpp"
#include "bufferqueue/topic/detail/consumer_groups.hpp"
#include "bufferqueue/topic/detail/partition_slot.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bufferqueue::detail {

class consumer_base;

/// What `basic_topic<T, Partition>` delegates to once its item type no longer matters. It is the
/// target of the topic's outside group membership (`membership_target`), so the membership's port
/// reaches it, never the typed topic. Thread-safe, as `topic` says of each member it serves; not
/// movable (the link and the consumers point into it).
class topic_core final : public membership_target {
public:
    struct settings {
        std::string name;
        std::string item_type_name;     ///< as messages and statistics show the item type
        std::string_view backend_name;  ///< `storage_backend_name<Partition>()`: a literal
        std::optional<std::size_t> bounded_capacity;
        bufferqueue::full_mode full_mode = bufferqueue::full_mode::wait;
        boost::asio::any_io_executor executor;
        /// Held until the topic closes, after its partitions (for example a directory lock).
        std::shared_ptr<void> resources{};
        /// Runs the consumers' blocking file I/O; null when storage never blocks.
        std::shared_ptr<io_pool> blocking_pool{};
        /// Group membership owned outside the topic (see `group_membership`); null: the topic's own
        /// contiguous split.
        std::shared_ptr<group_membership> membership{};
    };

    /// `slots`: the topic's partitions, erased, by partition number; they outlive the core. Binds
    /// the outside membership, if any, to this core. Allocates; throws `std::bad_alloc`.
    topic_core(settings configuration, std::vector<partition_slot_base*> slots);
    topic_core(const topic_core&) = delete;
    topic_core& operator=(const topic_core&) = delete;
    ~topic_core();  // the typed topic closes it first; compiled once, like the members it destroys

    const std::string& name() const noexcept { return name_; }
    const std::string& item_type_name() const noexcept { return item_type_name_; }
    bufferqueue::full_mode full_mode() const noexcept { return full_mode_; }
    const boost::asio::any_io_executor& executor() const noexcept { return executor_; }
    bool is_closed() const noexcept { return closed_.load(std::memory_order_acquire); }
    /// The bounded topic's admission, or null for an unbounded topic.
    capacity_gate* gate() noexcept { return gate_ ? &*gate_ : nullptr; }
    const capacity_gate* gate() const noexcept { return gate_ ? &*gate_ : nullptr; }

    /// Leaves the groups of the outside membership, aborts waiting produces and consumes, closes every
    /// partition's storage (`partition_slot_base::close_storage`) and releases the resources. The
    /// first call does it; later ones return at once. Never throws.
    void close() noexcept;

    /// See `topic::create_consumers`; `keep_alive` (the typed topic) is held by every consumer.
    std::vector<std::shared_ptr<consumer_base>>
    create_consumers(const pull_consumer_options& options, std::size_t count, std::shared_ptr<const void> keep_alive);
    /// See `topic_base::stats`.
    topic_stats stats();
    /// See `topic::has_group`.
    bool has_group(const std::string& group);
    /// See `topic::remove_group`.
    bool remove_group(const std::string& group);

    /// The membership port's calls (see `membership_port::assign`, `membership_port::revoke` and
    /// `membership_port::partitions_in_use`).
    void assign_partitions(const std::string& group, std::size_t consumer,
                           std::span<const std::size_t> partitions) override;
    void revoke_partitions(const std::string& group, std::size_t consumer,
                           std::span<const std::size_t> partitions) override;
    std::vector<std::size_t> partitions_in_use(const std::string& group) override;

    /// Gives back room that every group has committed past (bounded topics; else nothing).
    void release_capacity(std::size_t count) noexcept
    {
        if (gate_) {
            gate_->release(count);
        }
    }

private:
    const std::string name_;
    const std::string item_type_name_;
    const std::string_view backend_name_;
    const bufferqueue::full_mode full_mode_;
    const boost::asio::any_io_executor executor_;
    const std::vector<partition_slot_base*> slots_;  // the typed topic's, erased: what the groups use
    std::optional<capacity_gate> gate_;
    std::shared_ptr<void> resources_;  // released by close()
    const storage_runner runner_;      // decided once: the consumers' (the I/O pool for blocking storage)
    alignas(64) std::atomic<bool> closed_{false};
    consumer_groups groups_;
    // Outside membership, when the backend has it (destroyed before groups_, which the port reaches).
    std::shared_ptr<group_membership> membership_;
    std::shared_ptr<membership_link> link_;  // the port's way in; cleared when the topic closes
};

}  // namespace bufferqueue::detail
