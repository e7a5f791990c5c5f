// Internal: what a consumer receives from its topic when it is created, so it never calls up into
// the topic.
#pragma once

#include "bufferqueue/consumer/detail/capacity_release.hpp"
#include "bufferqueue/detail/storage_runner.hpp"

#include <atomic>
#include <cstddef>
#include <memory>
#include <span>
#include <string>

namespace bufferqueue::detail {

/// Who keeps track of a group's consumers and which partition each reads (the topic layer's
/// `consumer_groups`). A consumer reports to it, from the thread owning its operation and holding
/// no lock of its own. Both calls are thread-safe, never throw, and may take the group lock.
class consumer_membership {
public:
    /// Consumer `consumer` of `group` no longer reads `partition` (revoked, and no batch of it
    /// held): the partition may go to its next owner.
    virtual void partition_released(const std::string& group, std::size_t consumer, std::size_t partition) noexcept = 0;
    /// Consumer `consumer` of `group` detached (closed): it no longer counts as open, and its
    /// partitions are free. Called once.
    virtual void consumer_released(const std::string& group, std::size_t consumer) noexcept = 0;
    /// What keeps consumer `consumer` of `group` from reading without failing an operation (outside
    /// membership's `group_membership::consumer_problem`), or empty. Thread-safe; takes no group lock.
    virtual std::string consumer_problem(const std::string& group, std::size_t consumer) const = 0;

protected:
    consumer_membership() = default;
    consumer_membership(const consumer_membership&) = default;
    consumer_membership& operator=(const consumer_membership&) = default;
    ~consumer_membership() = default;
};

/// Everything a consumer needs from its topic, handed over once at creation. The pointers point
/// into the topic; `keep_alive` owns the topic, so they (and the consumer's partition
/// assignments) stay valid for the consumer's whole life.
struct consumer_context {
    std::string topic_name;
    /// Where completions run when the handler has no executor of its own.
    boost::asio::any_io_executor executor;
    /// Where the consumer's storage calls run (see `storage_runner`).
    storage_runner runner;
    /// The topic's closed flag (set once, never cleared).
    const std::atomic<bool>* topic_closed = nullptr;
    /// Where a commit gives back the room it freed (the topic's capacity gate, see
    /// `capacity_release`); null for an unbounded topic.
    capacity_release* gate = nullptr;
    /// Where the consumer reports released partitions and its own detachment; null: nowhere.
    consumer_membership* membership = nullptr;
    /// The consumer's index in its group, in creation order.
    std::size_t index = 0;
    std::shared_ptr<const void> keep_alive;
};

}  // namespace bufferqueue::detail
