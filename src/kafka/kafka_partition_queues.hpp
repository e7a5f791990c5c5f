// Internal to src/kafka: the per-partition queues of a group member - its assigned
// partitions' records, read without blocking, and the errors they held, kept for the next read.
#pragma once

#include "bufferqueue/kafka/detail/kafka_group_member.hpp"

#include <boost/system/error_code.hpp>

#include <librdkafka/rdkafka.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace bufferqueue::detail {

/// The queues of one member's assigned partitions, split off the consumer queue so each is read on
/// its own. An error a queue holds is kept for the consume that reads the partition next (thrown
/// once; an offset out of range once per assignment); "no committed offset" is not an error when
/// `start_new_at_earliest`: the partition is listed for `take_restarts` instead. Thread-safe (one mutex, never held
/// across a call that waits).
class kafka_partition_queues {
public:
    kafka_partition_queues(std::string topic, std::string group) : topic_(std::move(topic)), group_(std::move(group)) {}
    kafka_partition_queues(const kafka_partition_queues&) = delete;
    kafka_partition_queues& operator=(const kafka_partition_queues&) = delete;
    ~kafka_partition_queues() { remove_all(); }

    /// Whether a partition without a committed offset starts at its earliest record (set once,
    /// before the client starts).
    void start_new_at_earliest(bool enabled) noexcept { start_new_at_earliest_ = enabled; }

    /// The partition was assigned: its queue reads on its own and signals `event_fd`.
    void add(rd_kafka_t* client, std::int32_t partition, int event_fd);
    /// The partition was revoked: nothing more is read of it.
    void remove(std::int32_t partition);
    /// Every partition is dropped (close); returns which were held.
    std::vector<std::int32_t> remove_all();

    /// `kafka_group_member::read`: appends up to `max_records` records, or throws the error the
    /// queue held (naming topic, group, partition and offset) when no record precedes it. Returns
    /// how many were appended, sets `assignment` to the partition's (`assignment_of`) and `restart`
    /// when the partition needs `take_restarts`.
    std::size_t read(std::int32_t partition, std::size_t max_records, std::vector<kafka_record>& out,
                     std::uint64_t& assignment, bool& restart);
    /// `kafka_group_member::assignment_of`: the number `add` gave the partition's queue, 0 when none.
    std::uint64_t assignment_of(std::int32_t partition) const noexcept;
    /// Whether `read` would return something or throw now. Never blocks.
    bool has_records(std::int32_t partition) const noexcept;
    /// The partitions whose queue holds something now.
    std::vector<std::int32_t> readable() const;
    /// The partitions that had no committed offset since the last call (to start at the earliest).
    std::set<std::int32_t> take_restarts();

private:
    struct failure {
        boost::system::error_code code;
        std::string detail;
    };

    void remember_failure(std::int32_t partition, const rd_kafka_message_t* message);  // mutex_ held
    void throw_pending_failure(std::int32_t partition, std::unique_lock<std::mutex>& lock);

    const std::string topic_;
    const std::string group_;
    bool start_new_at_earliest_ = true;  // set before the first event
    mutable std::mutex mutex_;
    struct assigned_queue {
        rd_kafka_queue_t* queue = nullptr;
        std::uint64_t assignment = 0;  // unique in the process (one counter for every member)
    };

    std::map<std::int32_t, assigned_queue> queues_;  // guarded by mutex_: assigned partitions
    std::map<std::int32_t, failure> failures_;       // guarded by mutex_: for the next read
    std::set<std::int32_t> restarts_;                // guarded by mutex_: to start at the earliest
    std::set<std::int32_t> out_of_range_;            // guarded by mutex_: reported since assigned
};

}  // namespace bufferqueue::detail
