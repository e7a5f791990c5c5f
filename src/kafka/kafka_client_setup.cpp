#include "kafka_client_setup.hpp"

#include "bufferqueue/error.hpp"

#include "bufferqueue/detail/message.hpp"

#include <array>
#include <memory>
#include <string_view>

namespace bufferqueue::detail {

namespace {

std::string topic_prefix(const std::string& topic)
{
    return detail::format_message("kafka topic '{}': ", topic);
}

void set_property(rd_kafka_conf_t* configuration, const std::string& topic, const std::string& name,
                  const std::string& value)
{
    std::array<char, 512> reason{};
    if (rd_kafka_conf_set(configuration, name.c_str(), value.c_str(), reason.data(), reason.size()) !=
        RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(configuration);
        throw error(errc::invalid_argument, detail::format_message("{}property '{}' = '{}' refused by librdkafka: {}",
                                                                   topic_prefix(topic), name, value, reason.data()));
    }
}

struct metadata_deleter {
    void operator()(const rd_kafka_metadata_t* metadata) const noexcept { rd_kafka_metadata_destroy(metadata); }
};

}  // namespace

rd_kafka_conf_t* make_client_configuration(const std::string& topic, const std::string& bootstrap_servers,
                                           const std::map<std::string, std::string>& properties)
{
    rd_kafka_conf_t* configuration = rd_kafka_conf_new();
    set_property(configuration, topic, "bootstrap.servers", bootstrap_servers);
    for (const auto& [name, value] : properties) {
        set_property(configuration, topic, name, value);
    }
    return configuration;
}

void check_topic_metadata(rd_kafka_t* client, const kafka_producer_settings& settings)
{
    const std::string prefix = topic_prefix(settings.topic);
    const rd_kafka_metadata_t* raw = nullptr;
    const auto timeout = static_cast<int>(settings.connect_timeout.count());
    // all_topics = 1 and no topic handle: the request names no topic, so no broker auto-creates one.
    const rd_kafka_resp_err_t result = rd_kafka_metadata(client, 1, nullptr, &raw, timeout);
    const std::unique_ptr<const rd_kafka_metadata_t, metadata_deleter> metadata(raw);
    if (result != RD_KAFKA_RESP_ERR_NO_ERROR) {
        throw error(errc::io_error, detail::format_message("{}no broker of '{}' answered a metadata request within "
                                                           "connect_timeout ({} ms): {}",
                                                           prefix, settings.bootstrap_servers,
                                                           settings.connect_timeout.count(), rd_kafka_err2str(result)));
    }
    for (int index = 0; index < metadata->topic_cnt; ++index) {
        const rd_kafka_metadata_topic_t& topic = metadata->topics[index];
        if (topic.topic == nullptr || std::string_view(topic.topic) != settings.topic) {
            continue;
        }
        if (topic.err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
            break;
        }
        if (topic.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            throw error(errc::io_error,
                        detail::format_message("{}the cluster at '{}' reports an error for the topic: {}", prefix,
                                               settings.bootstrap_servers, rd_kafka_err2str(topic.err)));
        }
        if (static_cast<std::size_t>(topic.partition_cnt) != settings.partitions) {
            throw error(errc::invalid_argument,
                        detail::format_message(
                            "{}option 'partitions' is {}, but the topic on the cluster at '{}' has {} partitions",
                            prefix, settings.partitions, settings.bootstrap_servers, topic.partition_cnt));
        }
        return;
    }
    throw error(errc::no_such_topic,
                detail::format_message("{}the cluster at '{}' has no such topic (bufferqueue never creates "
                                       "Kafka topics; create it with the cluster's tools first)",
                                       prefix, settings.bootstrap_servers));
}

}  // namespace bufferqueue::detail
