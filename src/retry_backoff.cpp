// The push loop's retry delays: retry_backoff.hpp, compiled once so the header needs no <cmath>.
#include "bufferqueue/retry_backoff.hpp"

#include <cmath>

namespace bufferqueue {

std::chrono::milliseconds retry_backoff::delay_after(std::size_t failed_attempts) const noexcept
{
    if (initial.count() <= 0) {
        return std::chrono::milliseconds(0);
    }
    const double grown =
        static_cast<double>(initial.count()) * std::pow(multiplier, static_cast<double>(failed_attempts - 1));
    if (!(grown < static_cast<double>(maximum.count()))) {  // also an infinite product
        return maximum;
    }
    return std::chrono::milliseconds(static_cast<std::chrono::milliseconds::rep>(grown));
}

}  // namespace bufferqueue
