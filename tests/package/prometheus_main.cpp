// The package consumer of the optional prometheus component: one memory topic with a group that
// never consumes, scraped through bufferqueue::prometheus_collector and prometheus-cpp's text format.
#include <bufferqueue/core.hpp>
#include <bufferqueue/prometheus.hpp>

#include <prometheus/text_serializer.h>

#include <boost/asio/io_context.hpp>

#include <cstdio>
#include <string>
#include <vector>

namespace bq = bufferqueue;

int main()
{
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<int>{.name = "numbers", .partitions = 1});
    auto idle = queue.create_pull_consumer<int>({.topic = "numbers", .group = "idle"});
    queue.producer<int>("numbers").try_produce(std::vector<int>{1, 2, 3});
    const std::string text = prometheus::TextSerializer{}.Serialize(bq::prometheus_collector(queue).Collect());
    const std::string lag =
        R"(bufferqueue_group_lag_items{topic="numbers",item_type="int",backend="memory",group="idle",partition="0"} 3)";
    const bool found = text.find(lag) != std::string::npos;
    std::printf("package consumer (%s, prometheus): %s\n", BUFFERQUEUE_CONSUME_AS,
                found ? "group idle lags 3 items" : ("no lag of 3 in:\n" + text).c_str());
    return found ? 0 : 1;
}
