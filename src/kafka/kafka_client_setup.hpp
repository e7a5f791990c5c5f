// Internal to src/kafka: building a librdkafka client configuration and checking a topic's
// metadata at registration.
#pragma once

#include "bufferqueue/kafka/detail/kafka_producer.hpp"

#include <librdkafka/rdkafka.h>

#include <map>
#include <string>

namespace bufferqueue::detail {

/// A new librdkafka configuration holding `bootstrap.servers` and then every property (so a
/// property may override bufferqueue's defaults). Throws `bufferqueue::error`
/// `errc::invalid_argument` naming topic, property and librdkafka's reason; the configuration is
/// destroyed then. The caller owns the result (until `rd_kafka_new` takes it).
rd_kafka_conf_t* make_client_configuration(const std::string& topic, const std::string& bootstrap_servers,
                                           const std::map<std::string, std::string>& properties);

/// Reads the metadata of every topic of the cluster (naming none, so nothing is auto-created) within
/// `settings.connect_timeout` and checks that `settings.topic` exists with `settings.partitions`
/// partitions. Throws `bufferqueue::error` as `kafka_producer::connect` documents. Blocks.
void check_topic_metadata(rd_kafka_t* client, const kafka_producer_settings& settings);

}  // namespace bufferqueue::detail
