// The package consumer of the optional kafka component: a one-broker mock cluster in this process,
// three items produced into a Kafka topic and acknowledged by the broker. No consumer group: a
// group join costs seconds on the mock, and the consumers are tested in bufferqueue's own tests.
#include <bufferqueue/kafka.hpp>

#include <boost/asio/io_context.hpp>

#include <cstdio>
#include <optional>
#include <vector>

namespace bq = bufferqueue;

int main()
{
    bq::kafka_mock_cluster cluster{1};
    cluster.create_topic("numbers", 2);
    boost::asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::kafka_topic_options<int>{.name = "numbers",
                                                 .partitions = 2,
                                                 .bootstrap_servers = cluster.bootstrap_servers(),
                                                 .properties = {{"log_level", "0"}, {"linger.ms", "1"}}});
    std::optional<boost::system::error_code> result;
    queue.producer<int>("numbers").produce(std::vector<int>{1, 2, 3},
                                           [&](boost::system::error_code error) { result = error; });
    io.run();  // returns once the delivery reports were served
    const bool acknowledged = result && !*result;
    std::printf("package consumer (%s, kafka): %s\n", BUFFERQUEUE_CONSUME_AS,
                acknowledged ? "3 items acknowledged by the broker"
                             : (result ? result->message().c_str() : "the produce did not complete"));
    queue.close();
    return acknowledged ? 0 : 1;
}
