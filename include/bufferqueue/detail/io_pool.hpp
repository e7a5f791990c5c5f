// Internal: the threads where asynchronous operations of persistent topics do blocking file I/O.
#pragma once

#include "bufferqueue/detail/config.hpp"

#include <boost/asio/thread_pool.hpp>

#include <cstddef>
#include <shared_mutex>

namespace bufferqueue::detail {

/// A small thread pool for blocking file I/O (msync, fsync, rename), owned jointly by a
/// `buffer_queue` and its persistent topics through `std::shared_ptr`, so a producer or consumer
/// handle that outlives the queue still reaches a live object. The queue's destructor calls
/// `shut_down`; from then on `post` refuses work, so nothing is ever queued on threads that no
/// longer run (the caller completes the operation with `errc::closed` instead).
///
/// Thread-safety: `post` may be called from any thread, including the pool's own threads, and
/// concurrently with `shut_down`. Every accepted function runs before `shut_down` returns.
class io_pool {
public:
    /// Starts `threads` threads. Allocates; throws what `boost::asio::thread_pool` throws.
    explicit io_pool(std::size_t threads) : pool_(threads) {}

    io_pool(const io_pool&) = delete;
    io_pool& operator=(const io_pool&) = delete;

    /// Shuts down (see `shut_down`).
    ~io_pool() { shut_down(); }

    /// Unless shut down, posts the function `make()` returns and returns true; returns false after
    /// `shut_down`. `make` is called only when the work is accepted, so it may move the caller's
    /// state into the function: when `post` returns false, nothing was moved. `make` must not call
    /// back into this pool. Does not block beyond a shared lock and the pool's queue lock.
    template <class Make>
    bool post(Make&& make)
    {
        std::shared_lock lock(mutex_);
        if (shut_down_) {
            return false;
        }
        boost::asio::post(pool_.get_executor(), make());
        return true;
    }

    /// Refuses new work, waits for the accepted work (including work it posts before the refusal)
    /// and joins the threads. Idempotent; never throws. Must not be called from a pool thread.
    void shut_down() noexcept
    {
        {
            std::unique_lock lock(mutex_);
            shut_down_ = true;
        }
        pool_.join();
    }

private:
    std::shared_mutex mutex_;
    bool shut_down_ = false;  // guarded by mutex_
    boost::asio::thread_pool pool_;
};

}  // namespace bufferqueue::detail
