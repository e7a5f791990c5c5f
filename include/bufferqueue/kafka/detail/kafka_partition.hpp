// Internal: the storage partition of a Kafka topic - appends handed to the topic's producer client,
// acknowledged by its delivery reports; records a group member read, decoded and held until
// committed (see docs/kafka.md "Pull consumers").
#pragma once

#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/kafka/detail/kafka_group_member.hpp"
#include "bufferqueue/kafka/detail/kafka_partition_cursor.hpp"
#include "bufferqueue/kafka/detail/kafka_producer.hpp"
#include "bufferqueue/serialization/any_serializer.hpp"
#include "bufferqueue/storage/storage.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bufferqueue::detail {

/// One partition of a Kafka topic as the topic layer sees it (an `acknowledging_partition`).
/// Appends encode each item and hand the record for this partition to the topic's producer client
/// (shared by the partitions): `append_acknowledged`'s items are acknowledged by their delivery
/// reports, `append`'s failures go to the producer's error sink. Each group's `cursor` reads
/// through the group member that owns the partition now (set by that member's rebalance listener)
/// and keeps the records from the group's committed position on, decoded, until a commit passes
/// them: a batch pulled again without a commit is the same batch, as on memory topics.
/// A new owner (every assignment, also the same member's after an eager rebalance) starts from
/// what its client fetches, which is the group's committed offset, so uncommitted records are
/// delivered again (at-least-once). What the cursor holds is kept with the assignment it was read
/// from: a pull that reads records of an assignment made while it ran starts over with them
/// (nothing read is dropped), and a fetch that starts below what the same member committed (the
/// commit reached the brokers after the new assignment asked for the committed offset) skips the
/// records that commit passed instead of delivering them again.
///
/// Threads: as `storage_partition` says; in addition `set_owner` / `clear_owner` run on the
/// members' executor while the cursor's consumer pulls (the owner is guarded by a mutex of the
/// cursor, never held across a network call). `commit` blocks for the broker's answer, hence
/// `storage_traits<kafka_partition<T>>::blocking`.
template <class T>
class kafka_partition {
public:
    using cursor = kafka_partition_cursor<T>;

    /// `producer` (connected, shared by the topic's partitions) takes the appended records; the
    /// first partition to close closes it.
    kafka_partition(std::string topic, std::int32_t partition, any_serializer<T> serializer,
                    std::shared_ptr<kafka_producer> producer)
        : topic_(std::move(topic)), partition_(partition), serializer_(std::move(serializer)),
          producer_(std::move(producer))
    {
    }

    void bind_waker(partition_waker waker) noexcept { waker_ = waker; }
    /// Records arrived for some group's member (listener's `records_available`).
    void notify() const noexcept { waker_.notify(); }

    /// Hands the records to the producer without waiting (`try_produce`); a record the brokers do
    /// not acknowledge later is counted and told to the error sink. Throws as `append_acknowledged`.
    void append(const item_source<T>& source, std::size_t& handed) { hand_over(source, handed, nullptr); }

    /// Hands the records to the producer; each delivery report acknowledges one item to `listener`.
    /// Throws `bufferqueue::error` naming topic and partition, with `handed` the records taken:
    /// `errc::queue_full` when librdkafka's send queue is full (`queue.buffering.max.messages`),
    /// `errc::closed` after `close`, `errc::invalid_argument` for a record librdkafka refuses (too
    /// large), else librdkafka's refusal (`kafka_error_code`); what the serializer throws.
    void append_acknowledged(const item_source<T>& source, std::size_t& handed, append_listener& listener)
    {
        hand_over(source, handed, &listener);
    }

    cursor& open_cursor(std::string_view group)
    {
        const std::lock_guard lock(groups_mutex_);
        auto& slot = cursors_[std::string(group)];
        if (!slot) {
            slot = std::make_unique<cursor>();
        }
        return *slot;
    }

    /// The group's cursor, or null when no consumer of this process opened the group.
    cursor* find_cursor(std::string_view group)
    {
        const std::lock_guard lock(groups_mutex_);
        const auto found = cursors_.find(group);
        return found != cursors_.end() ? found->second.get() : nullptr;
    }

    bool has_group(std::string_view group) const
    {
        const std::lock_guard lock(groups_mutex_);
        return cursors_.find(group) != cursors_.end();
    }

    std::uint64_t remove_group(std::string_view group)
    {
        const std::lock_guard lock(groups_mutex_);
        if (const auto found = cursors_.find(group); found != cursors_.end()) {
            cursors_.erase(found);
        }
        return 0;
    }

    /// Decodes what the owner's client holds, up to `max_items` records from the committed position.
    /// Throws `errc::corrupt_data` naming the offset when a record does not decode, after the
    /// records before it were delivered: like a persistent topic's record, it stays where it is and
    /// fails every later pull of the group until a commit passes it (`skip()`, `unreadable`).
    pull_result<T> pull(cursor& reader, std::size_t max_items)
    {
        if (closed_.load(std::memory_order_acquire)) {
            return {};
        }
        std::uint64_t generation = 0;
        const std::shared_ptr<kafka_group_member> member = reader.owner(generation);
        if (generation != reader.seen_generation_) {  // a new owner fetches from the committed offset
            reader.seen_generation_ = generation;
            if (member == nullptr || member->assignment_of(partition_) != reader.read_assignment_) {
                forget_fetched(reader);
                reader.raw_.clear();
                reader.raw_next_ = 0;
            }
        }
        if (reader.committed_prefix_ != 0) {
            const auto passed = static_cast<std::ptrdiff_t>(reader.committed_prefix_);
            reader.items_.erase(reader.items_.begin(), reader.items_.begin() + passed);
            reader.offsets_.erase(reader.offsets_.begin(), reader.offsets_.begin() + passed);
            reader.committed_prefix_ = 0;
        }
        if (member != nullptr && reader.items_.size() < max_items) {
            while (reader.raw_next_ >= reader.raw_.size()) {  // until a record not committed yet
                reader.raw_.clear();
                reader.raw_next_ = 0;
                std::uint64_t assignment = 0;
                if (member->read(partition_, max_items - reader.items_.size(), reader.raw_, assignment) == 0) {
                    break;
                }
                if (assignment != reader.read_assignment_) {
                    forget_fetched(reader);  // a new fetch, from the committed offset: it has them again
                    reader.read_assignment_ = assignment;
                }
                skip_committed(reader, *member);
            }
            while (reader.raw_next_ < reader.raw_.size() && reader.items_.size() < max_items) {
                const kafka_record& record = reader.raw_[reader.raw_next_];
                if (!reader.items_.empty() && reader.undecodable_) {
                    break;  // deliver the records before it first
                }
                try {
                    reader.items_.push_back(serializer_.deserialize(record.value));
                } catch (...) {
                    if (!reader.items_.empty()) {
                        reader.undecodable_ = true;  // fails the next pull, once these are delivered
                        break;
                    }
                    reader.undecodable_ = true;
                    throw error(
                        errc::corrupt_data,
                        format_message("kafka topic '{}' partition {} offset {}: the record does not decode: {}",
                                       topic_, partition_, record.offset, exception_message()));
                }
                reader.undecodable_ = false;
                reader.offsets_.push_back(static_cast<std::uint64_t>(record.offset));
                ++reader.raw_next_;
            }
            if (!reader.offsets_.empty()) {  // a record read proves the end is past it
                raise(end_, reader.offsets_.back() + 1);
            }
        }
        const std::size_t count = std::min(max_items, reader.items_.size());
        if (count == 0) {
            return {};
        }
        return {std::span<const T>(reader.items_.data(), count), reader.offsets_[count - 1] + 1,
                std::span<const std::uint64_t>(reader.offsets_.data(), count)};
    }

    /// Commits `next_offset` through the owner and waits for the broker (blocks; runs on the I/O
    /// pool). Throws `errc::partition_revoked` when no member of this process owns the partition
    /// for the group now, else the broker's error naming topic, partition and offset.
    std::uint64_t commit(cursor& reader, std::uint64_t next_offset)
    {
        std::uint64_t generation = 0;
        const std::shared_ptr<kafka_group_member> member = reader.owner(generation);
        if (member == nullptr || member->assignment_of(partition_) != reader.read_assignment_) {
            throw error(errc::partition_revoked,
                        format_message("kafka topic '{}' partition {}: the group gave the partition to another member",
                                       topic_, partition_));
        }
        const boost::system::error_code result =
            member->commit_and_wait(partition_, static_cast<std::int64_t>(next_offset));
        if (result) {
            throw error(static_cast<errc>(result.value()),
                        format_message("kafka topic '{}' partition {}: commit of offset {} failed: {}", topic_,
                                       partition_, next_offset, result.message()));
        }
        raise(reader.committed_, next_offset);
        if (reader.floor_member_.lock() != member) {
            reader.floor_member_ = member;
            reader.floor_ = 0;
        }
        reader.floor_ = std::max(reader.floor_, next_offset);
        const auto passed = std::lower_bound(reader.offsets_.begin(), reader.offsets_.end(), next_offset);
        reader.committed_prefix_ = static_cast<std::size_t>(passed - reader.offsets_.begin());
        if (reader.undecodable_ && reader.raw_next_ < reader.raw_.size() &&
            static_cast<std::uint64_t>(reader.raw_[reader.raw_next_].offset) < next_offset) {
            ++reader.raw_next_;  // `skip()` stepped past the record that does not decode
            reader.undecodable_ = false;
        }
        return 0;  // nothing was admitted through append: no capacity to give back
    }

    /// The record the cursor's pulls stop at because it does not decode (see `skipping_partition`):
    /// its offset, the next one, and its bytes (valid until the next pull).
    std::optional<unreadable_record> unreadable(const cursor& reader) const noexcept
    {
        if (!reader.undecodable_ || reader.raw_next_ >= reader.raw_.size() ||
            reader.items_.size() > reader.committed_prefix_) {
            return std::nullopt;
        }
        const kafka_record& record = reader.raw_[reader.raw_next_];
        const auto offset = static_cast<std::uint64_t>(record.offset);
        return unreadable_record{offset, offset + 1, std::span<const std::byte>(record.value)};
    }

    void release_batch(cursor&) noexcept {}

    bool has_data(const cursor& reader) const noexcept
    {
        if (reader.items_.size() > reader.committed_prefix_ || reader.raw_next_ < reader.raw_.size()) {
            return true;
        }
        try {
            std::uint64_t generation = 0;
            const std::shared_ptr<kafka_group_member> member = reader.owner(generation);
            return member != nullptr && member->has_records(partition_);
        } catch (...) {
            return false;
        }
    }

    /// Stops pulls and closes the producer: records not acknowledged yet are purged, their
    /// listeners hear `errc::closed`.
    void close() noexcept
    {
        closed_.store(true, std::memory_order_release);
        producer_->close();
    }

    // Statistics (docs/kafka.md "Statistics"): the last numbers known in this process, never a
    // broker round trip (these are called on consumers' paths: `pull_consumer::lag`). The topic's
    // `stats()` asks the brokers and records their answer here first; records read and this
    // process's commits move them on in between.
    std::uint64_t end_items() const noexcept { return end_.load(std::memory_order_acquire); }
    std::uint64_t earliest_items() const noexcept { return earliest_.load(std::memory_order_acquire); }
    std::uint64_t committed_items(const cursor& reader) const noexcept
    {
        return std::max(reader.committed_.load(std::memory_order_acquire), earliest_items());
    }

    /// The brokers' earliest and end offsets of the partition (ListOffsets, by the topic's `stats()`).
    void record_offsets(std::int64_t earliest, std::int64_t end) noexcept
    {
        earliest_.store(static_cast<std::uint64_t>(std::max<std::int64_t>(earliest, 0)), std::memory_order_release);
        end_.store(static_cast<std::uint64_t>(std::max<std::int64_t>(end, 0)), std::memory_order_release);
    }

    /// The group's committed offset as the brokers reported it (OffsetFetch); -1 (none) is ignored.
    /// A position never goes back here: a commit of this process may have passed the answer.
    static void record_committed(cursor& reader, std::int64_t committed) noexcept
    {
        if (committed > 0) {
            raise(reader.committed_, static_cast<std::uint64_t>(committed));
        }
    }

private:
    void hand_over(const item_source<T>& source, std::size_t& handed, append_listener* listener)
    {
        std::vector<std::byte> payload;
        kafka_producer::refusal why;
        for (; handed < source.count; ++handed) {
            payload.clear();
            serializer_.serialize(source[handed], payload);  // throws what the serializer throws
            switch (producer_->produce(static_cast<std::uint32_t>(partition_), payload, listener, why)) {
            case kafka_producer::enqueue_result::queued: break;
            case kafka_producer::enqueue_result::queue_full:
                throw error(errc::queue_full,
                            format_message("kafka topic '{}' partition {}: librdkafka's send queue is full", topic_,
                                           partition_));
            case kafka_producer::enqueue_result::closed:
                throw error(errc::closed, format_message("kafka topic '{}' partition {}: closed", topic_, partition_));
            case kafka_producer::enqueue_result::failed: throw error(static_cast<errc>(why.error.value()), why.detail);
            }
        }
    }

    // Drops what the cursor decoded from an earlier fetch (raw_ is the caller's).
    static void forget_fetched(cursor& reader) noexcept
    {
        reader.items_.clear();
        reader.offsets_.clear();
        reader.undecodable_ = false;
        reader.committed_prefix_ = 0;
    }

    // Drops the records just read (raw_) that `member` committed past already: its new assignment
    // fetched the group's committed offset before that commit had reached the brokers.
    static void skip_committed(cursor& reader, const kafka_group_member& member) noexcept
    {
        const auto below_floor = [&](const kafka_record& record) {
            return static_cast<std::uint64_t>(record.offset) < reader.floor_;
        };
        if (reader.raw_.empty() || !below_floor(reader.raw_.front()) || reader.floor_member_.lock().get() != &member) {
            return;
        }
        const auto kept = std::find_if_not(reader.raw_.begin(), reader.raw_.end(), below_floor);
        reader.raw_next_ = static_cast<std::size_t>(kept - reader.raw_.begin());
    }

    static void raise(std::atomic<std::uint64_t>& value, std::uint64_t to) noexcept
    {
        std::uint64_t seen = value.load(std::memory_order_relaxed);
        while (seen < to && !value.compare_exchange_weak(seen, to, std::memory_order_acq_rel)) {
        }
    }

    const std::string topic_;
    const std::int32_t partition_;
    const any_serializer<T> serializer_;
    const std::shared_ptr<kafka_producer> producer_;  // shared by the topic's partitions
    partition_waker waker_;                           // set once, before any consumer exists
    std::atomic<bool> closed_{false};
    std::atomic<std::uint64_t> end_{0};       // last known end offset (brokers, or records read)
    std::atomic<std::uint64_t> earliest_{0};  // last known earliest offset (brokers)
    mutable std::mutex groups_mutex_;
    std::map<std::string, std::unique_ptr<cursor>, std::less<>> cursors_;  // guarded by groups_mutex_
};

}  // namespace bufferqueue::detail

namespace bufferqueue {

/// Kafka partitions commit with a broker round trip: the consumers' operations run on a pool of
/// the topic's own (an outage of its cluster never holds the threads of the queue's persistent
/// topics); appends only hand records to librdkafka, so produces run inline.
template <class T>
struct storage_traits<detail::kafka_partition<T>> {
    static constexpr bool blocking = true;
    static constexpr bool blocking_appends = false;
    static constexpr std::size_t own_pool_threads = 2;
    static constexpr std::string_view backend_name = "kafka";
};

}  // namespace bufferqueue
