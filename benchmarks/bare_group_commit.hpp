// The ceiling of `immediate` across processes on this machine (issue 27, target 27b): a bare group
// commit over the same preallocated mapping and msync (the library's file layer) as bench_shared's
// floor, without the library's topic, log format, checksums, robust locks or recovery. Processes
// append 64-byte records into one shared mapping under a spinning lock and wait until an msync
// covers theirs. One msync is in flight at a time, led by the first waiter that finds none: it
// gathers first (for at most `gather`, until as many records as there are processes are written
// past the last msync), as
// the library's leaders do, then msyncs everything written so far. A protocol that puts each
// producer to sleep until its record is durable does no less work per record, so bench_shared
// compares the library's four-process row with this one as well as with the floor.
#pragma once

#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/process_shared_sync.hpp"

#include <sched.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <stdexcept>

namespace bufferqueue::bench {

/// The state of a bare group commit, shared by the processes forked after `create_shared`. Every
/// member function is safe from any thread of any of them; offsets count bytes ever written.
class bare_group_commit {
public:
    /// A bare_group_commit in a fresh shared anonymous mapping, which children forked later inherit.
    /// Never unmapped: a benchmark makes one per run.
    static bare_group_commit* create_shared()
    {
        void* memory =
            ::mmap(nullptr, sizeof(bare_group_commit), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (memory == MAP_FAILED) {
            throw std::runtime_error("mmap of the bare group commit's state failed");
        }
        return new (memory) bare_group_commit();
    }

    /// Appends `length` bytes (`region`'s size a multiple of it) and returns once an msync covered
    /// them. `writers`: the processes appending, each one record at a time.
    void append_durably(const detail::mapped_region& region, const void* bytes, std::size_t length, std::size_t writers,
                        std::chrono::microseconds gather)
    {
        const std::uint64_t end = append(region, bytes, length);
        detail::process_shared_event flushed(flushed_event_);
        while (committed_.load(std::memory_order_acquire) < end) {
            const std::uint32_t seen = flushed.sequence();
            std::uint32_t idle = 0;
            if (in_flight_.compare_exchange_strong(idle, 1, std::memory_order_acq_rel)) {
                lead(region, writers * length, gather);
            } else if (committed_.load(std::memory_order_acquire) < end) {
                flushed.wait(seen, std::chrono::milliseconds(2));
            }
        }
    }

private:
    bare_group_commit() noexcept
    {
        detail::process_shared_event::initialize(flushed_event_);
        detail::process_shared_event::initialize(written_event_);
    }

    std::uint64_t append(const detail::mapped_region& region, const void* bytes, std::size_t length)
    {
        std::uint32_t unlocked = 0;
        while (!lock_.compare_exchange_weak(unlocked, 1, std::memory_order_acquire)) {
            unlocked = 0;
            ::sched_yield();
        }
        const std::uint64_t position = written_.load(std::memory_order_relaxed);
        std::memcpy(region.data() + position % region.size(), bytes, length);
        written_.store(position + length, std::memory_order_release);
        lock_.store(0, std::memory_order_release);
        if (gathering_.load(std::memory_order_seq_cst) != 0) {
            detail::process_shared_event(written_event_).notify();
        }
        return position + length;
    }

    // The leader: gathers, msyncs [committed, written) and wakes the waiters.
    void lead(const detail::mapped_region& region, std::size_t wanted, std::chrono::microseconds gather)
    {
        const std::uint64_t from = committed_.load(std::memory_order_acquire);
        detail::process_shared_event written(written_event_);
        gathering_.store(1, std::memory_order_seq_cst);
        const auto deadline = std::chrono::steady_clock::now() + gather;
        for (;;) {
            const std::uint32_t seen = written.sequence();
            const auto now = std::chrono::steady_clock::now();
            if (written_.load(std::memory_order_acquire) >= from + wanted || now >= deadline) {
                break;
            }
            written.wait(seen, deadline - now);
        }
        gathering_.store(0, std::memory_order_seq_cst);
        const std::uint64_t to = written_.load(std::memory_order_acquire);
        const std::size_t size = region.size();
        const std::size_t first = from % size;
        if (to - from > size - first) {  // the range wraps: two pieces
            region.flush(first, size - first);
            region.flush(0, (to - from) - (size - first));
        } else {
            region.flush(first, to - from);
        }
        committed_.store(to, std::memory_order_release);
        in_flight_.store(0, std::memory_order_release);
        detail::process_shared_event(flushed_event_).notify();
    }

    alignas(64) std::atomic<std::uint32_t> lock_{0};
    std::atomic<std::uint64_t> written_{0};                // guarded by lock_ for writers
    alignas(64) std::atomic<std::uint64_t> committed_{0};  // bytes an msync covered
    std::atomic<std::uint32_t> in_flight_{0};              // 1 while a leader gathers or msyncs
    std::atomic<std::uint32_t> gathering_{0};              // 1 while a leader gathers
    alignas(64) std::byte flushed_event_[detail::process_shared_event::storage_size]{};  // after each msync
    alignas(64) std::byte written_event_[detail::process_shared_event::storage_size]{};  // per record while gathering
};

}  // namespace bufferqueue::bench
