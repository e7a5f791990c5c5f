// bufferqueue: Kafka topics (CMake target bufferqueue::kafka, built when librdkafka is found) -
// `kafka_topic_options` for `buffer_queue::add_topic`, and `kafka_mock_cluster` for tests. What is
// implemented so far is listed in docs/kafka.md. Includes <bufferqueue/core.hpp> (the registry and the
// handles) and the serializers.
#pragma once

#include "bufferqueue/core.hpp"
#include "bufferqueue/kafka/kafka_delivery_failure.hpp"
#include "bufferqueue/kafka/kafka_mock_cluster.hpp"
#include "bufferqueue/kafka/kafka_topic.hpp"
