// bufferqueue: an in-process Kafka cluster for tests and examples - librdkafka's mock cluster
// (brokers speaking the Kafka protocol over TCP on loopback), with its fault injection.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

namespace bufferqueue {

/// Kafka protocol request types whose responses `kafka_mock_cluster::push_request_errors` can fail
/// (Kafka's ApiKey numbers).
enum class kafka_request : std::int16_t {
    produce = 0,            ///< Produce: appends records (a producer's batches).
    fetch = 1,              ///< Fetch: reads records (a consumer's polls).
    list_offsets = 2,       ///< ListOffsets: a partition's earliest or latest offset.
    metadata = 3,           ///< Metadata: brokers, topics, partitions and their leaders.
    offset_commit = 8,      ///< OffsetCommit: stores a group's committed offsets.
    offset_fetch = 9,       ///< OffsetFetch: reads a group's committed offsets.
    find_coordinator = 10,  ///< FindCoordinator: the broker that runs a group (or a transaction).
    join_group = 11,        ///< JoinGroup: a member joins a group's rebalance.
    heartbeat = 12,         ///< Heartbeat: a member tells its coordinator it is alive.
    leave_group = 13,       ///< LeaveGroup: a member leaves its group.
    sync_group = 14,        ///< SyncGroup: the members receive their partition assignments.
    init_producer_id = 22,  ///< InitProducerId: an idempotent producer's id and epoch.
};

/// One scripted answer of a mock broker (`kafka_mock_cluster::push_broker_responses`): a Kafka
/// error code (0: none, the request is served as usual - a produce is stored) and how long the
/// broker holds the answer back. A held-back answer also holds back the answers after it on that
/// connection, as a Kafka broker answers in order.
struct kafka_mock_response {
    /// The Kafka error code to answer with (librdkafka's `rd_kafka_resp_err_t`); 0: serve the request.
    int error = 0;
    /// How long the broker holds the answer back (not negative: `push_broker_responses` refuses it).
    std::chrono::milliseconds delay{0};
};

/// librdkafka's mock cluster (`rd_kafka_mock_cluster_new`): `brokers` in-process brokers listening
/// on loopback ports, reachable from clients in this and other processes for as long as the object
/// lives. Brokers are numbered 1..`broker_count()`. Meant for tests and examples, not production:
/// its group protocol is slow (seconds per rebalance, see docs/kafka.md) and it keeps data in memory.
///
/// Caveat of the 2.0.2 mock: a topic a client names but nobody created is auto-created with 4
/// partitions on first use; `kafka_topic_options` registration never names a topic before it has
/// checked that it exists, so only other clients can trigger that.
///
/// Thread-safety: every member may be called from any thread (librdkafka serializes them on the
/// mock's own thread). Not copyable or movable. Destruction stops the brokers; clients still
/// connected see connection failures.
class kafka_mock_cluster {
public:
    /// Starts `brokers` brokers (1..1000). Throws `bufferqueue::error`: `errc::invalid_argument` for
    /// a count out of range, `errc::io_error` when librdkafka cannot start the cluster. Allocates,
    /// starts librdkafka's threads.
    explicit kafka_mock_cluster(std::size_t brokers = 3);
    /// Stops the brokers and frees the cluster with its records (librdkafka's
    /// `rd_kafka_mock_cluster_destroy`); clients still connected see connection failures. Waits for
    /// librdkafka's mock thread to end; never throws.
    ~kafka_mock_cluster();
    kafka_mock_cluster(const kafka_mock_cluster&) = delete;
    kafka_mock_cluster& operator=(const kafka_mock_cluster&) = delete;

    /// Creates topic `name` with `partitions` partitions (1..65536) and `replication_factor`
    /// replicas (1..`broker_count()`). Throws `bufferqueue::error`: `errc::invalid_argument` for
    /// out-of-range counts or an empty name, `errc::topic_exists` when the mock already has the topic,
    /// `errc::io_error` for anything else librdkafka reports (its message is included).
    void create_topic(const std::string& name, std::size_t partitions, std::size_t replication_factor = 1);

    /// The brokers' addresses, "host:port,host:port" (the `bootstrap_servers` of a topic).
    std::string bootstrap_servers() const;

    /// How many brokers the cluster has.
    std::size_t broker_count() const noexcept;

    /// Takes broker `broker_id` (1..`broker_count()`) down: its connections close and new ones are
    /// refused until `set_broker_up`. Throws `bufferqueue::error` `errc::invalid_argument` for an
    /// unknown broker.
    void set_broker_down(std::int32_t broker_id);
    /// Brings broker `broker_id` back. Throws as `set_broker_down`.
    void set_broker_up(std::int32_t broker_id);

    /// Makes the next `errors.size()` responses to `request` (from any broker) fail with those Kafka
    /// error codes, in order (librdkafka's `rd_kafka_resp_err_t` values, e.g. 6 NOT_LEADER_FOR_PARTITION,
    /// 7 REQUEST_TIMED_OUT, 3 UNKNOWN_TOPIC_OR_PART). Never throws beyond allocation.
    void push_request_errors(kafka_request request, std::initializer_list<int> errors);
    /// Forgets the errors pushed for `request` that were not used yet.
    void clear_request_errors(kafka_request request) noexcept;

    /// Makes broker `broker_id`'s next `responses.size()` answers to `request` these, in order
    /// (before those of `push_request_errors`; librdkafka's `rd_kafka_mock_broker_push_request_error_rtts`).
    /// A request answered with an error is not served (a produce stores nothing); with error 0 it is
    /// served at once and only its answer waits. Throws `bufferqueue::error` `errc::invalid_argument`
    /// for an unknown broker or a negative delay.
    void push_broker_responses(std::int32_t broker_id, kafka_request request,
                               std::initializer_list<kafka_mock_response> responses);
    /// How many of the answers pushed with `push_broker_responses` broker `broker_id` has not given
    /// yet (0 once every scripted request arrived). Throws as `push_broker_responses`.
    std::size_t pending_broker_responses(std::int32_t broker_id, kafka_request request) const;

    /// Makes the brokers' metadata report topic `name` with Kafka error code `error` (3
    /// UNKNOWN_TOPIC_OR_PART: as if the topic had been deleted); 0 clears it. The topic's records
    /// stay. Never throws beyond allocation.
    void set_topic_error(const std::string& name, int error);

private:
    struct state;
    std::unique_ptr<state> state_;  // the librdkafka handle and the mock; never null
};

}  // namespace bufferqueue
