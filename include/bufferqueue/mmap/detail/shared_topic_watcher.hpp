// Internal: the one thread per process and process-shared topic that hears the other processes
// (issue 27, issue 52): it sleeps on the shared header's wake-up sequence (a futex, no polling for
// data), publishes other processes' appends after every notification, and re-shares the consumer
// groups only when the membership sequence moved - or once per period, the bound on how long a
// member that died unnoticed (whose leases the kernel released silently) keeps its partitions.
#pragma once

#include "bufferqueue/mmap/detail/process_shared_sync.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>
#include <utility>

namespace bufferqueue::detail {

/// The wake-up words of a process-shared topic, `storage_size` bytes of its shared header
/// (shared_topic_header.hpp, docs/mmap-format.md): a `process_shared_event` (the wake-up sequence
/// and its waiters: the futex word every notification advances and each process's watcher sleeps
/// on), then the membership sequence, which a membership change advances before it notifies, so
/// that an append - which advances the wake-up sequence only - does not make the watchers re-share
/// the groups. A copyable view; valid while the mapping lives. Every member is thread-safe and
/// lock-free (a notification makes a futex system call while someone sleeps), never throws.
class shared_wakeups {
public:
    /// Bytes the words take in a shared layout (aligned to 4).
    static constexpr std::size_t storage_size = process_shared_event::storage_size + sizeof(std::uint32_t);

    /// Zeroes the words at `storage`. Only while no process uses them.
    static void initialize(std::byte* storage) noexcept
    {
        process_shared_event::initialize(storage);
        membership_word(storage).store(0, std::memory_order_relaxed);
    }

    /// A view of the words at `storage`.
    explicit shared_wakeups(std::byte* storage) noexcept : storage_(storage) {}

    /// The wake-up event: notified after appends (and, through `notify_membership`, after changes).
    process_shared_event event() const noexcept { return process_shared_event(storage_); }

    /// A member of some group joined, closed or let go of a lease: advances the membership sequence,
    /// then notifies the event, so every process's watcher re-shares its groups.
    void notify_membership() const noexcept
    {
        membership_word(storage_).fetch_add(1, std::memory_order_seq_cst);
        event().notify();
    }

    /// The membership sequence (read after the event's sequence: a change notified after that read
    /// moves the event too).
    std::uint32_t membership_sequence() const noexcept
    {
        return membership_word(storage_).load(std::memory_order_seq_cst);
    }

private:
    static std::atomic_ref<std::uint32_t> membership_word(std::byte* storage) noexcept
    {
        return std::atomic_ref<std::uint32_t>(  // NOLINT: the mapped word
            *reinterpret_cast<std::uint32_t*>(storage + process_shared_event::storage_size));
    }

    std::byte* storage_;
};

/// On a thread of its own, calls `on_appends` after notifications of `wakeups`' event by any process
/// (several notifications in a row may be heard as one) and when `period` passed without one, and
/// then `on_membership` when the membership sequence moved since its last call or `period` passed
/// since it (so at least once per `period`, however often appends notify). Not copyable or movable;
/// destroying it stops the thread and waits for a callback in progress.
class shared_topic_watcher {
public:
    /// Starts the thread. The callbacks must not throw (a throw ends the process, as from any thread)
    /// and must not destroy the watcher. Throws `std::system_error` when the thread cannot start.
    shared_topic_watcher(shared_wakeups wakeups, std::chrono::nanoseconds period, std::function<void()> on_appends,
                         std::function<void()> on_membership)
        : wakeups_(wakeups), period_(period), on_appends_(std::move(on_appends)),
          on_membership_(std::move(on_membership)), first_seen_(wakeups_.event().sequence()),
          first_membership_(wakeups_.membership_sequence()), thread_([this] { run(); })
    {
    }

    shared_topic_watcher(const shared_topic_watcher&) = delete;
    shared_topic_watcher& operator=(const shared_topic_watcher&) = delete;

    /// Stops the thread: it hears a notification (the other processes' watchers hear it too, as a
    /// spurious wake-up that re-shares nothing) and ends. Never throws.
    ~shared_topic_watcher()
    {
        stopping_.store(true, std::memory_order_release);
        wakeups_.event().notify();
        thread_.join();
    }

private:
    void run()
    {
        using clock = std::chrono::steady_clock;
        // The sequences as the constructor saw them: a notification between construction and the
        // thread's start is heard, not taken for the starting point.
        std::uint32_t seen = first_seen_;
        std::uint32_t membership_seen = first_membership_;
        clock::time_point membership_due = clock::now() + period_;
        process_shared_event event = wakeups_.event();
        while (!stopping_.load(std::memory_order_acquire)) {
            event.wait(seen, std::clamp<std::chrono::nanoseconds>(membership_due - clock::now(),
                                                                  std::chrono::nanoseconds(0), period_));
            seen = event.sequence();
            const std::uint32_t membership = wakeups_.membership_sequence();  // after `seen`
            if (stopping_.load(std::memory_order_acquire)) {
                return;
            }
            on_appends_();
            const clock::time_point now = clock::now();
            if (membership != membership_seen || now >= membership_due) {
                membership_seen = membership;
                membership_due = now + period_;
                on_membership_();
            }
        }
    }

    const shared_wakeups wakeups_;
    const std::chrono::nanoseconds period_;
    const std::function<void()> on_appends_;
    const std::function<void()> on_membership_;
    const std::uint32_t first_seen_;
    const std::uint32_t first_membership_;
    std::atomic<bool> stopping_{false};
    std::thread thread_;  // last: starts once every other member is ready
};

}  // namespace bufferqueue::detail
