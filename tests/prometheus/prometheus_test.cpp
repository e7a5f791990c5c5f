// The Prometheus component: metric names, types, labels and values of a queue's topics, scraped
// through bufferqueue::prometheus_collector and prometheus-cpp's text serializer.
#include "bufferqueue/prometheus.hpp"

#include "bufferqueue/bufferqueue.hpp"

#include "catch.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <prometheus/text_serializer.h>

#include <boost/asio/io_context.hpp>

#include <memory>
#include <string>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace prometheus_test {

namespace {

namespace bq = bufferqueue;

const prometheus::MetricFamily& family_named(const std::vector<prometheus::MetricFamily>& families,
                                             const std::string& name)
{
    for (const prometheus::MetricFamily& family : families) {
        if (family.name == name) {
            return family;
        }
    }
    FAIL("no metric family " << name);
    throw;  // unreachable
}

std::string label(const prometheus::ClientMetric& metric, const std::string& name)
{
    for (const prometheus::ClientMetric::Label& each : metric.label) {
        if (each.name == name) {
            return each.value;
        }
    }
    return "<none>";
}

}  // namespace

TEST_CASE("the prometheus collector reports every topic's partitions, groups and counters", "[prometheus][stats]")
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::test::int_topic("orders", 2));
    auto reader =
        queue.create_pull_consumer<int>({.topic = "orders", .group = "reader", .auto_commit = true, .batch_size = 100});
    auto behind = queue.create_pull_consumer<int>({.topic = "orders", .group = "behind"});
    REQUIRE(queue.producer<int>("orders").try_produce(bq::test::range(0, 6)));
    while (reader.try_consume()) {
    }
    const auto collector = std::make_shared<bq::prometheus_collector>(queue);

    const std::vector<prometheus::MetricFamily> families = collector->Collect();
    const prometheus::MetricFamily& lag = family_named(families, "bufferqueue_group_lag_items");
    CHECK(lag.type == prometheus::MetricType::Gauge);
    // A memory topic does no background work: a counter per partition, at 0.
    const prometheus::MetricFamily& failures =
        family_named(families, "bufferqueue_partition_maintenance_failures_total");
    CHECK(failures.type == prometheus::MetricType::Counter);
    REQUIRE(failures.metric.size() == 2);
    CHECK(failures.metric[0].counter.value == 0);
    CHECK(failures.metric[1].counter.value == 0);
    double behind_lag = 0;
    double reader_lag = 0;
    for (const prometheus::ClientMetric& metric : lag.metric) {
        CHECK(label(metric, "topic") == "orders");
        CHECK(label(metric, "backend") == "memory");
        CHECK(label(metric, "item_type") == "int");
        CHECK((label(metric, "partition") == "0" || label(metric, "partition") == "1"));
        (label(metric, "group") == "behind" ? behind_lag : reader_lag) += metric.gauge.value;
    }
    CHECK(lag.metric.size() == 4);  // two groups, two partitions
    CHECK(behind_lag == 6);
    CHECK(reader_lag == 0);
    const prometheus::MetricFamily& produced = family_named(families, "bufferqueue_produced_items_total");
    CHECK(produced.type == prometheus::MetricType::Counter);
    REQUIRE(produced.metric.size() == 1);
    CHECK(produced.metric[0].counter.value == 6);
    CHECK(family_named(families, "bufferqueue_consumed_items_total").metric[0].counter.value == 6);
    CHECK(family_named(families, "bufferqueue_partition_end_items").metric.size() == 2);
    CHECK(family_named(families, "bufferqueue_group_committed_items").metric.size() == 4);
    CHECK(family_named(families, "bufferqueue_waiting_consumers").metric.size() == 1);
    // Push counters per group: no push consumers here, so 0 for both groups.
    const prometheus::MetricFamily& dead = family_named(families, "bufferqueue_dead_letters_total");
    CHECK(dead.type == prometheus::MetricType::Counter);
    REQUIRE(dead.metric.size() == 2);
    CHECK(dead.metric[0].counter.value == 0);
    CHECK(family_named(families, "bufferqueue_push_failed_deliveries_total").metric.size() == 2);
    CHECK(family_named(families, "bufferqueue_push_given_up_batches_total").metric.size() == 2);

    // Topics added later appear at the next scrape, in the text format.
    queue.add_topic(bq::test::int_topic("later", 1));
    const std::string text = prometheus::TextSerializer{}.Serialize(collector->Collect());
    CHECK_THAT(text, Catch::Matchers::Contains("# TYPE bufferqueue_produced_items_total counter"));
    CHECK_THAT(
        text,
        Catch::Matchers::Contains(
            R"(bufferqueue_partition_end_items{topic="later",item_type="int",backend="memory",partition="0"} 0)"));
}

}  // namespace prometheus_test
