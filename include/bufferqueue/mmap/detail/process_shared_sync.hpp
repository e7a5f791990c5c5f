// Internal: synchronization between processes through memory they all map (the shared header of a
// process-shared topic, shared_topic_header.hpp): a robust mutex and a wake-up event. Both are
// views of bytes inside a mapping; the mapping must outlive them. Part of the file layer: the
// only code besides file_*.cpp that calls the operating system for persistent topics.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace bufferqueue::detail {

/// A robust, process-shared mutex (pthread_mutex_t with PTHREAD_PROCESS_SHARED and
/// PTHREAD_MUTEX_ROBUST) stored in `storage_size` bytes of a shared mapping. When a process dies
/// holding it, the kernel releases it and the next `lock()` says so, so a killed writer blocks the
/// others only until the kernel has reaped it. The holding thread must unlock it (not another one).
/// The layout of pthread_mutex_t is glibc's for this architecture: every process that maps the
/// same bytes must be built for the same one (processes of one host).
class process_shared_mutex {
public:
    /// Bytes reserved for the mutex in a shared layout (pthread_mutex_t fits; checked at compile time).
    static constexpr std::size_t storage_size = 64;

    /// Makes the bytes at `storage` (aligned to 8, `storage_size` long) a new unlocked mutex. Only while no
    /// process uses them. Throws `error(errc::io_error)` naming `name`.
    static void initialize(std::byte* storage, const std::string& name);

    /// A view of the mutex at `storage`, which `initialize` made (here or in another process);
    /// `name` is used in error messages. Never throws.
    process_shared_mutex(std::byte* storage, std::string name) noexcept;

    /// Attempts (each followed by a yield) before `lock` sleeps in the kernel.
    static constexpr int spin_attempts = 16;

    /// How long `lock` waits by default for a holder that is alive but does not let go (a process
    /// stopped or stuck while it holds the mutex, or bytes that say it is held by someone who never
    /// releases it). Far above what a holder needs (an append, an msync of one partition's batch, a
    /// later opener's recovery of a partition), docs/mmap-storage.md ("Process-shared topics").
    static constexpr std::chrono::seconds max_wait{30};

    /// Blocks until this thread holds the mutex (trying `spin_attempts` times first), for at most
    /// `limit`. Returns true when its previous holder died holding it: what it guards may be
    /// half-changed, so repair it before `unlock()`. Throws `error(errc::timed_out)` naming the mutex
    /// when it is still held by another after `limit`, and `error(errc::io_error)` naming the mutex
    /// when it cannot be taken (a holder died and the next one unlocked it without repairing: it is
    /// then unusable until the shared header is made anew; or its bytes are not a mutex).
    bool lock(std::chrono::nanoseconds limit = max_wait);

    /// What is wrong with the bytes at `storage` (`storage_size` of them) as a mutex `initialize`
    /// made: its kind (glibc's `__kind`: robust, process-shared, not recursive, priority-inheriting
    /// or -protecting) is another, or the bytes after the `pthread_mutex_t` are not zero; nothing
    /// when they could be one. Its lock state is not checked: any is one `lock` can handle. Never
    /// throws (allocates the description).
    static std::optional<std::string> check(const std::byte* storage);

    /// Releases the mutex, held by this thread. Never throws.
    void unlock() noexcept;

private:
    std::byte* storage_;
    std::string name_;
};

/// A wake-up event between processes: a 32-bit sequence that `notify` advances and a count of
/// waiters, in `storage_size` bytes of a shared mapping (a futex word, without FUTEX_PRIVATE_FLAG
/// so that it works across processes). `notify` costs an atomic increment and a load when nobody
/// waits, and a futex system call when someone does.
class process_shared_event {
public:
    /// Bytes reserved for the event in a shared layout: the sequence, then the waiter count.
    static constexpr std::size_t storage_size = 8;

    /// Zeroes the event at `storage` (aligned to 4). Only while no process uses it. Never throws.
    static void initialize(std::byte* storage) noexcept;

    /// A view of the event at `storage`. Never throws.
    explicit process_shared_event(std::byte* storage) noexcept : storage_(storage) {}

    /// The current sequence: pass it to `wait` to sleep until the next `notify`. Acquire; never throws.
    std::uint32_t sequence() const noexcept;

    /// Advances the sequence and wakes every waiter of every process. Thread-safe; never throws.
    void notify() noexcept;

    /// Sleeps until the sequence differs from `seen` (at once if it already does), `timeout` passed,
    /// or a spurious wake-up; returns whether the sequence differs from `seen`. Thread-safe; never throws.
    bool wait(std::uint32_t seen, std::chrono::nanoseconds timeout) noexcept;

private:
    std::byte* storage_;
};

}  // namespace bufferqueue::detail
