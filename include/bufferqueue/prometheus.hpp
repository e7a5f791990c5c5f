// bufferqueue: Prometheus metrics of every topic of a buffer_queue (CMake component
// bufferqueue::prometheus, which needs prometheus-cpp; see docs/statistics.md).
//
//     auto metrics = std::make_shared<bq::prometheus_collector>(queue);
//     exposer.RegisterCollectable(metrics);                                       // prometheus::Exposer
//     // or, on an HTTP server of your own:
//     std::string text = prometheus::TextSerializer{}.Serialize(metrics->Collect());
#pragma once

#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/stats.hpp"

#include <prometheus/client_metric.h>
#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace bufferqueue {

/// The metric families of `topics` (what `buffer_queue::stats()` returned), every sample labelled
/// `topic`, `item_type` (a topic name may be registered once per item type) and `backend`; per
/// partition also `partition`, per group also `group`. Counts are items:
/// - `bufferqueue_partition_end_items` (gauge): items ever appended to the partition;
/// - `bufferqueue_partition_earliest_items` (gauge): the first item the partition still holds;
/// - `bufferqueue_partition_maintenance_failures_total` (counter): failed background storage work
///   (`partition_stats::maintenance_failures`; mmap: retention);
/// - `bufferqueue_group_committed_items` (gauge): the group's committed position in the partition;
/// - `bufferqueue_group_lag_items` (gauge): items of the partition the group has not committed
///   (sum over `partition` for the group's lag);
/// - `bufferqueue_produced_items_total`, `bufferqueue_consumed_items_total` (counters; see
///   `topic_stats::produced`, `topic_stats::consumed`);
/// - `bufferqueue_waiting_producers`, `bufferqueue_waiting_consumers` (gauges);
/// - per group, its push consumers in this process (`group_stats::push_*`; 0 without any):
///   `bufferqueue_push_failed_deliveries_total`, `bufferqueue_push_given_up_batches_total`
///   (counters), and the dead letters of its push and pull consumers (`group_stats::dead_letters`):
///   `bufferqueue_dead_letters_total` (counter).
/// Allocates; throws only `std::bad_alloc`. Thread-safe (a pure function).
inline std::vector<prometheus::MetricFamily> metric_families(const std::vector<topic_stats>& topics)
{
    using prometheus::MetricType;
    std::vector<prometheus::MetricFamily> families{
        {"bufferqueue_partition_end_items", "Items ever appended to the partition", MetricType::Gauge, {}},
        {"bufferqueue_partition_earliest_items",
         "Index of the first item the partition still holds",
         MetricType::Gauge,
         {}},
        {"bufferqueue_partition_maintenance_failures_total",
         "Failed background storage work of the partition (mmap: retention), each retried later",
         MetricType::Counter,
         {}},
        {"bufferqueue_group_committed_items",
         "The consumer group's committed position in the partition, in items",
         MetricType::Gauge,
         {}},
        {"bufferqueue_group_lag_items",
         "Items of the partition the consumer group has not committed",
         MetricType::Gauge,
         {}},
        {"bufferqueue_produced_items_total", "Items appended to the topic", MetricType::Counter, {}},
        {"bufferqueue_consumed_items_total",
         "Items committed by the topic's consumer groups in this process",
         MetricType::Counter,
         {}},
        {"bufferqueue_waiting_producers", "Produces waiting for room in the bounded topic", MetricType::Gauge, {}},
        {"bufferqueue_waiting_consumers", "Consumes waiting for data of the topic", MetricType::Gauge, {}},
        {"bufferqueue_push_failed_deliveries_total",
         "Handler calls of the group's push consumers that failed",
         MetricType::Counter,
         {}},
        {"bufferqueue_push_given_up_batches_total",
         "Batches the group's push consumers gave up on after max_attempts",
         MetricType::Counter,
         {}},
        {"bufferqueue_dead_letters_total",
         "Dead letters of the group's consumers that the dead-letter topic acknowledged",
         MetricType::Counter,
         {}},
    };
    enum family : std::size_t {
        end,
        earliest,
        maintenance_failures,
        committed,
        lag,
        produced,
        consumed,
        waiting_producers,
        waiting_consumers,
        push_failed_deliveries,
        push_given_up_batches,
        dead_letters
    };
    const auto sample = [&](family which, std::vector<prometheus::ClientMetric::Label> labels, double value) {
        prometheus::ClientMetric metric;
        metric.label = std::move(labels);
        if (families[which].type == MetricType::Counter) {
            metric.counter.value = value;
        } else {
            metric.gauge.value = value;
        }
        families[which].metric.push_back(std::move(metric));
    };
    for (const topic_stats& topic : topics) {
        const std::vector<prometheus::ClientMetric::Label> base{
            {"topic", topic.topic}, {"item_type", topic.item_type}, {"backend", topic.backend}};
        const auto with = [&](std::vector<prometheus::ClientMetric::Label> more) {
            std::vector<prometheus::ClientMetric::Label> labels = base;
            labels.insert(labels.end(), more.begin(), more.end());
            return labels;
        };
        for (const partition_stats& partition : topic.partitions) {
            const std::string index = std::to_string(partition.partition);
            sample(end, with({{"partition", index}}), static_cast<double>(partition.end));
            sample(earliest, with({{"partition", index}}), static_cast<double>(partition.earliest));
            sample(maintenance_failures, with({{"partition", index}}),
                   static_cast<double>(partition.maintenance_failures));
        }
        for (const group_stats& group : topic.groups) {
            for (const group_partition_stats& partition : group.partitions) {
                const std::string index = std::to_string(partition.partition);
                sample(committed, with({{"group", group.name}, {"partition", index}}),
                       static_cast<double>(partition.committed));
                sample(lag, with({{"group", group.name}, {"partition", index}}), static_cast<double>(partition.lag));
            }
            sample(push_failed_deliveries, with({{"group", group.name}}),
                   static_cast<double>(group.push_failed_deliveries));
            sample(push_given_up_batches, with({{"group", group.name}}),
                   static_cast<double>(group.push_given_up_batches));
            sample(dead_letters, with({{"group", group.name}}), static_cast<double>(group.dead_letters));
        }
        sample(produced, base, static_cast<double>(topic.produced));
        sample(consumed, base, static_cast<double>(topic.consumed));
        sample(waiting_producers, base, static_cast<double>(topic.waiting_producers));
        sample(waiting_consumers, base, static_cast<double>(topic.waiting_consumers));
    }
    return families;
}

/// A `prometheus::Collectable` over every topic of a queue: each `Collect()` (each scrape) takes a
/// fresh `queue.stats()`, so topics and groups added later appear without registering anything
/// again. Register it with a `prometheus::Exposer` (`RegisterCollectable`, beside your
/// `prometheus::Registry`), or serialize `Collect()` with `prometheus::TextSerializer` on an HTTP
/// server of your own. The queue must outlive every `Collect()` call: unregister the collector (or
/// stop the exposer) before destroying the queue. Thread-safe: scrapes may run on any thread, also
/// concurrently, while the queue is used; a scrape never blocks producers (see
/// `buffer_queue::stats`). `Collect()` allocates and throws only `std::bad_alloc`.
class prometheus_collector final : public prometheus::Collectable {
public:
    /// A collector of `queue`'s topics; keeps a pointer to it (not owned: the queue must outlive
    /// every `Collect()`). Never allocates, never throws.
    explicit prometheus_collector(const buffer_queue& queue) noexcept : queue_(&queue) {}

    /// One scrape: `metric_families(queue.stats())`, a fresh snapshot of every topic with the costs
    /// `buffer_queue::stats()` states (a Kafka topic asks its brokers, up to its `admin_timeout`).
    /// Thread-safe, also concurrently with other scrapes; allocates; throws only `std::bad_alloc`.
    std::vector<prometheus::MetricFamily> Collect() const override { return metric_families(queue_->stats()); }

private:
    const buffer_queue* queue_;  // not owned; outlives this collector's scrapes
};

}  // namespace bufferqueue
