// bufferqueue: how long a push loop waits between failed deliveries of one batch.
#pragma once

#include <chrono>
#include <cstddef>

namespace bufferqueue {

/// The delays between attempts to deliver one batch whose handler threw: the first retry waits
/// `initial`, each later one `multiplier` times the previous, never more than `maximum`. A plain
/// aggregate, usable in a `constexpr push_subscription`. Validated at registration: `initial` and
/// `maximum` not negative, `maximum` not below `initial`, `multiplier` at least 1 (otherwise
/// `bufferqueue::error` `errc::invalid_argument` naming topic, group and the option).
struct retry_backoff {
    /// Delay before the second attempt; 0 retries at once (still through the executor).
    std::chrono::milliseconds initial{100};
    /// Growth of the delay per further attempt, at least 1 (1: a constant delay).
    double multiplier = 2.0;
    /// Upper bound of any delay.
    std::chrono::milliseconds maximum{30000};

    /// The delay before the attempt after `failed_attempts` (>= 1) failed ones: `initial` grown by
    /// `multiplier` per further attempt, at most `maximum`. Never throws; allocates nothing.
    /// Compiled once (src/retry_backoff.cpp).
    std::chrono::milliseconds delay_after(std::size_t failed_attempts) const noexcept;
};

}  // namespace bufferqueue
