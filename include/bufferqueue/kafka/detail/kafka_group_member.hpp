// Internal: one member of a Kafka consumer group behind a non-template interface - the building
// block of pull consumers over Kafka topics (see docs/kafka.md).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace bufferqueue::detail {

/// What a group member tells its owner. Called on the member's executor (where its events are
/// served) or inside `kafka_group_member::close` (the revocation when it leaves the group); must not
/// throw or block, and must not call back into the member except `read`/`has_records`.
class kafka_group_listener {
public:
    kafka_group_listener(const kafka_group_listener&) = delete;
    kafka_group_listener& operator=(const kafka_group_listener&) = delete;
    virtual ~kafka_group_listener() = default;

    /// The group gave this member `partitions` (ascending); their records can be read from now on.
    virtual void assigned(std::span<const std::int32_t> partitions) noexcept = 0;
    /// The group took `partitions` away; nothing of them is read after this call returns.
    virtual void revoked(std::span<const std::int32_t> partitions) noexcept = 0;
    /// Records of `partition` are readable (told after each wake-up while the partition holds some).
    virtual void records_available(std::int32_t partition) noexcept = 0;
    /// A client-level error librdkafka reported on the consumer queue (`detail` names topic, group
    /// and reason), for example all brokers down; librdkafka keeps retrying the transient ones.
    /// Partition errors are thrown by `read` instead.
    virtual void failed(boost::system::error_code error, const std::string& detail) noexcept = 0;

protected:
    kafka_group_listener() = default;
};

/// One record read by a group member: its offset in the partition and a copy of its value.
struct kafka_record {
    std::int64_t offset = 0;
    std::vector<std::byte> value;
};

struct kafka_group_settings {
    std::string topic;
    std::string group;
    std::string bootstrap_servers;
    /// After bufferqueue's consumer defaults (`enable.auto.commit=false`,
    /// `enable.auto.offset.store=false`, `auto.offset.reset=error` with new partitions started at
    /// the earliest record), so they win.
    std::map<std::string, std::string> properties;
    /// Where the member's events (rebalances, errors, commit results, record arrivals) are served.
    boost::asio::any_io_executor executor;
};

/// A librdkafka consumer client subscribed to one topic as a member of `group`. Each assigned
/// partition gets its own queue (not forwarded to the consumer queue), so `read` takes one
/// partition's records without blocking; every queue signals one eventfd, which an Asio descriptor
/// waits on on the executor - no polling thread. Rebalances are applied there (`rd_kafka_assign`)
/// and reported to the listener.
///
/// Thread-safety: `read`, `has_records` and `commit` may be called from any thread, each partition
/// by one thread at a time; `close` from any thread, once or more. The listener must outlive the
/// member's `close`.
class kafka_group_member {
public:
    /// Creates the client and subscribes (the group join completes later, on the executor). Throws
    /// `bufferqueue::error` `errc::invalid_argument` for a property librdkafka refuses (naming it),
    /// `errc::io_error` when the client cannot be made.
    static std::shared_ptr<kafka_group_member> join(kafka_group_settings settings, kafka_group_listener& listener);

    virtual ~kafka_group_member() = default;

    /// Appends up to `max_records` records of assigned `partition` to `out`, without blocking;
    /// returns how many. 0 when nothing is readable or the partition is not assigned. An error the
    /// partition's queue held is thrown once, when no record precedes it: `bufferqueue::error`
    /// `errc::offset_out_of_range` when the group's committed offset names no record (nothing is
    /// reset: the partition then delivers nothing until it is assigned again), else the librdkafka
    /// error's code (`kafka_error_code`); each names topic, group, partition and offset. A partition
    /// without a committed offset starts at its earliest record (unless `properties` set
    /// `auto.offset.reset`, whose policy librdkafka then applies to both cases).
    /// Sets `assignment` to the assignment the records came from (see `assignment_of`).
    virtual std::size_t read(std::int32_t partition, std::size_t max_records, std::vector<kafka_record>& out,
                             std::uint64_t& assignment) = 0;

    /// Which assignment of `partition` the member holds now: a number no other assignment in the
    /// process had (each rebalance that gives the partition to a member makes a new one, and its
    /// client fetches from the group's committed offset again); 0 when the partition is not
    /// assigned. Never blocks.
    virtual std::uint64_t assignment_of(std::int32_t partition) const noexcept = 0;

    /// Whether `read(partition, ...)` would return something (or throw) now. Never blocks.
    virtual bool has_records(std::int32_t partition) const noexcept = 0;

    /// Commits `next_offset` (the offset after the last record processed) for `partition`;
    /// `done` runs on the executor once the broker answered (empty error: committed). Never blocks.
    virtual void commit(std::int32_t partition, std::int64_t next_offset,
                        std::function<void(boost::system::error_code)> done) = 0;

    /// Commits `next_offset` for `partition` and waits for the broker's answer (librdkafka's
    /// synchronous `rd_kafka_commit`, which waits on a queue of its own, not on the executor):
    /// blocks the calling thread for the round trip, so call it where blocking is allowed (the
    /// topic's I/O pool). Returns the broker's error (empty: committed).
    virtual boost::system::error_code commit_and_wait(std::int32_t partition, std::int64_t next_offset) = 0;

    /// Leaves the group (the listener hears the revocation first) and stops serving events. Blocks
    /// for the leave-group round trip (librdkafka's `rd_kafka_consumer_close`). Idempotent.
    virtual void close() noexcept = 0;

protected:
    kafka_group_member() = default;
};

}  // namespace bufferqueue::detail
