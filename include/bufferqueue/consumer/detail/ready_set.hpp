// Internal: which of a consumer's many partitions may hold data - marked through the partitions'
// signals when records arrive, unmarked by the ring scan when it finds a partition empty - so a scan
// over thousands of idle partitions costs about what a scan over a few costs.
#pragma once

#include "bufferqueue/detail/partition_signal.hpp"
#include "bufferqueue/detail/process_barrier.hpp"

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace bufferqueue::detail {

/// Marks over the entries 0..size-1 of one assignment set: an unmarked entry was found empty by the
/// scan and has a watcher registered with its partition's signal, which marks it again when the
/// next records arrive; every other entry is marked. So the scan pulls only marked entries and
/// still gives every readable partition one pull per rotation.
///
/// The hand-over is the signal's own (see `partition_signal`): `settle` registers the watchers of
/// the entries found empty, issues one `heavy_fence` for all of them, then unmarks each and
/// re-checks it, marking it again when records arrived meanwhile. Until then an entry found empty
/// stays marked (pulled again, never missed). So between scans an unmarked entry is empty or about
/// to be marked by a producer's notify.
///
/// Thread-safety: `mark` (and the watchers) from any thread; everything else only by the thread that
/// owns the consumer's operation. Allocates in the constructor only (and a signal's waiter list may
/// grow when a watcher registers; if it cannot, the entry stays marked). The signals must outlive
/// the set; the destructor unregisters.
class ready_set {
public:
    /// Sets with this many entries or more get one. Measured in `bench_memory`'s `scale/` rows (quiet,
    /// 7 interleaved rounds): with one busy partition, a plain scan of 15 costs 1.6x the 4-partition
    /// time and one of 64 costs 4.5x, while the marks keep 64 at 0.9x; with every partition busy the
    /// marks cost 8% (16) to 24% (255) more than a plain scan - the price of a flat cost when most
    /// partitions idle (docs/benchmarks.md, issue 28 target 3).
    static constexpr std::size_t threshold = 16;
    static constexpr std::size_t none = static_cast<std::size_t>(-1);

    /// Entry `index` waits on `signals[index]`; all start marked. Allocates.
    explicit ready_set(const std::vector<partition_signal*>& signals)
        : size_(signals.size()), words_count_((size_ + 63) / 64), summary_count_((words_count_ + 63) / 64),
          words_(std::make_unique<std::atomic<std::uint64_t>[]>(words_count_)),
          summary_(std::make_unique<std::atomic<std::uint64_t>[]>(summary_count_)),
          watchers_(std::make_unique<watcher[]>(size_))
    {
        for (std::size_t index = 0; index < size_; ++index) {
            watchers_[index].set_ = this;
            watchers_[index].index_ = index;
            watchers_[index].signal_ = signals[index];
            words_[index / 64].fetch_or(std::uint64_t{1} << (index % 64), std::memory_order_relaxed);
        }
        for (std::size_t word = 0; word < words_count_; ++word) {
            summary_[word / 64].fetch_or(std::uint64_t{1} << (word % 64), std::memory_order_relaxed);
        }
        unsettled_.reserve(size_);
    }

    ready_set(const ready_set&) = delete;
    ready_set& operator=(const ready_set&) = delete;

    ~ready_set()
    {
        for (std::size_t index = 0; index < size_; ++index) {
            watchers_[index].signal_->remove(watchers_[index]);  // no-op when not registered
        }
    }

    /// The first marked entry at or after `from` (< size), else the first marked one before it;
    /// `none` when no entry is marked. Lock-free.
    std::size_t next(std::size_t from) const noexcept
    {
        if (const std::size_t found = first_marked(from); found != none) {
            return found;
        }
        return from == 0 ? none : first_marked(0);
    }

    /// Any thread: entry `index` may hold data.
    void mark(std::size_t index) noexcept
    {
        words_[index / 64].fetch_or(std::uint64_t{1} << (index % 64), std::memory_order_release);
        const std::size_t word = index / 64;
        summary_[word / 64].fetch_or(std::uint64_t{1} << (word % 64), std::memory_order_release);
    }

    /// The scan pulled nothing from entry `index`: it stays marked until the next `settle` that
    /// fences, which unmarks it unless records arrived. Never allocates.
    void found_empty(std::size_t index) noexcept
    {
        watcher& each = watchers_[index];
        if (!each.pending_) {
            each.pending_ = true;
            unsettled_.push_back(index);  // reserved for every entry: never allocates
        }
    }

    /// Ends a scan. Once `settle_after` entries were found empty since the last fence, or when the
    /// scan found nothing (`idle`): registers their watchers, one `heavy_fence`, then unmarks each
    /// that `has_data(index)` does not find records in. So a scan pays the fence at most once per
    /// `settle_after` partitions found empty, and an idle consumer leaves nothing pending.
    template <class HasData>
    void settle(HasData&& has_data, bool idle) noexcept
    {
        if (unsettled_.empty() || (!idle && unsettled_.size() < settle_after)) {
            return;
        }
        std::size_t kept = 0;
        for (const std::size_t index : unsettled_) {
            if (watch(index)) {
                unsettled_[kept++] = index;
            } else {
                watchers_[index].pending_ = false;  // could not register: stays marked
            }
        }
        unsettled_.resize(kept);
        heavy_fence();  // pairs with the producers' light_fence in partition_signal::notify
        for (const std::size_t index : unsettled_) {
            watchers_[index].pending_ = false;
            unmark(index);
            if (has_data(index)) {  // after the unmark: a mark that raced with it is seen here
                mark(index);
            }
        }
        unsettled_.clear();
    }

    /// Entries found empty before a settle fences (see `settle`).
    static constexpr std::size_t settle_after = 32;

private:
    /// Registered with an entry's signal while the entry is unmarked: marks it when records arrive.
    class watcher final : public data_waiter {
    public:
        std::shared_ptr<data_waiter> data_arrived() noexcept override
        {
            registered_.store(false, std::memory_order_release);  // the signal drops its waiters now
            set_->mark(index_);
            return nullptr;  // nothing to resume: the consumer's own waiter does that
        }
        void wake() noexcept override {}
        bool is_parked_consume() const noexcept override { return false; }  // the consumer may not wait

        ready_set* set_ = nullptr;
        std::size_t index_ = 0;
        partition_signal* signal_ = nullptr;
        std::atomic<bool> registered_{false};  // set by `watch`, cleared when the signal calls
        bool pending_ = false;                 // owned by the consumer's thread: in unsettled_
    };

    // Registers entry `index`'s watcher unless it is registered; false when that failed (the
    // signal's waiter list could not grow).
    bool watch(std::size_t index) noexcept
    {
        watcher& each = watchers_[index];
        if (each.registered_.exchange(true, std::memory_order_acq_rel)) {
            return true;
        }
        try {
            each.signal_->add(each);  // a seq_cst registration, paired by the fence in `settle`
            return true;
        } catch (...) {
            each.registered_.store(false, std::memory_order_release);
            return false;
        }
    }

    // Only the consumer's thread unmarks. A summary bit is cleared only with its word empty, and set
    // again when a mark raced with the clear, so a marked entry is always found.
    void unmark(std::size_t index) noexcept
    {
        const std::size_t word = index / 64;
        const std::uint64_t bit = std::uint64_t{1} << (index % 64);
        if ((words_[word].fetch_and(~bit, std::memory_order_acq_rel) & ~bit) != 0) {
            return;
        }
        const std::uint64_t summary_bit = std::uint64_t{1} << (word % 64);
        summary_[word / 64].fetch_and(~summary_bit, std::memory_order_acq_rel);
        if (words_[word].load(std::memory_order_acquire) != 0) {
            summary_[word / 64].fetch_or(summary_bit, std::memory_order_release);
        }
    }

    std::size_t first_marked(std::size_t from) const noexcept
    {
        std::size_t word = from / 64;
        std::uint64_t bits = words_[word].load(std::memory_order_acquire) & (~std::uint64_t{0} << (from % 64));
        if (bits != 0) {
            return word * 64 + static_cast<std::size_t>(std::countr_zero(bits));
        }
        ++word;
        while (word < words_count_) {
            const std::uint64_t summary =
                summary_[word / 64].load(std::memory_order_acquire) & (~std::uint64_t{0} << (word % 64));
            if (summary == 0) {
                word = (word / 64 + 1) * 64;
                continue;
            }
            word = (word / 64) * 64 + static_cast<std::size_t>(std::countr_zero(summary));
            bits = words_[word].load(std::memory_order_acquire);
            if (bits != 0) {
                return word * 64 + static_cast<std::size_t>(std::countr_zero(bits));
            }
            ++word;  // a summary bit left by a mark that raced with an unmark
        }
        return none;
    }

    const std::size_t size_;
    const std::size_t words_count_;
    const std::size_t summary_count_;
    std::unique_ptr<std::atomic<std::uint64_t>[]> words_;    // bit i: entry i is marked
    std::unique_ptr<std::atomic<std::uint64_t>[]> summary_;  // bit w: words_[w] may be non-zero
    std::unique_ptr<watcher[]> watchers_;                    // one per entry
    std::vector<std::size_t> unsettled_;                     // owned by the consumer's thread: unmarked since `settle`
};

}  // namespace bufferqueue::detail
