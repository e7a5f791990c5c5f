// The reference of `scripts/run compile-time`: Boost.Asio alone, an io_context and a post - what
// any file of an Asio program pays before it uses bufferqueue.
#include <utility>  // before Asio: its coroutine headers use std::exchange without it on GCC 12

#include <boost/asio.hpp>

int main()
{
    boost::asio::io_context io;
    int ran = 0;
    boost::asio::post(io, [&ran] { ++ran; });
    io.run();
    return ran == 1 ? 0 : 1;
}
