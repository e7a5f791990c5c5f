// The item-type-free halves of a pull consumer's awaited operations with the default completion
// token (`use_awaitable`, `any_io_executor`): compiled once here, declared `extern template` in
// consumer/detail/consume_operations.hpp, so a user's file that awaits `consume()`, `commit()` or
// `skip()` does not compile Asio's awaitable machinery for them again.
#include "bufferqueue/consumer/detail/consume_operations.hpp"

#include <boost/asio/any_io_executor.hpp>

namespace bufferqueue::detail {

template boost::asio::awaitable<untyped_batch, boost::asio::any_io_executor>
    awaited_untyped_wait<boost::asio::any_io_executor>(std::shared_ptr<consumer_base>);
template boost::asio::awaitable<void, boost::asio::any_io_executor>
    awaited_commit<boost::asio::any_io_executor>(std::shared_ptr<consumer_base>);
template boost::asio::awaitable<skipped_record, boost::asio::any_io_executor>
    awaited_skip<boost::asio::any_io_executor>(std::shared_ptr<consumer_base>);

}  // namespace bufferqueue::detail
