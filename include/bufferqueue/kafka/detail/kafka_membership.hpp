// Internal: a Kafka topic's group membership - one Kafka group member per consumer of this process,
// whose rebalances assign and revoke that consumer's partitions (docs/kafka.md, "Pull consumers").
#pragma once

#include "bufferqueue/error.hpp"
#include "bufferqueue/kafka/detail/kafka_group_member.hpp"
#include "bufferqueue/kafka/detail/kafka_offsets.hpp"
#include "bufferqueue/kafka/detail/kafka_partition.hpp"
#include "bufferqueue/kafka/detail/kafka_producer.hpp"
#include "bufferqueue/storage/group_membership.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace bufferqueue::detail {

/// Connects one Kafka group member to consumer `index` of `group`: assigned partitions go to that
/// consumer through the port (and their cursors read through this member), revoked ones are taken
/// away, record arrivals wake the partition's waiting consumers. The listener runs on the member's
/// executor or inside its close, never after the close returned; it never throws (an assignment
/// to a consumer closed meanwhile is dropped).
template <class T>
class kafka_member_binding final : public kafka_group_listener {
public:
    kafka_member_binding(membership_port port, std::span<kafka_partition<T>* const> partitions, std::string group,
                         std::size_t index)
        : port_(std::move(port)), partitions_(partitions), group_(std::move(group)), index_(index)
    {
    }

    ~kafka_member_binding() override { close(); }

    /// Joins the group (the member's events are served on `settings.executor`). Throws what
    /// `kafka_group_member::join` throws.
    void join(kafka_group_settings settings)
    {
        // Held while joining, so an event served at once (on another executor thread) sees the member.
        const std::lock_guard lock(member_mutex_);
        member_ = kafka_group_member::join(std::move(settings), *this);
    }

    /// Leaves the group: the revocation reaches the topic first, then the leave proceeds on the
    /// executor (never blocks on the network). Idempotent; any thread.
    void close() noexcept
    {
        if (const std::shared_ptr<kafka_group_member> joined = member()) {
            joined->close();  // calls `revoked`, which takes member_mutex_: not held here
        }
    }

    void assigned(std::span<const std::int32_t> partitions) noexcept override
    {
        try {
            const std::shared_ptr<kafka_group_member> joined = member();
            std::vector<std::size_t> numbers;
            for (const std::int32_t partition : partitions) {
                if (auto* reader = cursor_of(partition)) {
                    reader->set_owner(joined);
                    numbers.push_back(static_cast<std::size_t>(partition));
                }
            }
            port_.assign(group_, index_, numbers);
            for (const std::size_t partition : numbers) {
                partitions_[partition]->notify();  // records may be there already
            }
        } catch (...) {
            // The consumer or topic closed meanwhile: it takes no partitions any more.
        }
    }

    void revoked(std::span<const std::int32_t> partitions) noexcept override
    {
        std::vector<std::size_t> numbers;
        try {
            for (const std::int32_t partition : partitions) {
                numbers.push_back(static_cast<std::size_t>(partition));
            }
            port_.revoke(group_, index_, numbers);
        } catch (...) {
            // Closed meanwhile: it reads nothing more anyway.
        }
        const std::shared_ptr<kafka_group_member> joined = member();
        for (const std::int32_t partition : partitions) {
            if (auto* reader = cursor_of(partition)) {
                reader->clear_owner(joined.get());
            }
        }
    }

    void records_available(std::int32_t partition) noexcept override
    {
        if (has_client_error_.load(std::memory_order_acquire)) {
            const std::lock_guard lock(client_error_mutex_);
            client_error_.clear();  // the client reaches the brokers again
            has_client_error_.store(false, std::memory_order_release);
        }
        if (partition >= 0 && static_cast<std::size_t>(partition) < partitions_.size()) {
            partitions_[static_cast<std::size_t>(partition)]->notify();
        }
    }

    /// A client-level error (brokers unreachable, ...): librdkafka retries, so no consume fails for
    /// it; `client_error` shows it until records arrive again. Partition errors (an offset out of
    /// range) fail the consume that reads the partition instead (`kafka_group_member::read`).
    void failed(boost::system::error_code, const std::string& detail) noexcept override
    {
        try {
            const std::lock_guard lock(client_error_mutex_);
            client_error_ = detail;
            has_client_error_.store(true, std::memory_order_release);
        } catch (...) {  // NOLINT(bugprone-empty-catch): no memory for the text; it stays unreported
        }
    }

    /// The latest client-level error since records last arrived; empty when none. Any thread.
    std::string client_error() const
    {
        const std::lock_guard lock(client_error_mutex_);
        return client_error_;
    }

private:
    std::shared_ptr<kafka_group_member> member() const noexcept
    {
        const std::lock_guard lock(member_mutex_);
        return member_;
    }

    typename kafka_partition<T>::cursor* cursor_of(std::int32_t partition) noexcept
    {
        if (partition < 0 || static_cast<std::size_t>(partition) >= partitions_.size()) {
            return nullptr;
        }
        try {
            return partitions_[static_cast<std::size_t>(partition)]->find_cursor(group_);
        } catch (...) {
            return nullptr;
        }
    }

    const membership_port port_;
    const std::span<kafka_partition<T>* const> partitions_;  // the membership's list
    const std::string group_;
    const std::size_t index_;
    mutable std::mutex member_mutex_;
    std::shared_ptr<kafka_group_member> member_;  // guarded by member_mutex_; set once by join
    mutable std::mutex client_error_mutex_;
    std::string client_error_;                   // guarded by client_error_mutex_
    std::atomic<bool> has_client_error_{false};  // client_error_ is not empty (checked without the lock)
};

/// The group membership of a Kafka topic: every consumer this process creates is a member of the
/// Kafka consumer group of its group's name (one librdkafka consumer client each), which starts
/// with no partitions; the group's rebalances assign them, seconds later. Statistics are refreshed
/// from the brokers and `remove_group` moves the group's committed offsets back on the brokers.
///
/// Lifetime: `partitions` point into the topic, which closes the membership (every member leaves
/// and its listener goes quiet) before its partitions go. Thread-safe as `group_membership` says.
template <class T>
class kafka_membership final : public group_membership {
public:
    struct settings {
        std::string topic;
        std::vector<kafka_partition<T>*> partitions;  // the topic's, partition 0 first
        std::shared_ptr<kafka_producer> producer;     // asks the brokers for the statistics' offsets
        std::string bootstrap_servers;                // for the members' clients
        std::map<std::string, std::string> properties;
        std::chrono::milliseconds admin_timeout{10000};  // statistics' and remove_group's round trips
        boost::asio::any_io_executor executor;           // where the members' events are served
    };

    explicit kafka_membership(settings configuration) : settings_(std::move(configuration)) {}

    ~kafka_membership() override { close(); }

    void bind(membership_port port) noexcept override { port_ = std::move(port); }

    /// Joins `count` members to Kafka group `group`. Throws what `kafka_group_member::join` throws
    /// (the members joined before leave again), `errc::closed` after `close`.
    void consumers_created(const std::string& group, std::size_t count) override
    {
        std::vector<std::shared_ptr<kafka_member_binding<T>>> joined;
        try {
            for (std::size_t index = 0; index < count; ++index) {
                auto binding = std::make_shared<kafka_member_binding<T>>(
                    port_, std::span<kafka_partition<T>* const>(settings_.partitions), group, index);
                binding->join(kafka_group_settings{.topic = settings_.topic,
                                                   .group = group,
                                                   .bootstrap_servers = settings_.bootstrap_servers,
                                                   .properties = settings_.properties,
                                                   .executor = settings_.executor});
                joined.push_back(std::move(binding));
            }
            const std::lock_guard lock(mutex_);
            if (closed_) {
                throw error(errc::closed,
                            format_message("kafka topic '{}' group '{}': the topic is closed", settings_.topic, group));
            }
            groups_.insert(group);
            for (std::size_t index = 0; index < joined.size(); ++index) {
                // No earlier member at this index: its consumer's close came first (group_membership.hpp).
                members_[key(group, index)] = joined[index];
            }
        } catch (...) {
            for (const auto& each : joined) {
                each->close();
            }
            throw;
        }
    }

    /// The consumer's member leaves the group (asynchronously; never blocks on the network).
    void consumer_closed(const std::string& group, std::size_t consumer) noexcept override
    {
        std::shared_ptr<kafka_member_binding<T>> leaving;
        try {
            const std::lock_guard lock(mutex_);
            if (const auto found = members_.find(key(group, consumer)); found != members_.end()) {
                leaving = std::move(found->second);
                members_.erase(found);
            }
        } catch (...) {  // NOLINT(bugprone-empty-catch): the key's allocation failed; close() still reaches it
        }
        if (leaving) {
            leaving->close();  // outside the lock: the revocation reaches the topic's groups
        }
    }

    /// Every member leaves its group; their listeners are quiet once this returns. Idempotent.
    void close() noexcept override
    {
        std::map<std::pair<std::string, std::size_t>, std::shared_ptr<kafka_member_binding<T>>> leaving;
        {
            const std::lock_guard lock(mutex_);
            closed_ = true;
            leaving.swap(members_);
        }
        for (const auto& [consumer, binding] : leaving) {
            binding->close();
        }
    }

    /// The brokers' numbers: every partition's earliest and end offsets and the committed offsets
    /// of the groups this process opened, asked for within `admin_timeout` (blocks that long at
    /// most). On a thread running the topic's io_context, or when the brokers do not answer in
    /// time, it asks nothing and the statistics keep the last numbers known (docs/kafka.md).
    void refresh_statistics() noexcept override
    {
        const auto* io = settings_.executor.template target<boost::asio::io_context::executor_type>();
        if (io != nullptr && io->running_in_this_thread()) {
            return;  // a broker round trip here would stall every handler of the io_context
        }
        try {
            std::vector<std::string> groups;
            {
                const std::lock_guard lock(mutex_);
                groups.assign(groups_.begin(), groups_.end());
            }
            const kafka_topic_offsets offsets = settings_.producer->read_offsets(groups, settings_.admin_timeout);
            for (std::size_t partition = 0; partition < settings_.partitions.size(); ++partition) {
                kafka_partition<T>& storage = *settings_.partitions[partition];
                storage.record_offsets(offsets.earliest[partition], offsets.end[partition]);
                for (const auto& [group, committed] : offsets.committed) {
                    if (auto* cursor = storage.find_cursor(group); cursor != nullptr) {
                        kafka_partition<T>::record_committed(*cursor, committed[partition]);
                    }
                }
            }
        } catch (...) {  // NOLINT(bugprone-empty-catch): a snapshot never fails; the last numbers stay
        }
    }

    /// Moves the group's committed offsets on the brokers back to the earliest records, so a group
    /// created again under that name starts from the first stored record, in any process
    /// (`reset_kafka_group_offsets`: a group join, blocks up to `admin_timeout`). Throws what it
    /// throws (`group_in_use` when members elsewhere hold partitions, `io_error`, `timed_out`).
    bool remove_group(const std::string& group) override
    {
        {
            const std::lock_guard lock(mutex_);
            groups_.erase(group);
        }
        return reset_kafka_group_offsets(kafka_group_reset_settings{.topic = settings_.topic,
                                                                    .partitions = settings_.partitions.size(),
                                                                    .group = group,
                                                                    .bootstrap_servers = settings_.bootstrap_servers,
                                                                    .properties = settings_.properties,
                                                                    .timeout = settings_.admin_timeout});
    }

    /// The consumer's member's latest client-level error since records last arrived (brokers
    /// unreachable, the topic deleted), or empty.
    std::string consumer_problem(const std::string& group, std::size_t consumer) const override
    {
        std::shared_ptr<kafka_member_binding<T>> binding;
        {
            const std::lock_guard lock(mutex_);
            if (const auto found = members_.find(key(group, consumer)); found != members_.end()) {
                binding = found->second;
            }
        }
        return binding ? binding->client_error() : std::string();
    }

private:
    static std::pair<std::string, std::size_t> key(const std::string& group, std::size_t consumer)
    {
        return {group, consumer};
    }

    const settings settings_;
    membership_port port_;  // set once by bind, before any consumer exists
    mutable std::mutex mutex_;
    std::map<std::pair<std::string, std::size_t>, std::shared_ptr<kafka_member_binding<T>>>
        members_;                   // guarded by mutex_: the open consumers' members
    std::set<std::string> groups_;  // guarded by mutex_: groups opened here and not removed
    bool closed_ = false;           // guarded by mutex_
};

}  // namespace bufferqueue::detail
