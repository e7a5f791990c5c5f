// Internal: the librdkafka producer of one Kafka topic, behind a non-template interface (the
// librdkafka calls live in src/kafka/, so programs using Kafka topics never compile them).
#pragma once

#include "bufferqueue/kafka/detail/kafka_offsets.hpp"
#include "bufferqueue/kafka/kafka_delivery_failure.hpp"
#include "bufferqueue/storage/append_listener.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace bufferqueue::detail {

/// What `kafka_producer::connect` needs: the validated options of a Kafka topic.
struct kafka_producer_settings {
    std::string topic;
    std::size_t partitions = 1;
    std::string bootstrap_servers;
    std::map<std::string, std::string> properties;
    std::chrono::milliseconds connect_timeout{10000};
    /// Where delivery reports are served (an Asio descriptor waits on the client's event fd there).
    boost::asio::any_io_executor executor;
    /// Told about every failed record handed over without a listener (`try_produce`); may be empty.
    kafka_delivery_error_sink delivery_error_sink;
};

/// One librdkafka producer client bound to one topic. Made by `connect`, which checks the topic's
/// metadata first. Delivery reports are served without a polling thread: librdkafka signals its
/// main queue's event descriptor (an eventfd), an Asio `stream_descriptor` waits on it on the
/// topic's executor, and each wake-up drains the queue with non-blocking `rd_kafka_poll(0)` calls.
/// A delivery report goes to the record's `append_listener` (one `acknowledged(1, error)` per
/// record: empty once the broker acknowledged it per `acks`, else `errc::timed_out`, `io_error`,
/// `closed` when the producer closed first, ...), or, for a record handed over without one, to
/// the failure count and `delivery_error_sink` (with a detail naming topic, partition and
/// librdkafka's reason).
///
/// Thread-safety: `produce` may be called from many threads at once; `close` from any thread, once
/// or more. Listeners are called on the executor (serialized: one chain of waits), or inside
/// `close` for the records it purges.
class kafka_producer {
public:
    /// What `produce` did with one record.
    enum class enqueue_result {
        queued,      ///< handed to librdkafka; its listener will get exactly one delivery report
        queue_full,  ///< librdkafka's local queue (`queue.buffering.max.messages/kbytes`) is full
        closed,      ///< the producer is closed
        failed,      ///< refused at once (too large, topic in an error state, ...); see `refusal`
    };

    /// Why `produce` refused a record with `enqueue_result::failed`: the code (see
    /// `kafka_error_code`) and a message naming topic, partition and librdkafka's reason.
    struct refusal {
        boost::system::error_code error{};
        std::string detail{};
    };

    /// Creates the client with `settings.properties` (after bufferqueue's defaults, so they win; see
    /// docs/kafka.md) and waits at most `connect_timeout` for the cluster's metadata. Throws
    /// `bufferqueue::error`: `errc::invalid_argument` for a property librdkafka refuses (naming it) or
    /// a partition count other than the broker's (naming both); `errc::io_error` naming the bootstrap
    /// servers when no broker answered in time; `errc::no_such_topic` when the cluster has no topic of
    /// that name. Never names the topic to the cluster before it is known to exist, so a typo creates
    /// nothing. Blocks the calling thread for up to `connect_timeout`.
    static std::shared_ptr<kafka_producer> connect(kafka_producer_settings settings);

    virtual ~kafka_producer() = default;

    /// Hands one record (copied) for `partition` to librdkafka without waiting; on `queued`,
    /// `listener` (which must stay alive until then) gets its delivery report later, or, when null,
    /// a failure is counted and told to the error sink. `why` is set on `failed`. Thread-safe;
    /// allocates only when it fails.
    virtual enqueue_result produce(std::uint32_t partition, std::span<const std::byte> payload,
                                   append_listener* listener, refusal& why) = 0;

    /// Stops serving delivery reports and purges the records not yet acknowledged: their listeners
    /// get `errc::closed` inside this call. Idempotent, thread-safe, noexcept. The client is
    /// destroyed when the last owner lets go.
    virtual void close() noexcept = 0;

    /// Records handed over whose delivery report has not been served yet (tests, metrics).
    virtual std::size_t in_flight() const noexcept = 0;

    /// How many records handed over without a listener failed so far.
    virtual std::uint64_t unawaited_failures() const noexcept = 0;

    /// Asks the brokers, through this client, for every partition's earliest and end offsets and
    /// for `groups`' committed offsets (see `kafka_topic_offsets`), within `timeout` in all. Blocks
    /// the calling thread (never call it on an executor thread). Thread-safe. Throws
    /// `bufferqueue::error` naming topic, group and servers: `errc::timed_out` when the brokers do
    /// not answer in time, `errc::io_error` for an error they report.
    virtual kafka_topic_offsets read_offsets(const std::vector<std::string>& groups,
                                             std::chrono::milliseconds timeout) = 0;

protected:
    kafka_producer() = default;
};

/// The bufferqueue code for a librdkafka error code (an `rd_kafka_resp_err_t` value): timeouts are
/// `errc::timed_out`, purges at close `errc::closed`, too-large records `errc::invalid_argument`, a
/// missing topic or partition `errc::no_such_topic`, everything else `errc::io_error`.
boost::system::error_code kafka_error_code(int librdkafka_error) noexcept;

}  // namespace bufferqueue::detail
