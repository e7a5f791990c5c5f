// The package consumer: produces three items into a memory topic and reads them back with a pull
// consumer in a coroutine and with a push consumer. Built twice (CMakeLists.txt): with the umbrella
// header, and with BUFFERQUEUE_PACKAGE_CORE_ONLY against the core component alone.
#ifdef BUFFERQUEUE_PACKAGE_CORE_ONLY
#include <bufferqueue/core.hpp>
#if defined(NLOHMANN_JSON_VERSION_MAJOR) || defined(MSGPACK_VERSION_MAJOR)
#error "<bufferqueue/core.hpp> included nlohmann_json or msgpack-cxx"
#endif
#define BUFFERQUEUE_PACKAGE_COMPONENT "core"
#else
#include <bufferqueue/bufferqueue.hpp>
#define BUFFERQUEUE_PACKAGE_COMPONENT "bufferqueue"
#endif

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <cstdio>
#include <span>
#include <vector>

namespace asio = boost::asio;
namespace bq = bufferqueue;

int main()
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(bq::memory_topic_options<int>{.name = "numbers", .partitions = 1});
    bq::pull_consumer<int> consumer = queue.create_pull_consumer<int>({.topic = "numbers", .group = "pull"});
    int pushed = 0;
    queue.add_push_consumer({.topic = "numbers", .group = "push"}, [&](bq::batch<int> items) -> asio::awaitable<void> {
        pushed += static_cast<int>(items.size());
        co_return;
    });
    queue.start();

    const std::vector<int> items{1, 2, 3};
    queue.producer<int>("numbers").try_produce(std::span<const int>(items));
    int sum = 0;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            while (sum < 6) {
                bq::batch<int> batch = co_await consumer.consume();
                for (int item : batch) {
                    sum += item;
                }
                co_await consumer.commit();
            }
            while (pushed < 3) {
                co_await asio::post(io, asio::use_awaitable);
            }
            co_await queue.stop();
        },
        asio::detached);
    io.run();
    std::printf("package consumer (%s, %s): pulled sum %d, pushed %d items\n", BUFFERQUEUE_CONSUME_AS,
                BUFFERQUEUE_PACKAGE_COMPONENT, sum, pushed);
    return sum == 6 && pushed == 3 ? 0 : 1;
}
