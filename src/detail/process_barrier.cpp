// The membarrier system call behind detail::heavy_fence.
#include "bufferqueue/detail/process_barrier.hpp"

#include <cstdlib>

#if defined(__linux__) && __has_include(<linux/membarrier.h>)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__linux__) && defined(SYS_membarrier)
#define BUFFERQUEUE_HAS_MEMBARRIER 1
#else
#define BUFFERQUEUE_HAS_MEMBARRIER 0
#endif

namespace bufferqueue::detail {

#if BUFFERQUEUE_HAS_MEMBARRIER

namespace {

long membarrier(int command) noexcept
{
    return ::syscall(SYS_membarrier, command, 0U, 0);
}

}  // namespace

bool register_process_barrier() noexcept
{
    const long supported = membarrier(MEMBARRIER_CMD_QUERY);
    if (supported < 0 || (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) {
        return false;
    }
    return membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 &&
           membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0;
}

void issue_process_barrier() noexcept
{
    // Registered and checked once; a failure now would make producers' light fences unsound, so
    // stop rather than risk a lost wake-up.
    if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
        std::abort();
    }
}

#else

bool register_process_barrier() noexcept
{
    return false;
}

void issue_process_barrier() noexcept
{
}

#endif

}  // namespace bufferqueue::detail
