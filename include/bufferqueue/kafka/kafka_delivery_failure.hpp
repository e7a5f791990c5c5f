// bufferqueue: how a Kafka topic reports a record handed over by `try_produce` that the broker never
// acknowledged.
#pragma once

#include <boost/system/error_code.hpp>

#include <cstdint>
#include <functional>
#include <string>

namespace bufferqueue {

/// One record handed to the Kafka client by `try_produce` (which does not wait for the broker) that
/// was not stored: the delivery report failed. Awaited produces report their failure through their
/// own completion instead.
struct kafka_delivery_failure {
    /// The bufferqueue topic (and Kafka topic) name.
    std::string topic{};
    /// The partition the record was produced to.
    std::int32_t partition = 0;
    /// `errc::timed_out` (`message.timeout.ms` passed), `errc::closed` (the topic closed before the
    /// broker acknowledged it), `errc::io_error`, ...
    boost::system::error_code error{};
    /// librdkafka's reason, with topic and partition.
    std::string detail{};
    /// How many such failures the topic has had so far, this one included.
    std::uint64_t failures = 0;
};

/// Receives `kafka_delivery_failure`s: called on the topic's executor (where delivery reports are
/// served), or inside the topic's close for records it purged. Must not block; an exception it throws
/// is swallowed (the failure is still counted).
using kafka_delivery_error_sink = std::function<void(const kafka_delivery_failure&)>;

}  // namespace bufferqueue
