#include "bufferqueue/mmap/detail/process_shared_sync.hpp"

#include "file_system_call.hpp"

#include "bufferqueue/error.hpp"

#include "bufferqueue/detail/message.hpp"

#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstring>
#include <thread>
#include <utility>

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BUFFERQUEUE_TSAN 1
#include <sanitizer/tsan_interface.h>
#endif
#endif
#ifndef BUFFERQUEUE_TSAN
#define BUFFERQUEUE_TSAN 0
#endif

namespace bufferqueue::detail {

static_assert(sizeof(pthread_mutex_t) <= process_shared_mutex::storage_size);
static_assert(alignof(pthread_mutex_t) <= 8);

namespace {

pthread_mutex_t* as_mutex(std::byte* storage) noexcept
{
    return reinterpret_cast<pthread_mutex_t*>(storage);  // NOLINT: the bytes hold a pthread_mutex_t
}

std::atomic_ref<std::uint32_t> word(std::byte* storage, std::size_t index) noexcept
{
    return std::atomic_ref<std::uint32_t>(*(reinterpret_cast<std::uint32_t*>(storage) + index));  // NOLINT
}

// pthread_mutex_timedlock, in waits of at most a second against the realtime clock (the one it
// takes) until `limit` passed on the steady clock: a clock change stretches one wait at most.
int timed_lock(pthread_mutex_t* mutex, std::chrono::nanoseconds limit) noexcept
{
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
        const auto left = deadline - std::chrono::steady_clock::now();
        if (left <= std::chrono::nanoseconds::zero()) {
            return ETIMEDOUT;
        }
        const auto step = std::min<std::chrono::nanoseconds>(left, std::chrono::seconds(1));
        timespec until{};
        ::clock_gettime(CLOCK_REALTIME, &until);
        const long long nanoseconds = until.tv_nsec + step.count() % 1'000'000'000;
        until.tv_sec += static_cast<time_t>(step.count() / 1'000'000'000 + nanoseconds / 1'000'000'000);
        until.tv_nsec = static_cast<long>(nanoseconds % 1'000'000'000);
#if BUFFERQUEUE_TSAN
        // clang 14's ThreadSanitizer records a timedlock only when it returns 0, not EOWNERDEAD (its
        // trylock interceptor records both): the unlock after a dead holder's repair was reported as
        // the unlock of an unlocked mutex (seen in the shared kill loop). Under TSan only, the bounded
        // wait polls trylock every millisecond instead.
        (void)until;
        int result = ::pthread_mutex_trylock(mutex);
        for (const auto step_end = std::chrono::steady_clock::now() + step;
             result == EBUSY && std::chrono::steady_clock::now() < step_end;) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            result = ::pthread_mutex_trylock(mutex);
        }
        if (result == EBUSY) {
            result = ETIMEDOUT;
        }
#else
        const int result = ::pthread_mutex_timedlock(mutex, &until);
#endif
        if (result != ETIMEDOUT) {
            return result;
        }
    }
}

long futex(std::uint32_t* address, int operation, std::uint32_t value, const timespec* timeout) noexcept
{
    return ::syscall(SYS_futex, address, operation, value, timeout, nullptr, 0);
}

}  // namespace

void process_shared_mutex::initialize(std::byte* storage, const std::string& name)
{
    pthread_mutexattr_t attributes;
    int failure = ::pthread_mutexattr_init(&attributes);
    if (failure == 0) {
        failure = ::pthread_mutexattr_setpshared(&attributes, PTHREAD_PROCESS_SHARED);
    }
    if (failure == 0) {
        failure = ::pthread_mutexattr_setrobust(&attributes, PTHREAD_MUTEX_ROBUST);
    }
    if (failure == 0) {
        failure = ::pthread_mutex_init(as_mutex(storage), &attributes);
    }
    ::pthread_mutexattr_destroy(&attributes);
    if (failure != 0) {
        file_system::throw_io_error(detail::format_message("cannot make the process-shared mutex {}", name), failure);
    }
}

process_shared_mutex::process_shared_mutex(std::byte* storage, std::string name) noexcept
    : storage_(storage), name_(std::move(name))
{
}

bool process_shared_mutex::lock(std::chrono::nanoseconds limit)
{
    // A holder keeps the lock for one record at a time (a few hundred nanoseconds) unless it
    // flushes: try a little while before sleeping in the kernel, which costs a futex wait and wake
    // per hand-over between processes.
    int result = EBUSY;
    for (int attempt = 0; attempt < spin_attempts && result == EBUSY; ++attempt) {
        result = ::pthread_mutex_trylock(as_mutex(storage_));
        if (result == EBUSY) {
            std::this_thread::yield();
        }
    }
    if (result == EBUSY) {
        result = timed_lock(as_mutex(storage_), limit);
    }
    if (result == 0) {
        return false;
    }
    if (result == EOWNERDEAD) {
        // The holder died: we hold it now. Mark it usable again; the caller repairs what it guards.
        ::pthread_mutex_consistent(as_mutex(storage_));
        return true;
    }
    if (result == ETIMEDOUT) {
        throw error(errc::timed_out, detail::format_message(
                                         "the process-shared mutex {} is still held by another thread or process "
                                         "after {} ms (a holder that is alive but does not let go, or a damaged "
                                         "shared header)",
                                         name_, std::chrono::duration_cast<std::chrono::milliseconds>(limit).count()));
    }
    file_system::throw_io_error(detail::format_message("cannot lock the process-shared mutex {}", name_), result);
}

std::optional<std::string> process_shared_mutex::check(const std::byte* storage)
{
    pthread_mutex_t made;
    pthread_mutexattr_t attributes;
    ::pthread_mutexattr_init(&attributes);
    ::pthread_mutexattr_setpshared(&attributes, PTHREAD_PROCESS_SHARED);
    ::pthread_mutexattr_setrobust(&attributes, PTHREAD_MUTEX_ROBUST);
    ::pthread_mutex_init(&made, &attributes);
    ::pthread_mutexattr_destroy(&attributes);
    const int expected = made.__data.__kind;
    ::pthread_mutex_destroy(&made);
    // Only the kind, which nothing changes once made: the lock word and the robust list links may be
    // changing in another thread or process holding the mutex.
    int kind = 0;
    std::memcpy(&kind, storage + offsetof(pthread_mutex_t, __data.__kind), sizeof kind);
    if (kind != expected) {
        return detail::format_message("its kind is {}, not {} (a robust process-shared mutex's)", kind, expected);
    }
    for (std::size_t byte = sizeof(pthread_mutex_t); byte < storage_size; ++byte) {
        if (storage[byte] != std::byte{0}) {
            return detail::format_message("byte {} after the pthread_mutex_t is {}, not 0", byte,
                                          std::to_integer<unsigned>(storage[byte]));
        }
    }
    return std::nullopt;
}

void process_shared_mutex::unlock() noexcept
{
    ::pthread_mutex_unlock(as_mutex(storage_));
}

void process_shared_event::initialize(std::byte* storage) noexcept
{
    word(storage, 0).store(0, std::memory_order_relaxed);
    word(storage, 1).store(0, std::memory_order_relaxed);
}

std::uint32_t process_shared_event::sequence() const noexcept
{
    return word(storage_, 0).load(std::memory_order_acquire);
}

void process_shared_event::notify() noexcept
{
    // seq_cst on both sides: either the waiter's registration precedes this load (and it is woken)
    // or this increment precedes its registration (and the futex sees the new sequence).
    word(storage_, 0).fetch_add(1, std::memory_order_seq_cst);
    if (word(storage_, 1).load(std::memory_order_seq_cst) != 0) {
        futex(reinterpret_cast<std::uint32_t*>(storage_), FUTEX_WAKE, INT_MAX, nullptr);  // NOLINT
    }
}

bool process_shared_event::wait(std::uint32_t seen, std::chrono::nanoseconds timeout) noexcept
{
    auto sequence_word = word(storage_, 0);
    auto waiters = word(storage_, 1);
    waiters.fetch_add(1, std::memory_order_seq_cst);
    if (sequence_word.load(std::memory_order_seq_cst) == seen && timeout.count() > 0) {
        const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(timeout);
        const timespec relative{.tv_sec = static_cast<time_t>(seconds.count()),
                                .tv_nsec = static_cast<long>((timeout - seconds).count())};
        futex(reinterpret_cast<std::uint32_t*>(storage_), FUTEX_WAIT, seen, &relative);  // NOLINT
    }
    waiters.fetch_sub(1, std::memory_order_seq_cst);
    return sequence_word.load(std::memory_order_acquire) != seen;
}

}  // namespace bufferqueue::detail
