// The per-partition queues of a Kafka group member and the errors they held.
#include "kafka_partition_queues.hpp"

#include "bufferqueue/error.hpp"
#include "bufferqueue/kafka/detail/kafka_producer.hpp"

#include "bufferqueue/detail/message.hpp"

#include <atomic>

namespace bufferqueue::detail {

namespace {

/// The next assignment's number: one counter for every member of the process, so a cursor that
/// held records of one member's assignment never takes another member's for the same.
std::atomic<std::uint64_t> assignments_made{0};

}  // namespace

void kafka_partition_queues::add(rd_kafka_t* client, std::int32_t partition, int event_fd)
{
    static constexpr char wake_bytes[8] = {1, 0, 0, 0, 0, 0, 0, 0};  // eventfd takes 8-byte writes
    const std::lock_guard lock(mutex_);
    if (queues_.find(partition) != queues_.end()) {
        return;
    }
    rd_kafka_queue_t* queue = rd_kafka_queue_get_partition(client, topic_.c_str(), partition);
    rd_kafka_queue_forward(queue, nullptr);  // read per partition, not from the consumer queue
    rd_kafka_queue_io_event_enable(queue, event_fd, wake_bytes, sizeof wake_bytes);
    queues_.emplace(partition, assigned_queue{queue, assignments_made.fetch_add(1, std::memory_order_relaxed) + 1});
    failures_.erase(partition);
    restarts_.erase(partition);
    out_of_range_.erase(partition);
}

void kafka_partition_queues::remove(std::int32_t partition)
{
    const std::lock_guard lock(mutex_);
    if (const auto found = queues_.find(partition); found != queues_.end()) {
        rd_kafka_queue_destroy(found->second.queue);
        queues_.erase(found);
    }
    failures_.erase(partition);
    restarts_.erase(partition);
    out_of_range_.erase(partition);
}

std::vector<std::int32_t> kafka_partition_queues::remove_all()
{
    const std::lock_guard lock(mutex_);
    std::vector<std::int32_t> held;
    for (auto& [partition, assigned] : queues_) {
        held.push_back(partition);
        rd_kafka_queue_destroy(assigned.queue);
    }
    queues_.clear();
    failures_.clear();
    restarts_.clear();
    out_of_range_.clear();
    return held;
}

std::size_t kafka_partition_queues::read(std::int32_t partition, std::size_t max_records,
                                         std::vector<kafka_record>& out, std::uint64_t& assignment, bool& restart)
{
    std::unique_lock lock(mutex_);
    const auto found = queues_.find(partition);
    if (found == queues_.end() || max_records == 0) {
        return 0;
    }
    assignment = found->second.assignment;
    throw_pending_failure(partition, lock);
    std::vector<rd_kafka_message_t*> messages(max_records);
    const ssize_t count = rd_kafka_consume_batch_queue(found->second.queue, 0, messages.data(), max_records);
    std::size_t delivered = 0;
    for (ssize_t index = 0; index < count; ++index) {
        rd_kafka_message_t* message = messages[static_cast<std::size_t>(index)];
        if (message->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            const auto* first = static_cast<const std::byte*>(message->payload);
            out.push_back(
                kafka_record{.offset = message->offset, .value = std::vector<std::byte>(first, first + message->len)});
            ++delivered;
        } else if (message->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET && message->offset < 0 &&
                   start_new_at_earliest_) {
            restarts_.insert(partition);  // no committed offset: a new group starts at the earliest record
            restart = true;
        } else if (message->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            remember_failure(partition, message);
        }
        rd_kafka_message_destroy(message);
    }
    if (delivered == 0) {
        throw_pending_failure(partition, lock);
    }
    return delivered;
}

bool kafka_partition_queues::has_records(std::int32_t partition) const noexcept
{
    const std::lock_guard lock(mutex_);
    const auto found = queues_.find(partition);
    return found != queues_.end() &&
           (rd_kafka_queue_length(found->second.queue) > 0 || failures_.find(partition) != failures_.end());
}

std::uint64_t kafka_partition_queues::assignment_of(std::int32_t partition) const noexcept
{
    const std::lock_guard lock(mutex_);
    const auto found = queues_.find(partition);
    return found != queues_.end() ? found->second.assignment : 0;
}

std::vector<std::int32_t> kafka_partition_queues::readable() const
{
    const std::lock_guard lock(mutex_);
    std::vector<std::int32_t> partitions;
    for (const auto& [partition, assigned] : queues_) {
        if (rd_kafka_queue_length(assigned.queue) > 0) {
            partitions.push_back(partition);
        }
    }
    return partitions;
}

std::set<std::int32_t> kafka_partition_queues::take_restarts()
{
    const std::lock_guard lock(mutex_);
    std::set<std::int32_t> taken;
    taken.swap(restarts_);
    return taken;
}

// Keeps the first error a partition's queue held, for the consume that reads the partition next.
void kafka_partition_queues::remember_failure(std::int32_t partition, const rd_kafka_message_t* message)
{
    if (failures_.find(partition) != failures_.end()) {
        return;
    }
    const std::string where =
        detail::format_message("kafka topic '{}' group '{}' partition {}", topic_, group_, partition);
    if (message->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET) {
        if (!out_of_range_.insert(partition).second) {
            return;  // reported in this assignment already (restart_at_earliest assigns it again)
        }
        const std::string offset = message->offset >= 0
                                       ? detail::format_message("the group's committed offset {}", message->offset)
                                       : std::string("the group's start position (no committed offset)");
        failures_.emplace(partition, failure{make_error_code(errc::offset_out_of_range),
                                             detail::format_message(
                                                 "{}: {} is out of range (no record there any more, or never); nothing "
                                                 "was reset: the partition delivers nothing until it is assigned again "
                                                 "with another committed offset ({})",
                                                 where, offset, rd_kafka_message_errstr(message))});
        return;
    }
    failures_.emplace(partition, failure{kafka_error_code(message->err),
                                         detail::format_message("{} offset {}: {}", where, message->offset,
                                                                rd_kafka_message_errstr(message))});
}

// Throws the partition's remembered error (once); `lock` holds mutex_.
void kafka_partition_queues::throw_pending_failure(std::int32_t partition, std::unique_lock<std::mutex>& lock)
{
    const auto found = failures_.find(partition);
    if (found == failures_.end()) {
        return;
    }
    const failure pending = std::move(found->second);
    failures_.erase(found);
    lock.unlock();
    throw error(static_cast<errc>(pending.code.value()), pending.detail);
}

}  // namespace bufferqueue::detail
