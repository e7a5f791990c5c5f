// The librdkafka producer of a Kafka topic: delivery reports served on the topic's executor through
// the main queue's event descriptor (an eventfd waited on by an Asio stream_descriptor), never by a
// polling thread.
#include "bufferqueue/kafka/detail/kafka_producer.hpp"

#include "bufferqueue/error.hpp"
#include "kafka_client_setup.hpp"
#include "kafka_offset_queries.hpp"

#include "bufferqueue/detail/message.hpp"

#include <boost/asio/posix/stream_descriptor.hpp>

#include <librdkafka/rdkafka.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <shared_mutex>

namespace bufferqueue::detail {

boost::system::error_code kafka_error_code(int librdkafka_error) noexcept
{
    switch (static_cast<rd_kafka_resp_err_t>(librdkafka_error)) {
    case RD_KAFKA_RESP_ERR_NO_ERROR: return {};
    case RD_KAFKA_RESP_ERR__MSG_TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT: return make_error_code(errc::timed_out);
    case RD_KAFKA_RESP_ERR__PURGE_QUEUE:
    case RD_KAFKA_RESP_ERR__PURGE_INFLIGHT:
    case RD_KAFKA_RESP_ERR__DESTROY: return make_error_code(errc::closed);
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE: return make_error_code(errc::invalid_argument);
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART: return make_error_code(errc::no_such_topic);
    default: return make_error_code(errc::io_error);
    }
}

namespace {

// Counts the failed deliveries of records nobody waits for and tells the sink.
class unawaited_records {
public:
    unawaited_records(std::string topic, kafka_delivery_error_sink sink)
        : topic_(std::move(topic)), sink_(std::move(sink))
    {
    }

    void delivered(std::int32_t partition, boost::system::error_code error, const std::string& detail) noexcept
    {
        if (!error) {
            return;
        }
        const std::uint64_t failures = failures_.fetch_add(1, std::memory_order_acq_rel) + 1;
        if (!sink_) {
            return;
        }
        try {
            sink_(kafka_delivery_failure{
                .topic = topic_, .partition = partition, .error = error, .detail = detail, .failures = failures});
        } catch (...) {  // NOLINT(bugprone-empty-catch): documented, the failure stays counted
        }
    }

    std::uint64_t failures() const noexcept { return failures_.load(std::memory_order_acquire); }

private:
    const std::string topic_;
    const kafka_delivery_error_sink sink_;
    std::atomic<std::uint64_t> failures_{0};
};

class producer_client final : public kafka_producer, public std::enable_shared_from_this<producer_client> {
public:
    explicit producer_client(const kafka_producer_settings& settings)
        : topic_name_(settings.topic), partitions_(settings.partitions), servers_(settings.bootstrap_servers),
          unawaited_(settings.topic, settings.delivery_error_sink), descriptor_(settings.executor)
    {
    }

    producer_client(const producer_client&) = delete;
    producer_client& operator=(const producer_client&) = delete;

    ~producer_client() override
    {
        if (topic_ != nullptr) {
            rd_kafka_topic_destroy(topic_);
        }
        if (main_queue_ != nullptr) {
            rd_kafka_queue_destroy(main_queue_);
        }
        if (client_ != nullptr) {
            rd_kafka_destroy(client_);
        }
        // descriptor_ closes the eventfd.
    }

    // Creates the client, checks the metadata, then starts serving delivery reports.
    void start(const kafka_producer_settings& settings)
    {
        // Idempotent by default: the brokers store each record once and in produce order also when
        // librdkafka retries (a timed-out request, a retriable error with later requests in flight).
        // The user's properties come after, so {"enable.idempotence", "false"} turns it off.
        std::map<std::string, std::string> properties{{"enable.idempotence", "true"}};
        for (const auto& [name, value] : settings.properties) {
            properties[name] = value;
        }
        rd_kafka_conf_t* configuration =
            make_client_configuration(settings.topic, settings.bootstrap_servers, properties);
        rd_kafka_conf_set_opaque(configuration, this);
        rd_kafka_conf_set_dr_msg_cb(configuration, &producer_client::on_delivery);
        std::array<char, 512> reason{};
        client_ = rd_kafka_new(RD_KAFKA_PRODUCER, configuration, reason.data(), reason.size());
        if (client_ == nullptr) {
            rd_kafka_conf_destroy(configuration);
            throw error(errc::invalid_argument,
                        detail::format_message("kafka topic '{}': librdkafka refused the configuration: {}",
                                               topic_name_, reason.data()));
        }
        check_topic_metadata(client_, settings);
        topic_ = rd_kafka_topic_new(client_, topic_name_.c_str(), nullptr);
        if (topic_ == nullptr) {
            throw error(errc::io_error, detail::format_message("kafka topic '{}': cannot create the topic handle: {}",
                                                               topic_name_, rd_kafka_err2str(rd_kafka_last_error())));
        }
        const int event_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (event_fd < 0) {
            throw error(errc::io_error, detail::format_message("kafka topic '{}': eventfd failed: {}", topic_name_,
                                                               std::strerror(errno)));
        }
        descriptor_.assign(event_fd);
        main_queue_ = rd_kafka_queue_get_main(client_);
        static constexpr char wake_byte[8] = {1, 0, 0, 0, 0, 0, 0, 0};  // eventfd takes 8-byte writes
        rd_kafka_queue_io_event_enable(main_queue_, event_fd, wake_byte, sizeof wake_byte);
    }

    enqueue_result produce(std::uint32_t partition, std::span<const std::byte> payload, append_listener* listener,
                           refusal& why) override
    {
        const std::shared_lock lock(close_mutex_);
        if (closed_) {
            return enqueue_result::closed;
        }
        in_flight_.fetch_add(1, std::memory_order_relaxed);
        // The payload is copied (F_COPY); `listener` (null: unawaited) is the record's opaque,
        // handed to on_delivery.
        const int result =
            rd_kafka_produce(topic_, static_cast<std::int32_t>(partition), RD_KAFKA_MSG_F_COPY,
                             const_cast<std::byte*>(payload.data()), payload.size(), nullptr, 0, listener);
        if (result == 0) {
            serve_reports();
            return enqueue_result::queued;
        }
        in_flight_.fetch_sub(1, std::memory_order_relaxed);
        const rd_kafka_resp_err_t reason = rd_kafka_last_error();
        if (reason == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            return enqueue_result::queue_full;
        }
        why.error = kafka_error_code(reason);
        why.detail = detail::format_message("kafka topic '{}' partition {}: librdkafka refused the record: {}",
                                            topic_name_, partition, rd_kafka_err2str(reason));
        return enqueue_result::failed;
    }

    void close() noexcept override
    {
        {
            const std::unique_lock lock(close_mutex_);
            if (closed_) {
                return;
            }
            closed_ = true;  // no produce runs now, and none starts
        }
        {
            const std::lock_guard lock(descriptor_mutex_);
            boost::system::error_code ignored;
            descriptor_.cancel(ignored);
            waiting_ = false;
            stopped_ = true;
        }
        rd_kafka_purge(client_, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        // Serve the purged records' reports (errc::closed) here: the descriptor no longer does.
        // Bounded: librdkafka enqueues them within a short time after the purge.
        for (int round = 0; round < 200 && in_flight_.load(std::memory_order_acquire) != 0; ++round) {
            rd_kafka_poll(client_, 10);
        }
    }

    std::size_t in_flight() const noexcept override { return in_flight_.load(std::memory_order_acquire); }

    std::uint64_t unawaited_failures() const noexcept override { return unawaited_.failures(); }

    kafka_topic_offsets read_offsets(const std::vector<std::string>& groups, std::chrono::milliseconds timeout) override
    {
        return query_topic_offsets(client_, topic_name_, partitions_, groups, timeout, servers_);
    }

private:
    static void on_delivery(rd_kafka_t*, const rd_kafka_message_t* message, void* opaque)
    {
        auto& self = *static_cast<producer_client*>(opaque);
        auto* listener = static_cast<append_listener*>(message->_private);
        if (listener != nullptr) {
            listener->acknowledged(1, message->err == RD_KAFKA_RESP_ERR_NO_ERROR ? boost::system::error_code()
                                                                                 : kafka_error_code(message->err));
        } else if (message->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            try {
                self.unawaited_.delivered(
                    message->partition, kafka_error_code(message->err),
                    detail::format_message("kafka topic '{}' partition {}: record not delivered: {}", self.topic_name_,
                                           message->partition, rd_kafka_err2str(message->err)));
            } catch (...) {  // no memory for the detail: counted without it
                self.unawaited_.delivered(message->partition, kafka_error_code(message->err), std::string());
            }
        }
        self.in_flight_.fetch_sub(1, std::memory_order_acq_rel);
    }

    // Makes sure the descriptor is waited on while a record is in flight (called after each
    // record is handed over). The wait is armed only then, so the executor's io_context has work
    // exactly while delivery reports are outstanding (`run()` returns once all are served).
    void serve_reports()
    {
        const std::lock_guard lock(descriptor_mutex_);
        if (!waiting_) {
            wait_locked();
        }
    }

    void wait_locked()
    {
        if (stopped_) {
            return;
        }
        waiting_ = true;
        descriptor_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                               [self = shared_from_this()](const boost::system::error_code& error) {
                                   if (!error) {
                                       self->serve_events();
                                   }
                               });
    }

    // The fd fires only when the queue turns non-empty: clear it first, then drain the queue fully,
    // so an event enqueued meanwhile makes it fire again. Waits again while records are in flight;
    // a record handed over after the check finds `waiting_` false and arms the wait itself.
    void serve_events()
    {
        {
            const std::shared_lock lock(close_mutex_);
            if (closed_) {
                return;  // close() serves what is left
            }
        }
        std::uint64_t counter = 0;
        while (::read(descriptor_.native_handle(), &counter, sizeof counter) > 0) {
        }
        while (rd_kafka_poll(client_, 0) > 0) {
        }
        const std::lock_guard lock(descriptor_mutex_);
        if (in_flight_.load(std::memory_order_acquire) == 0) {
            waiting_ = false;
            return;
        }
        wait_locked();
    }

    const std::string topic_name_;
    const std::size_t partitions_;
    const std::string servers_;
    unawaited_records unawaited_;
    rd_kafka_t* client_ = nullptr;  // set by start(), destroyed last
    rd_kafka_topic_t* topic_ = nullptr;
    rd_kafka_queue_t* main_queue_ = nullptr;
    std::mutex descriptor_mutex_;
    boost::asio::posix::stream_descriptor descriptor_;  // guarded by descriptor_mutex_ (wait, cancel)
    bool waiting_ = false;                              // guarded by descriptor_mutex_: a wait is armed
    bool stopped_ = false;                              // guarded by descriptor_mutex_: close() ran
    std::shared_mutex close_mutex_;
    bool closed_ = false;  // guarded by close_mutex_
    std::atomic<std::size_t> in_flight_{0};
};

}  // namespace

std::shared_ptr<kafka_producer> kafka_producer::connect(kafka_producer_settings settings)
{
    auto client = std::make_shared<producer_client>(settings);
    client->start(settings);
    return client;
}

}  // namespace bufferqueue::detail
