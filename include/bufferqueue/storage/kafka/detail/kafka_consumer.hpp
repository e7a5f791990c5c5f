// Internal: a pull consumer of a Kafka topic - the shared consumer of the inner topic plus the
// Kafka group member whose rebalances assign and revoke its partitions (docs/kafka.md).
#pragma once

#include "bufferqueue/storage/kafka/detail/kafka_group_member.hpp"
#include "bufferqueue/storage/kafka/detail/kafka_partition.hpp"
#include "bufferqueue/topic/detail/basic_topic.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace bufferqueue::detail {

/// Connects one Kafka group member to consumer `index` of `group` in the inner topic: assigned
/// partitions are given to that consumer (and their cursors read through this member), revoked
/// ones are taken away, record arrivals wake the partition's waiting consumers. The listener runs
/// on the member's executor or inside its close; it never throws (an assignment to a consumer
/// closed meanwhile is dropped).
template <class T>
class kafka_group_binding final : public kafka_group_listener {
public:
    using inner_topic = basic_topic<T, kafka_partition<T>>;

    kafka_group_binding(std::shared_ptr<inner_topic> topic, std::string group, std::size_t index)
        : topic_(std::move(topic)), group_(std::move(group)), index_(index)
    {
    }

    ~kafka_group_binding() override { close(); }

    /// Joins the group (the member's events are served on the topic's executor). Throws what
    /// `kafka_group_member::join` throws.
    void join(kafka_group_settings settings)
    {
        // Held while joining, so an event served at once (on another executor thread) sees the member.
        const std::lock_guard lock(member_mutex_);
        member_ = kafka_group_member::join(std::move(settings), *this);
    }

    /// Leaves the group: the revocation reaches the inner topic first, then the leave proceeds on
    /// the executor (never blocks). Idempotent; any thread.
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
            topic_->assign_partitions(group_, index_, numbers);
            for (const std::size_t partition : numbers) {
                topic_->slot(partition).storage.notify();  // records may be there already
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
            topic_->revoke_partitions(group_, index_, numbers);
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
        if (partition >= 0 && static_cast<std::uint32_t>(partition) < topic_->partition_count()) {
            topic_->slot(static_cast<std::size_t>(partition)).storage.notify();
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
        if (partition < 0 || static_cast<std::uint32_t>(partition) >= topic_->partition_count()) {
            return nullptr;
        }
        try {
            return topic_->slot(static_cast<std::size_t>(partition)).storage.find_cursor(group_);
        } catch (...) {
            return nullptr;
        }
    }

    const std::shared_ptr<inner_topic> topic_;
    const std::string group_;
    const std::size_t index_;
    mutable std::mutex member_mutex_;
    std::shared_ptr<kafka_group_member> member_;  // guarded by member_mutex_; set once by join
    mutable std::mutex client_error_mutex_;
    std::string client_error_;                   // guarded by client_error_mutex_
    std::atomic<bool> has_client_error_{false};  // client_error_ is not empty (checked without the lock)
};

/// The consumer handed to the `pull_consumer` handle: the inner topic's shared consumer, whose
/// partitions its Kafka group member's rebalances decide. `close` also leaves the group. Every
/// member forwards; thread-safety as the shared consumer's.
template <class T>
class kafka_consumer final : public consumer_base<T> {
public:
    kafka_consumer(std::shared_ptr<consumer_base<T>> inner, std::shared_ptr<kafka_group_binding<T>> binding)
        : inner_(std::move(inner)), binding_(std::move(binding))
    {
    }

    ~kafka_consumer() override { close(); }

    consume_attempt<T> begin_consume(bool will_wait) override { return inner_->begin_consume(will_wait); }
    void wait(std::unique_ptr<pending_completion<boost::system::error_code, batch<T>>> completion) override
    {
        inner_->wait(std::move(completion));
    }
    boost::system::error_code commit() override { return inner_->commit(); }
    boost::system::error_code skip(skipped_record& skipped) override { return inner_->skip(skipped); }
    boost::system::error_code unreadable(skipped_record& record) override { return inner_->unreadable(record); }
    /// Closes the consumer, then leaves the Kafka group (asynchronously: never blocks).
    void close() noexcept override
    {
        inner_->close();
        binding_->close();
    }
    void cancel() noexcept override { inner_->cancel(); }
    const std::string& topic_name() const noexcept override { return inner_->topic_name(); }
    const std::string& group_name() const noexcept override { return inner_->group_name(); }
    std::vector<std::size_t> partitions() const override { return inner_->partitions(); }
    std::uint64_t lag() const override { return inner_->lag(); }
    /// The latest operation's failure, else the member's latest client-level error (for example
    /// brokers unreachable while a consume waits), else empty.
    std::string last_error() const override
    {
        std::string text = inner_->last_error();
        return text.empty() ? binding_->client_error() : text;
    }
    const boost::asio::any_io_executor& default_executor() const noexcept override
    {
        return inner_->default_executor();
    }
    const storage_runner& runner() const noexcept override { return inner_->runner(); }

private:
    const std::shared_ptr<consumer_base<T>> inner_;
    const std::shared_ptr<kafka_group_binding<T>> binding_;
};

}  // namespace bufferqueue::detail
