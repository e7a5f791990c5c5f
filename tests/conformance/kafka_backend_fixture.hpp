// The conformance fixture of Kafka topics (docs/kafka.md): every fixture object owns an in-process
// mock cluster (librdkafka's, on loopback), so the suite's fixed topic and group names never meet
// another test's, and a new buffer_queue over the same fixture object finds the data and the
// committed offsets the brokers keep. Included by backend_fixtures.hpp only when the Kafka
// component is built (BUFFERQUEUE_TEST_HAS_KAFKA) and the build is not a ThreadSanitizer build.
#pragma once

#include "conformance/conformance_topic.hpp"
#include "kafka/kafka_test_support.hpp"

#include <bufferqueue/kafka.hpp>

#include "catch.hpp"

#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>

struct kafka_backend {
    static constexpr std::string_view name = "kafka";
    /// Records and committed offsets live in the cluster, which outlives the buffer_queue.
    static constexpr bool persistent = true;
    /// Kafka topics have no bounded_capacity (docs/kafka.md, "Options").
    static constexpr bool bounded = false;
    /// Partitions arrive with the group's rebalance, seconds after the consumers are created, and a
    /// record produced is readable once the member fetched it (docs/kafka.md, "Pull consumers":
    /// "they start with no partitions"): the cases that read with try_consume right after creating
    /// consumers or producing do not run over Kafka.
    static constexpr bool immediate = false;
    /// `queue.stats<T>()` of a Kafka topic reads the partitions' offsets and the committed offsets
    /// of the groups opened in this process from the brokers (docs/kafka.md, "Statistics").
    static constexpr bool statistics = true;
    /// ...but it cannot list the groups no consumer of this process opened: the 2.0.2 mock has no
    /// ListGroups ("Required feature not supported by broker").
    static constexpr bool lists_stored_groups = false;

    /// One broker: the suite tests the client side; replication adds nothing here and every broker
    /// costs threads and start-up time.
    /// Always a mock cluster, also when BUFFERQUEUE_KAFKA_BOOTSTRAP names a real one (it says so):
    /// the suite's topic names are fixed, so on a shared cluster a rerun would meet the records and
    /// committed offsets of the last run.
    kafka_backend() : cluster_(1)
    {
        if (const char* servers = std::getenv("BUFFERQUEUE_KAFKA_BOOTSTRAP"); servers != nullptr && *servers != 0) {
            WARN("the conformance suite runs on its own mock cluster, not on BUFFERQUEUE_KAFKA_BOOTSTRAP="
                 << servers << ": its fixed topic names would collide with the last run's on a shared cluster");
        }
    }

    template <class T>
    void add_topic(bufferqueue::buffer_queue& queue, const conformance_topic<T>& spec)
    {
        if (spec.bounded_capacity) {
            throw std::invalid_argument("the kafka conformance fixture cannot bound topic '" + spec.name + "'");
        }
        if (created_.emplace(spec.name, spec.partitions).second) {
            cluster_.create_topic(spec.name, spec.partitions);
        }
        queue.add_topic(bufferqueue::kafka_topic_options<T>{.name = spec.name,
                                                            .partitions = spec.partitions,
                                                            .bootstrap_servers = cluster_.bootstrap_servers(),
                                                            .partition_key = spec.partition_key,
                                                            // Quiet clients, a quick group protocol the mock
                                                            // allows safely (see group_properties).
                                                            .properties = bufferqueue::test::group_properties(),
                                                            .admin_timeout = bufferqueue::test::mock_admin_timeout});
    }

private:
    bufferqueue::kafka_mock_cluster cluster_;
    std::map<std::string, std::size_t> created_;  // topics created on cluster_: name -> partitions
};
