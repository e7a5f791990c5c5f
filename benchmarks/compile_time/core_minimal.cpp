// The smallest useful user file of the core component: one memory topic registered, one item
// produced. `scripts/run compile-time` compiles it beside asio_minimal.cpp (issue 29, part 1:
// a user's file should cost at most one more Asio to compile).
#include <bufferqueue/core.hpp>

#include <boost/asio/io_context.hpp>

int main()
{
    boost::asio::io_context io;
    bufferqueue::buffer_queue queue(io.get_executor());
    queue.add_topic(bufferqueue::memory_topic_options<int>{.name = "numbers"});
    return queue.producer<int>("numbers").try_produce(1) ? 0 : 1;
}
