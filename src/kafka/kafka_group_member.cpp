// A Kafka consumer group member: per-partition queues, rebalances and commit results served on the
// executor through one eventfd waited on by an Asio descriptor.
#include "bufferqueue/kafka/detail/kafka_group_member.hpp"

#include "bufferqueue/error.hpp"
#include "bufferqueue/kafka/detail/kafka_producer.hpp"
#include "kafka_client_setup.hpp"
#include "kafka_partition_queues.hpp"

#include "bufferqueue/detail/message.hpp"

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>

#include <librdkafka/rdkafka.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <vector>

namespace bufferqueue::detail {

namespace {

constexpr char wake_bytes[8] = {1, 0, 0, 0, 0, 0, 0, 0};  // eventfd takes 8-byte writes

std::vector<std::int32_t> partitions_of(const rd_kafka_topic_partition_list_t* list)
{
    std::vector<std::int32_t> partitions;
    for (int index = 0; index < list->cnt; ++index) {
        partitions.push_back(list->elems[index].partition);
    }
    return partitions;
}

/// The result of an offset commit: the broker's refusals that mean this member no longer owns the
/// group's partitions as of the commit's generation (a rebalance in progress or done without it; the
/// eager protocols revoke every partition then) are `errc::partition_revoked`, as the topic layer
/// reports a batch of a revoked partition: its records go to the partition's next owner.
/// Everything else as `kafka_error_code`.
boost::system::error_code commit_error_code(rd_kafka_resp_err_t result) noexcept
{
    switch (result) {
    case RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS:
    case RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION:
    case RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID:
    case RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID: return make_error_code(errc::partition_revoked);
    default: return kafka_error_code(result);
    }
}

class group_member final : public kafka_group_member, public std::enable_shared_from_this<group_member> {
public:
    group_member(const kafka_group_settings& settings, kafka_group_listener& listener)
        : topic_(settings.topic), group_(settings.group), listener_(&listener), queues_(settings.topic, settings.group),
          descriptor_(settings.executor)
    {
    }

    group_member(const group_member&) = delete;
    group_member& operator=(const group_member&) = delete;

    // Runs when the last owner lets go (the binding, and the wait chain, which ends once the client
    // closed). A close still in progress (its executor stopped running) is finished here, bounded.
    ~group_member() override
    {
        listener_ = nullptr;  // the owner may be gone: librdkafka's last callbacks reach nobody
        queues_.remove_all();
        if (client_ != nullptr && close_queue_ != nullptr) {
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
            while (!rd_kafka_consumer_closed(client_) && std::chrono::steady_clock::now() < deadline) {
                serve_queue(close_queue_, 100);
            }
        }
        for (rd_kafka_queue_t* queue : {consumer_queue_, close_queue_}) {
            if (queue != nullptr) {
                rd_kafka_queue_destroy(queue);
            }
        }
        if (client_ != nullptr) {
            rd_kafka_destroy(client_);
        }
    }

    void start(const kafka_group_settings& settings)
    {
        // auto.offset.reset=error: librdkafka would reset a committed offset that is out of range
        // silently; a partition without a committed offset is started at the earliest record by
        // restart_at_earliest unless the properties choose a policy themselves.
        std::map<std::string, std::string> properties{
            {"enable.auto.commit", "false"}, {"enable.auto.offset.store", "false"}, {"auto.offset.reset", "error"}};
        queues_.start_new_at_earliest(settings.properties.find("auto.offset.reset") == settings.properties.end());
        for (const auto& [name, value] : settings.properties) {
            properties[name] = value;
        }
        properties["group.id"] = settings.group;
        rd_kafka_conf_t* configuration = make_client_configuration(topic_, settings.bootstrap_servers, properties);
        rd_kafka_conf_set_opaque(configuration, this);
        rd_kafka_conf_set_rebalance_cb(configuration, &group_member::on_rebalance);
        rd_kafka_conf_set_error_cb(configuration, &group_member::on_error);
        std::array<char, 512> reason{};
        client_ = rd_kafka_new(RD_KAFKA_CONSUMER, configuration, reason.data(), reason.size());
        if (client_ == nullptr) {
            rd_kafka_conf_destroy(configuration);
            throw error(errc::invalid_argument,
                        detail::format_message("kafka topic '{}': librdkafka refused the consumer "
                                               "configuration: {}",
                                               topic_, reason.data()));
        }
        rd_kafka_poll_set_consumer(client_);
        consumer_queue_ = rd_kafka_queue_get_consumer(client_);
        event_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (event_fd_ < 0) {
            throw error(errc::io_error,
                        detail::format_message("kafka topic '{}': eventfd failed: {}", topic_, std::strerror(errno)));
        }
        descriptor_.assign(event_fd_);
        rd_kafka_queue_io_event_enable(consumer_queue_, event_fd_, wake_bytes, sizeof wake_bytes);
        rd_kafka_topic_partition_list_t* subscription = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(subscription, topic_.c_str(), RD_KAFKA_PARTITION_UA);
        const rd_kafka_resp_err_t result = rd_kafka_subscribe(client_, subscription);
        rd_kafka_topic_partition_list_destroy(subscription);
        if (result != RD_KAFKA_RESP_ERR_NO_ERROR) {
            throw error(errc::io_error, detail::format_message("kafka topic '{}': cannot subscribe: {}", topic_,
                                                               rd_kafka_err2str(result)));
        }
        wait_for_events();
    }

    std::size_t read(std::int32_t partition, std::size_t max_records, std::vector<kafka_record>& out,
                     std::uint64_t& assignment) override
    {
        bool restart = false;
        const std::size_t delivered = queues_.read(partition, max_records, out, assignment, restart);
        if (restart) {
            (void)::write(event_fd_, wake_bytes, sizeof wake_bytes);  // serve_events restarts it
        }
        return delivered;
    }

    bool has_records(std::int32_t partition) const noexcept override { return queues_.has_records(partition); }

    std::uint64_t assignment_of(std::int32_t partition) const noexcept override
    {
        return queues_.assignment_of(partition);
    }

    void commit(std::int32_t partition, std::int64_t next_offset,
                std::function<void(boost::system::error_code)> done) override
    {
        rd_kafka_topic_partition_list_t* offsets = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(offsets, topic_.c_str(), partition)->offset = next_offset;
        auto* pending = new std::function<void(boost::system::error_code)>(std::move(done));
        // The result is served from the consumer queue, on the executor.
        const rd_kafka_resp_err_t result =
            rd_kafka_commit_queue(client_, offsets, consumer_queue_, &group_member::on_commit, pending);
        rd_kafka_topic_partition_list_destroy(offsets);
        if (result != RD_KAFKA_RESP_ERR_NO_ERROR) {  // not queued: the callback never runs
            boost::asio::post(descriptor_.get_executor(), [pending, error = commit_error_code(result)] {
                (*pending)(error);
                delete pending;
            });
        }
    }

    boost::system::error_code commit_and_wait(std::int32_t partition, std::int64_t next_offset) override
    {
        rd_kafka_topic_partition_list_t* offsets = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(offsets, topic_.c_str(), partition)->offset = next_offset;
        rd_kafka_resp_err_t result = rd_kafka_commit(client_, offsets, 0);
        for (int index = 0; result == RD_KAFKA_RESP_ERR_NO_ERROR && index < offsets->cnt; ++index) {
            result = offsets->elems[index].err;
        }
        rd_kafka_topic_partition_list_destroy(offsets);
        return commit_error_code(result);
    }

    void close() noexcept override
    {
        const std::lock_guard serving(serve_mutex_);
        if (closed_.exchange(true)) {
            return;
        }
        const std::vector<std::int32_t> assigned = queues_.remove_all();  // nothing is read through it now
        if (listener_ != nullptr && !assigned.empty()) {
            listener_->revoked(assigned);
        }
        listener_ = nullptr;  // the owner may go now; the close goes on without it
        // Asynchronous: librdkafka posts the leave's steps (the revocation) to close_queue_, which
        // signals the eventfd; the wait chain serves them and ends once the client closed.
        close_queue_ = rd_kafka_queue_new(client_);
        rd_kafka_queue_io_event_enable(close_queue_, event_fd_, wake_bytes, sizeof wake_bytes);
        if (rd_kafka_error_t* failure = rd_kafka_consumer_close_queue(client_, close_queue_)) {
            rd_kafka_error_destroy(failure);  // already closing: nothing to serve
        }
        (void)::write(event_fd_, wake_bytes, sizeof wake_bytes);
    }

private:
    static void on_rebalance(rd_kafka_t* client, rd_kafka_resp_err_t reason, rd_kafka_topic_partition_list_t* list,
                             void* opaque)
    {
        auto& self = *static_cast<group_member*>(opaque);
        const std::vector<std::int32_t> partitions = partitions_of(list);
        for (const std::int32_t partition : partitions) {
            self.started_at_earliest_.erase(partition);  // a new assignment fetches the committed offset
        }
        if (reason == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
            for (const std::int32_t partition : partitions) {
                self.queues_.add(client, partition, self.event_fd_);
            }
            rd_kafka_assign(client, list);
            if (self.listener_ != nullptr) {
                self.listener_->assigned(partitions);
            }
            return;
        }
        if (self.listener_ != nullptr) {
            self.listener_->revoked(partitions);
        }
        for (const std::int32_t partition : partitions) {
            self.queues_.remove(partition);
        }
        rd_kafka_assign(client, nullptr);
    }

    static void on_commit(rd_kafka_t*, rd_kafka_resp_err_t result, rd_kafka_topic_partition_list_t* offsets,
                          void* opaque)
    {
        std::unique_ptr<std::function<void(boost::system::error_code)>> done(
            static_cast<std::function<void(boost::system::error_code)>*>(opaque));
        rd_kafka_resp_err_t error = result;
        for (int index = 0; error == RD_KAFKA_RESP_ERR_NO_ERROR && offsets != nullptr && index < offsets->cnt;
             ++index) {
            error = offsets->elems[index].err;
        }
        (*done)(commit_error_code(error));
    }

    static void on_error(rd_kafka_t*, int reason, const char* detail, void* opaque)
    {
        static_cast<group_member*>(opaque)->report(static_cast<rd_kafka_resp_err_t>(reason), detail);
    }

    // A client-level error (brokers unreachable, a fatal error): librdkafka keeps retrying the
    // transient ones, so the listener is told and no consume fails for it. Called while serving
    // events (serve_mutex_ held).
    void report(rd_kafka_resp_err_t reason, const char* detail) noexcept
    {
        if (listener_ == nullptr) {
            return;
        }
        try {
            const char* const shown = detail != nullptr ? detail : "";
            std::string text;
            if (reason == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART || reason == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC) {
                // Deliberately no failed consume (docs/kafka.md, "Outages"): the topic may come back.
                text = detail::format_message(
                    "kafka topic '{}' group '{}': the brokers no longer have the topic (deleted?); its "
                    "consumers wait for it to return, cancel() or close() ends a waiting consume ({})",
                    topic_, group_, shown);
            } else {
                text = detail::format_message("kafka topic '{}' group '{}': {}", topic_, group_, shown);
            }
            listener_->failed(kafka_error_code(reason), text);
        } catch (...) {  // NOLINT(bugprone-empty-catch): allocation failed; the error stays unreported
        }
    }

    // Serves what `queue` holds (rebalance callbacks run inside), waiting at most `timeout_ms`.
    void serve_queue(rd_kafka_queue_t* queue, int timeout_ms) noexcept
    {
        while (rd_kafka_message_t* event = rd_kafka_consume_queue(queue, timeout_ms)) {
            if (event->err != RD_KAFKA_RESP_ERR_NO_ERROR && event->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                report(event->err, rd_kafka_message_errstr(event));
            }
            rd_kafka_message_destroy(event);
            timeout_ms = 0;
        }
    }

    // Starts the partitions without a committed offset at their earliest record: the whole
    // assignment again (rd_kafka_assign replaces it), the others at the position the application
    // reached (or their committed offset when nothing was read), so nothing is skipped or read twice.
    void restart_at_earliest() noexcept
    {
        const std::set<std::int32_t> restart = queues_.take_restarts();
        if (restart.empty()) {
            return;
        }
        started_at_earliest_.insert(restart.begin(), restart.end());
        rd_kafka_topic_partition_list_t* assignment = nullptr;
        if (rd_kafka_assignment(client_, &assignment) != RD_KAFKA_RESP_ERR_NO_ERROR || assignment == nullptr) {
            return;
        }
        rd_kafka_position(client_, assignment);
        bool any = false;
        for (int index = 0; index < assignment->cnt; ++index) {
            rd_kafka_topic_partition_t& element = assignment->elems[index];
            if (restart.count(element.partition) != 0) {
                element.offset = RD_KAFKA_OFFSET_BEGINNING;
                any = true;
            } else if (element.offset < 0 && started_at_earliest_.count(element.partition) != 0) {
                element.offset = RD_KAFKA_OFFSET_BEGINNING;  // restarted before, nothing read yet
            }
        }
        if (any) {
            rd_kafka_assign(client_, assignment);
        }
        rd_kafka_topic_partition_list_destroy(assignment);
    }

    void wait_for_events()
    {
        descriptor_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                               [self = shared_from_this()](const boost::system::error_code& error) {
                                   if (!error) {
                                       self->serve_events();
                                   }
                               });
    }

    // Clears the eventfd, then drains the consumer queue fully (rebalances, errors, commit results:
    // the fd fires only when a queue turns non-empty) and tells the listener which partitions hold
    // records. After `close`, serves the close's queue until librdkafka closed, then stops waiting.
    void serve_events()
    {
        const std::lock_guard serving(serve_mutex_);  // close holds it briefly, never across a wait
        std::uint64_t counter = 0;
        while (::read(event_fd_, &counter, sizeof counter) > 0) {
        }
        if (closed_.load()) {
            serve_queue(close_queue_, 0);
            serve_queue(consumer_queue_, 0);
            if (!rd_kafka_consumer_closed(client_)) {
                wait_for_events();
            }
            return;  // closed: the chain ends, so io_context::run() can return
        }
        restart_at_earliest();
        serve_queue(consumer_queue_, 0);
        const std::vector<std::int32_t> readable = queues_.readable();
        for (const std::int32_t partition : readable) {
            listener_->records_available(partition);
        }
        wait_for_events();
    }

    const std::string topic_;
    const std::string group_;
    kafka_group_listener* listener_;  // guarded by serve_mutex_ (callbacks run while served); null after close
    kafka_partition_queues queues_;   // emptied before the client is destroyed
    rd_kafka_t* client_ = nullptr;
    rd_kafka_queue_t* consumer_queue_ = nullptr;
    rd_kafka_queue_t* close_queue_ = nullptr;           // guarded by serve_mutex_: set by close
    int event_fd_ = -1;                                 // owned by descriptor_
    boost::asio::posix::stream_descriptor descriptor_;  // waited on by one chain of serve_events
    std::mutex serve_mutex_;                            // serve_events and close: one at a time
    std::atomic<bool> closed_{false};
    std::set<std::int32_t> started_at_earliest_;  // guarded by serve_mutex_: in this assignment
};

}  // namespace

std::shared_ptr<kafka_group_member> kafka_group_member::join(kafka_group_settings settings,
                                                             kafka_group_listener& listener)
{
    auto member = std::make_shared<group_member>(settings, listener);
    member->start(settings);
    return member;
}

}  // namespace bufferqueue::detail
