// Internal: the typed Kafka topic - our routing, produce through librdkafka, completion on the
// broker's acknowledgement; pull consumers as Kafka group members over an inner topic (docs/kafka.md).
#pragma once

#include "bufferqueue/detail/type_name.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/serialization/any_serializer.hpp"
#include "bufferqueue/storage/kafka/detail/kafka_consumer.hpp"
#include "bufferqueue/storage/kafka/detail/kafka_delivery.hpp"
#include "bufferqueue/storage/kafka/detail/kafka_offsets.hpp"
#include "bufferqueue/storage/kafka/detail/kafka_producer.hpp"
#include "bufferqueue/topic/detail/topic.hpp"

#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <span>
#include <string>
#include <typeindex>
#include <vector>

namespace bufferqueue::detail {

/// A topic of `T` stored in a Kafka topic of the same name. Routing is ours: the producer handle
/// computes key partitions exactly as for memory and mmap topics (`partition_for_key`), round-robin
/// advances once per item; every record is produced to that explicit partition. `try_produce` hands
/// records to librdkafka and returns (`produce_now` without waiting); an awaited produce hands them
/// over in `produce_waiting` and completes on the last delivery report.
///
/// Consumers belong to an inner `basic_topic<T, kafka_partition<T>>`, so the shared consumer logic
/// (ring scan, commit bookkeeping, `partition_revoked`, hand-over) is the one of every backend.
/// Each bufferqueue consumer is one Kafka group member (`kafka_group_binding`): it starts with no
/// partitions, and its member's rebalances assign and revoke them. Thread-safe.
template <class T>
class kafka_topic final : public topic<T> {
public:
    using inner_topic = basic_topic<T, kafka_partition<T>>;

    struct settings {
        std::string name;
        std::uint32_t partitions = 1;
        key_selector<T> partition_key;
        any_serializer<T> serializer;
        boost::asio::any_io_executor executor;
        std::shared_ptr<kafka_producer> producer;  // connected, metadata checked
        std::shared_ptr<inner_topic> consumers;    // the inner topic of the consumers
        std::string bootstrap_servers;             // for the consumers' clients
        std::map<std::string, std::string> properties;
        std::chrono::milliseconds admin_timeout{10000};  // stats() and remove_group's broker round trips
    };

    explicit kafka_topic(settings configuration)
        : name_(std::move(configuration.name)), type_name_(readable_type_name<T>()),
          partitions_(configuration.partitions), partition_key_(std::move(configuration.partition_key)),
          serializer_(std::move(configuration.serializer)), executor_(std::move(configuration.executor)),
          producer_(std::move(configuration.producer)), inner_(std::move(configuration.consumers)),
          bootstrap_servers_(std::move(configuration.bootstrap_servers)),
          properties_(std::move(configuration.properties)), admin_timeout_(configuration.admin_timeout)
    {
    }

    ~kafka_topic() override { close(); }

    const std::string& name() const noexcept override { return name_; }
    std::type_index item_type() const noexcept override { return typeid(T); }
    const std::string& item_type_name() const noexcept override { return type_name_; }
    std::uint32_t partition_count() const noexcept override { return partitions_; }
    const key_selector<T>& partition_key() const noexcept override { return partition_key_; }
    const boost::asio::any_io_executor& executor() const noexcept override { return executor_; }
    // librdkafka never blocks the caller of produce: the handles call in inline.
    const storage_runner& runner() const noexcept override { return runner_; }

    /// Purges the records not acknowledged yet: awaited produces complete with `errc::closed`,
    /// unawaited ones are reported to the error sink. Closes the consumers, and their Kafka group
    /// members leave their groups (asynchronously, on the executor; never blocks), so the members'
    /// waits end and `io_context::run()` can return. Idempotent.
    void close() noexcept override
    {
        if (!closed_.exchange(true, std::memory_order_acq_rel)) {
            inner_->close();
            producer_->close();
            // The members leave their groups (asynchronously), so their waits end.
            std::vector<std::weak_ptr<kafka_group_binding<T>>> bindings;
            {
                const std::lock_guard lock(bindings_mutex_);
                bindings.swap(bindings_);
            }
            for (const auto& each : bindings) {
                if (const auto binding = each.lock()) {
                    binding->close();
                }
            }
        }
    }

    // `movable` changes nothing here: every record is encoded from the item.
    produce_outcome produce_now(std::span<const T> items, const std::uint32_t* partitions, bool allow_wait,
                                bool /*movable*/) override
    {
        if (closed_.load(std::memory_order_acquire)) {
            return produce_outcome::closed;
        }
        if (items.empty()) {
            return produce_outcome::done;
        }
        if (allow_wait) {
            return produce_outcome::must_wait;  // an awaited produce: produce_waiting hands the records over
        }
        std::vector<std::byte> payload;
        kafka_producer::refusal why;
        const std::uint32_t first = next_round_robin(partitions, items.size());
        for (std::size_t index = 0; index < items.size(); ++index) {
            const std::uint32_t partition = partition_of(partitions, first, index);
            encode(items[index], payload);
            switch (producer_->produce(partition, payload, producer_->unawaited_listener(), why)) {
            case kafka_producer::enqueue_result::queued: break;
            case kafka_producer::enqueue_result::queue_full: return produce_outcome::no_room;
            case kafka_producer::enqueue_result::closed: return produce_outcome::closed;
            case kafka_producer::enqueue_result::failed: throw error(static_cast<errc>(why.error.value()), why.detail);
            }
        }
        return produce_outcome::done;
    }

    void produce_waiting(std::unique_ptr<produce_operation<T>> operation) override
    {
        const std::span<const T> items = operation->items();
        const std::uint32_t* partitions = operation->partitions();
        auto* call = new kafka_produce_call<T>(std::move(operation));  // deletes itself on completion
        std::vector<std::byte> payload;
        kafka_producer::refusal why;
        const std::uint32_t first = next_round_robin(partitions, items.size());
        for (std::size_t index = 0; index < items.size(); ++index) {
            const std::uint32_t partition = partition_of(partitions, first, index);
            call->add_record();
            try {
                encode(items[index], payload);
            } catch (...) {
                call->record_refused(current_exception_code(errc::invalid_argument));
                break;
            }
            const auto result = producer_->produce(partition, payload, *call, why);
            if (result != kafka_producer::enqueue_result::queued) {
                call->record_refused(result == kafka_producer::enqueue_result::failed
                                         ? why.error
                                         : make_error_code(refusal_code(result)));
                break;  // the first error is the call's; later records are not handed over
            }
        }
        call->finish_enqueueing();
    }

    /// Creates `count` members of Kafka consumer group `options.group` (one librdkafka consumer
    /// client each, on the topic's executor). They start with no partitions; the group's rebalances
    /// assign them, seconds later. Throws what the inner topic throws (`group_exists`,
    /// `too_many_consumers`, `closed`) and what `kafka_group_member::join` throws.
    std::vector<std::shared_ptr<consumer_base<T>>> create_consumers(const pull_consumer_options& options,
                                                                    std::size_t count) override
    {
        std::vector<std::shared_ptr<consumer_base<T>>> made = inner_->create_consumers(options, count);
        std::vector<std::shared_ptr<consumer_base<T>>> members;
        try {
            std::vector<std::size_t> every(partitions_);
            std::iota(every.begin(), every.end(), std::size_t{0});
            for (std::size_t index = 0; index < made.size(); ++index) {
                inner_->revoke_partitions(options.group, index, every);  // the group protocol decides
            }
            for (std::size_t index = 0; index < made.size(); ++index) {
                auto binding = std::make_shared<kafka_group_binding<T>>(inner_, options.group, index);
                binding->join(kafka_group_settings{.topic = name_,
                                                   .group = options.group,
                                                   .bootstrap_servers = bootstrap_servers_,
                                                   .properties = properties_,
                                                   .executor = executor_});
                remember(binding);
                members.push_back(std::make_shared<kafka_consumer<T>>(made[index], std::move(binding)));
            }
        } catch (...) {
            for (const auto& each : made) {
                each->close();
            }
            throw;
        }
        return members;
    }

    /// The snapshot with the brokers' numbers: every partition's earliest and end offsets and the
    /// committed offsets of the groups this process opened, asked for within `admin_timeout`
    /// (blocks the calling thread that long at most). On a thread running the topic's io_context,
    /// or when the brokers do not answer in time, it blocks for nothing and reports the last
    /// numbers known in this process instead (the previous snapshot's, moved on by the records read
    /// and the commits made since). See docs/kafka.md, "Statistics".
    topic_stats stats() override
    {
        topic_stats snapshot = inner_->stats();
        if (on_topic_io_context_thread()) {
            return snapshot;
        }
        std::vector<std::string> groups;
        for (const group_stats& group : snapshot.groups) {
            groups.push_back(group.name);
        }
        kafka_topic_offsets offsets;
        try {
            offsets = producer_->read_offsets(groups, admin_timeout_);
        } catch (...) {
            return snapshot;  // the last numbers known; a scrape must not fail (buffer_queue::stats)
        }
        for (std::size_t partition = 0; partition < partitions_; ++partition) {
            auto& storage = inner_->slot(partition).storage;
            storage.record_offsets(offsets.earliest[partition], offsets.end[partition]);
            for (const auto& [group, committed] : offsets.committed) {
                if (auto* cursor = storage.find_cursor(group); cursor != nullptr) {
                    kafka_partition<T>::record_committed(*cursor, committed[partition]);
                }
            }
        }
        return inner_->stats();
    }

    bool has_group(const std::string& group) override { return inner_->has_group(group); }

    /// Forgets the group in this queue (throws `errc::group_in_use` while a consumer of it is open
    /// here) and moves its committed offsets on the brokers back to the earliest records, so a group
    /// created again under that name starts from the first stored record, in any process
    /// (`reset_kafka_group_offsets`: a group join, blocks up to `admin_timeout`). Returns whether
    /// either held something. Throws what `reset_kafka_group_offsets` throws (`group_in_use` when
    /// members elsewhere hold partitions, `io_error` / `timed_out`), each naming topic and group;
    /// the group is forgotten here then, so calling again retries the brokers.
    bool remove_group(const std::string& group) override
    {
        const bool here = inner_->remove_group(group);
        const bool on_brokers =
            reset_kafka_group_offsets(kafka_group_reset_settings{.topic = name_,
                                                                 .partitions = partitions_,
                                                                 .group = group,
                                                                 .bootstrap_servers = bootstrap_servers_,
                                                                 .properties = properties_,
                                                                 .timeout = admin_timeout_});
        return here || on_brokers;
    }

    /// The group's rebalances call these already; a caller's own calls are overridden by the next one.
    void assign_partitions(const std::string& group, std::size_t consumer,
                           std::span<const std::size_t> partitions) override
    {
        inner_->assign_partitions(group, consumer, partitions);
    }

    void revoke_partitions(const std::string& group, std::size_t consumer,
                           std::span<const std::size_t> partitions) override
    {
        inner_->revoke_partitions(group, consumer, partitions);
    }

    /// The producer client (tests: in-flight records, unawaited failures).
    const kafka_producer& producer() const noexcept { return *producer_; }

private:
    // Keeps the member for close (which must reach it), forgetting those of closed consumers.
    void remember(const std::shared_ptr<kafka_group_binding<T>>& binding)
    {
        const std::lock_guard lock(bindings_mutex_);
        std::erase_if(bindings_, [](const auto& each) { return each.expired(); });
        bindings_.push_back(binding);
        if (closed_.load(std::memory_order_acquire)) {  // closed meanwhile: close did not see it
            binding->close();
        }
    }

    static errc refusal_code(kafka_producer::enqueue_result result) noexcept
    {
        switch (result) {
        case kafka_producer::enqueue_result::queue_full: return errc::queue_full;
        case kafka_producer::enqueue_result::closed: return errc::closed;
        case kafka_producer::enqueue_result::queued:
        case kafka_producer::enqueue_result::failed: break;
        }
        return errc::io_error;  // not reached: `failed` carries its own code
    }

    // Round-robin: one position per topic, advanced by the call's item count at once.
    std::uint32_t next_round_robin(const std::uint32_t* partitions, std::size_t count) noexcept
    {
        if (partitions != nullptr) {
            return 0;
        }
        return static_cast<std::uint32_t>(round_robin_.fetch_add(count, std::memory_order_relaxed) % partitions_);
    }

    std::uint32_t partition_of(const std::uint32_t* partitions, std::uint32_t first, std::size_t index) const noexcept
    {
        return partitions != nullptr ? partitions[index] : static_cast<std::uint32_t>((first + index) % partitions_);
    }

    // Whether this thread runs the io_context of the topic's executor, where a broker round trip
    // would stall every handler (docs/kafka.md, "Statistics").
    bool on_topic_io_context_thread() const noexcept
    {
        const auto* io = executor_.target<boost::asio::io_context::executor_type>();
        return io != nullptr && io->running_in_this_thread();
    }

    void encode(const T& item, std::vector<std::byte>& payload) const
    {
        payload.clear();
        serializer_.serialize(item, payload);
    }

    const std::string name_;
    const std::string type_name_;
    const std::uint32_t partitions_;
    const key_selector<T> partition_key_;
    const any_serializer<T> serializer_;
    const boost::asio::any_io_executor executor_;
    const std::shared_ptr<kafka_producer> producer_;
    const std::shared_ptr<inner_topic> inner_;
    const std::string bootstrap_servers_;
    const std::map<std::string, std::string> properties_;
    const std::chrono::milliseconds admin_timeout_;
    const storage_runner runner_{};  // never blocks
    std::atomic<std::size_t> round_robin_{0};
    std::atomic<bool> closed_{false};
    std::mutex bindings_mutex_;
    std::vector<std::weak_ptr<kafka_group_binding<T>>> bindings_;  // guarded by bindings_mutex_
};

}  // namespace bufferqueue::detail
