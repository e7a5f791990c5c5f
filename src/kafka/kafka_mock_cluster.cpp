// The mock cluster over librdkafka's rd_kafka_mock_* calls.
#include "bufferqueue/kafka/kafka_mock_cluster.hpp"

#include "bufferqueue/error.hpp"
#include "bufferqueue/topic/option_checks.hpp"

#include "bufferqueue/detail/message.hpp"

#include <librdkafka/rdkafka.h>
// rdkafka_mock.h must follow rdkafka.h.
#include <librdkafka/rdkafka_mock.h>

#include <array>
#include <limits>
#include <vector>

namespace bufferqueue {

struct kafka_mock_cluster::state {
    rd_kafka_t* client = nullptr;                // owns the mock; a producer that never produces
    rd_kafka_mock_cluster_t* cluster = nullptr;  // owned by `client`'s lifetime, destroyed first
    std::size_t brokers = 0;

    ~state()
    {
        if (cluster != nullptr) {
            rd_kafka_mock_cluster_destroy(cluster);
        }
        if (client != nullptr) {
            rd_kafka_destroy(client);
        }
    }
};

kafka_mock_cluster::kafka_mock_cluster(std::size_t brokers) : state_(std::make_unique<state>())
{
    if (brokers < 1 || brokers > 1000) {
        throw error(
            errc::invalid_argument,
            detail::format_message("kafka mock cluster: broker count must be between 1 and 1000 (got {})", brokers));
    }
    std::array<char, 512> message{};
    rd_kafka_conf_t* configuration = rd_kafka_conf_new();
    // The handle only hosts the mock; keep it quiet.
    rd_kafka_conf_set(configuration, "log_level", "0", message.data(), message.size());
    state_->client = rd_kafka_new(RD_KAFKA_PRODUCER, configuration, message.data(), message.size());
    if (state_->client == nullptr) {
        rd_kafka_conf_destroy(configuration);
        throw error(errc::io_error,
                    detail::format_message("kafka mock cluster: cannot create the hosting client: {}", message.data()));
    }
    state_->cluster = rd_kafka_mock_cluster_new(state_->client, static_cast<int>(brokers));
    if (state_->cluster == nullptr) {
        throw error(errc::io_error,
                    detail::format_message("kafka mock cluster: librdkafka could not start {} mock brokers", brokers));
    }
    state_->brokers = brokers;
}

kafka_mock_cluster::~kafka_mock_cluster() = default;

void kafka_mock_cluster::create_topic(const std::string& name, std::size_t partitions, std::size_t replication_factor)
{
    const std::string what = detail::format_message("kafka mock cluster: topic '{}': ", name);
    if (name.empty()) {
        throw error(errc::invalid_argument, "kafka mock cluster: a topic name must not be empty");
    }
    if (partitions < 1 || partitions > max_partitions) {
        throw error(errc::invalid_argument, detail::format_message("{}partitions must be between 1 and {} (got {})",
                                                                   what, max_partitions, partitions));
    }
    if (replication_factor < 1 || replication_factor > state_->brokers) {
        throw error(errc::invalid_argument,
                    detail::format_message("{}replication factor must be between 1 and the broker count {} (got {})",
                                           what, state_->brokers, replication_factor));
    }
    const rd_kafka_resp_err_t result = rd_kafka_mock_topic_create(
        state_->cluster, name.c_str(), static_cast<int>(partitions), static_cast<int>(replication_factor));
    if (result == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
        throw error(errc::topic_exists, detail::format_message("{}already exists", what));
    }
    if (result != RD_KAFKA_RESP_ERR_NO_ERROR) {
        throw error(errc::io_error, detail::format_message("{}cannot create it: {}", what, rd_kafka_err2str(result)));
    }
}

std::string kafka_mock_cluster::bootstrap_servers() const
{
    return rd_kafka_mock_cluster_bootstraps(state_->cluster);
}

std::size_t kafka_mock_cluster::broker_count() const noexcept
{
    return state_->brokers;
}

namespace {

void require_broker(std::int32_t broker_id, std::size_t brokers)
{
    if (broker_id < 1 || static_cast<std::size_t>(broker_id) > brokers) {
        throw error(errc::invalid_argument,
                    detail::format_message("kafka mock cluster: no broker {} (brokers are 1..{})", broker_id, brokers));
    }
}

}  // namespace

void kafka_mock_cluster::set_broker_down(std::int32_t broker_id)
{
    require_broker(broker_id, state_->brokers);
    rd_kafka_mock_broker_set_down(state_->cluster, broker_id);
}

void kafka_mock_cluster::set_broker_up(std::int32_t broker_id)
{
    require_broker(broker_id, state_->brokers);
    rd_kafka_mock_broker_set_up(state_->cluster, broker_id);
}

void kafka_mock_cluster::push_request_errors(kafka_request request, std::initializer_list<int> errors)
{
    std::vector<rd_kafka_resp_err_t> codes;
    codes.reserve(errors.size());
    for (const int code : errors) {
        codes.push_back(static_cast<rd_kafka_resp_err_t>(code));
    }
    rd_kafka_mock_push_request_errors_array(state_->cluster, static_cast<std::int16_t>(request), codes.size(),
                                            codes.data());
}

void kafka_mock_cluster::set_topic_error(const std::string& name, int error)
{
    rd_kafka_mock_topic_set_error(state_->cluster, name.c_str(), static_cast<rd_kafka_resp_err_t>(error));
}

void kafka_mock_cluster::clear_request_errors(kafka_request request) noexcept
{
    rd_kafka_mock_clear_request_errors(state_->cluster, static_cast<std::int16_t>(request));
}

void kafka_mock_cluster::push_broker_responses(std::int32_t broker_id, kafka_request request,
                                               std::initializer_list<kafka_mock_response> responses)
{
    require_broker(broker_id, state_->brokers);
    for (const kafka_mock_response& response : responses) {
        if (response.delay.count() < 0 || response.delay.count() > std::numeric_limits<int>::max()) {
            throw error(
                errc::invalid_argument,
                detail::format_message("kafka mock cluster: a response delay must be between 0 and {} ms (got {} ms)",
                                       std::numeric_limits<int>::max(), response.delay.count()));
        }
    }
    // One entry a call: the call is variadic, and each appends to the broker's stack in order.
    for (const kafka_mock_response& response : responses) {
        rd_kafka_mock_broker_push_request_error_rtts(state_->cluster, broker_id, static_cast<std::int16_t>(request), 1,
                                                     static_cast<rd_kafka_resp_err_t>(response.error),
                                                     static_cast<int>(response.delay.count()));
    }
}

std::size_t kafka_mock_cluster::pending_broker_responses(std::int32_t broker_id, kafka_request request) const
{
    require_broker(broker_id, state_->brokers);
    std::size_t count = 0;
    if (rd_kafka_mock_broker_error_stack_cnt(state_->cluster, broker_id, static_cast<std::int16_t>(request), &count) !=
        RD_KAFKA_RESP_ERR_NO_ERROR) {
        return 0;  // nothing was ever pushed for this request type
    }
    return count;
}

}  // namespace bufferqueue
