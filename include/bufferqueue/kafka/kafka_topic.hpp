// bufferqueue: topics stored in a Kafka cluster through librdkafka - their options and their
// `make_topic` (see `buffer_queue::add_topic` and docs/kafka.md).
#pragma once

#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/kafka/detail/kafka_membership.hpp"
#include "bufferqueue/kafka/detail/kafka_partition.hpp"
#include "bufferqueue/kafka/detail/kafka_producer.hpp"
#include "bufferqueue/kafka/kafka_delivery_failure.hpp"
#include "bufferqueue/partition_key.hpp"
#include "bufferqueue/serialization/any_serializer.hpp"
#include "bufferqueue/serialization/serializer.hpp"
#include "bufferqueue/topic/option_checks.hpp"
#include "bufferqueue/topic/partitioned_topic.hpp"
#include "bufferqueue/topic/topic_context.hpp"

#include <chrono>
#include <cstddef>
#include <limits>
#include <map>
#include <memory>
#include <string>

namespace bufferqueue {

/// Registration options of a topic stored in the Kafka topic of the same name (see
/// `buffer_queue::add_topic`). The first six fields are declared in the order of the public
/// contract (designated initializers follow it); later ones are additions. `name`,
/// `bootstrap_servers` and a `partitions` equal to the Kafka topic's must be set.
template <class T>
struct kafka_topic_options {
    /// The Kafka topic's name (1..249 characters of [a-zA-Z0-9._-]); also the bufferqueue topic name.
    /// The topic must exist on the cluster: registration never creates one.
    std::string name{};
    /// Must equal the Kafka topic's partition count (checked at registration).
    std::size_t partitions = 1;
    /// "host:port,host:port" (librdkafka's `bootstrap.servers`); `kafka_mock_cluster::bootstrap_servers`
    /// for the in-process mock.
    std::string bootstrap_servers{};
    /// Encodes items into record values (the serializers of mmap topics).
    any_serializer<T> serializer = json_serializer<T>{};
    /// Optional key routing; round-robin when empty. Equal keys reach the same partition number as on
    /// memory and mmap topics: bufferqueue picks the partition, not librdkafka's partitioner.
    key_selector<T> partition_key{};
    /// librdkafka configuration properties, passed as they are after bufferqueue's own settings (so
    /// they win), e.g. {"acks", "all"}, {"message.timeout.ms", "30000"}, {"linger.ms", "1"}.
    std::map<std::string, std::string> properties{};
    /// How long registration waits for the cluster's metadata (at least 1 ms, at most INT_MAX ms);
    /// `add_topic` blocks the calling thread for at most this long.
    std::chrono::milliseconds connect_timeout = std::chrono::seconds(10);
    /// Told about records handed over by `try_produce` that the broker never acknowledged; may be
    /// empty (the failures are still counted). See `kafka_delivery_error_sink`.
    kafka_delivery_error_sink delivery_error_sink{};
    /// Bounds the broker round trips of `buffer_queue::stats` (the partitions' offsets and the
    /// groups' committed offsets; it blocks the calling thread at most this long, and not at all on
    /// a thread running the topic's io_context) and of `buffer_queue::remove_group` (a group join).
    /// At least 1 ms, at most INT_MAX ms. See docs/kafka.md, "Statistics".
    std::chrono::milliseconds admin_timeout = std::chrono::seconds(10);
};

namespace detail {

inline bool is_valid_kafka_topic_name(const std::string& name) noexcept
{
    if (name.empty() || name.size() > 249 || name == "." || name == "..") {
        return false;
    }
    for (const char character : name) {
        const bool valid = (character >= 'a' && character <= 'z') || (character >= 'A' && character <= 'Z') ||
                           (character >= '0' && character <= '9') || character == '.' || character == '_' ||
                           character == '-';
        if (!valid) {
            return false;
        }
    }
    return true;
}

/// Validates `options`, connects a producer client and checks the topic's metadata, then builds the
/// topic. Throws `bufferqueue::error`: `errc::topic_exists` and `errc::closed` (checked before
/// connecting), `errc::invalid_argument` naming the option or property at fault or both partition
/// counts, `errc::io_error` naming the bootstrap servers when no broker answers within
/// `connect_timeout`, `errc::no_such_topic` when the cluster lacks the topic. Blocks for up to
/// `connect_timeout`.
template <class T>
registered_topic make_kafka_topic(kafka_topic_options<T> options, topic_context& context)
{
    context.require_unregistered<T>(options.name);
    constexpr std::string_view kind = "kafka";
    require_topic_name(kind, options.name);
    require_option(is_valid_kafka_topic_name(options.name), kind, options.name, "name",
                   "must be 1 to 249 characters of [a-zA-Z0-9._-] and not '.' or '..' (Kafka's rule)");
    require_partition_count(kind, options.name, options.partitions);
    require_option(!options.bootstrap_servers.empty(), kind, options.name, "bootstrap_servers", "must be set");
    require_option(options.connect_timeout.count() >= 1 &&
                       options.connect_timeout.count() <= std::numeric_limits<int>::max(),
                   kind, options.name, "connect_timeout",
                   format_message("must be between 1 ms and {} ms (got {} ms)", std::numeric_limits<int>::max(),
                                  options.connect_timeout.count()));
    require_option(options.admin_timeout.count() >= 1 &&
                       options.admin_timeout.count() <= std::numeric_limits<int>::max(),
                   kind, options.name, "admin_timeout",
                   format_message("must be between 1 ms and {} ms (got {} ms)", std::numeric_limits<int>::max(),
                                  options.admin_timeout.count()));

    auto producer =
        kafka_producer::connect(kafka_producer_settings{.topic = options.name,
                                                        .partitions = options.partitions,
                                                        .bootstrap_servers = options.bootstrap_servers,
                                                        .properties = options.properties,
                                                        .connect_timeout = options.connect_timeout,
                                                        .executor = context.executor(),
                                                        .delivery_error_sink = std::move(options.delivery_error_sink)});
    // The topic layer routes (keys as on memory and mmap topics, round robin otherwise) and runs
    // the consumer groups; each partition hands its records to the producer, and the membership
    // makes every consumer a member of the Kafka group, whose rebalances assign its partitions.
    topic_partitions<kafka_partition<T>> partitions;
    partitions.reserve(options.partitions);
    std::vector<kafka_partition<T>*> stored;
    for (std::size_t partition = 0; partition < options.partitions; ++partition) {
        stored.push_back(
            &partitions.emplace_back(options.name, static_cast<std::int32_t>(partition), options.serializer, producer));
    }
    auto membership = std::make_shared<kafka_membership<T>>(
        typename kafka_membership<T>::settings{.topic = options.name,
                                               .partitions = std::move(stored),
                                               .producer = producer,
                                               .bootstrap_servers = options.bootstrap_servers,
                                               .properties = std::move(options.properties),
                                               .admin_timeout = options.admin_timeout,
                                               .executor = context.executor()});
    return make_partitioned_topic(context,
                                  topic_settings<T>{.name = std::move(options.name),
                                                    .partition_key = std::move(options.partition_key),
                                                    .membership = std::move(membership)},
                                  std::move(partitions));
}

}  // namespace detail

/// The `make_topic` of Kafka topics, found by `buffer_queue::add_topic`: validates `options`,
/// connects a producer client and checks the Kafka topic's metadata, then builds the topic (its
/// consumers join Kafka consumer groups). Throws `bufferqueue::error`: `errc::topic_exists` and
/// `errc::closed` (checked before connecting), `errc::invalid_argument` naming the option or
/// property at fault, or both partition counts when `partitions` differs from the Kafka topic's,
/// `errc::io_error` naming the bootstrap servers when no broker answers within `connect_timeout`,
/// `errc::no_such_topic` when the cluster lacks the topic. Talks to the cluster: blocks the calling
/// thread for up to `connect_timeout`. Allocates and starts librdkafka's client threads.
template <class T>
registered_topic make_topic(kafka_topic_options<T> options, topic_context& context)
{
    return detail::make_kafka_topic(std::move(options), context);
}

}  // namespace bufferqueue
