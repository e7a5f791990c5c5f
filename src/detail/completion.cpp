// The executors of pending completions (detail/completion.hpp), compiled once.
#include "bufferqueue/detail/completion.hpp"

namespace bufferqueue::detail {

boost::asio::any_io_executor work_tracked(const boost::asio::any_io_executor& executor)
{
    return boost::asio::prefer(executor, boost::asio::execution::outstanding_work.tracked);
}

boost::asio::any_io_executor never_blocking_system_executor()
{
    return boost::asio::require(boost::asio::system_executor(), boost::asio::execution::blocking.never);
}

}  // namespace bufferqueue::detail
