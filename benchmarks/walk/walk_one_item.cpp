// The walk of one item (benchmarks/walk/measure.py): a memory topic of one partition, a consumer
// of a manual-commit group, then three rounds of try_produce -> co_await consume() ->
// co_await commit(); the third round (everything warm) is recorded. Not part of the library.
#include <utility>  // before Asio's coroutine headers (GCC 12)

#include <bufferqueue/core.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <vector>

extern "C" bool bufferqueue_walking;
extern "C" void bufferqueue_walk_dump(const char* path);

int main(int argc, char** argv)
{
    namespace asio = boost::asio;
    namespace bq = bufferqueue;
    if (argc != 2) {
        return 2;
    }
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<int>{.name = "walk", .partitions = 1});
    std::vector<bq::pull_consumer<int>> consumers =
        queue.create_pull_consumers<int>({.topic = "walk", .group = "g", .auto_commit = false, .batch_size = 10}, 1);
    bq::producer<int> producer = queue.producer<int>("walk");
    bq::pull_consumer<int>& consumer = consumers.front();
    bool done = false;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            for (int round = 0; round < 3; ++round) {
                bufferqueue_walking = round == 2;
                producer.try_produce(round);
                bq::batch<int> batch = co_await consumer.consume();
                co_await consumer.commit();
                bufferqueue_walking = false;
            }
            done = true;
        },
        asio::detached);
    io.run();
    bufferqueue_walk_dump(argv[1]);
    return done ? 0 : 1;
}
