// A third storage backend written outside the library, using only its public headers: the proof
// that the storage extension point is closed (docs/backends.md walks through it). Records live in
// a mutex-guarded deque per partition; an outside writer (`test_backend_log::publish`, standing for
// a broker or another process) can append to a partition without a producer and wakes its waiting
// consumers through the partition's `partition_waker`.
#pragma once

#include "bufferqueue/error.hpp"
#include "bufferqueue/options.hpp"
#include "bufferqueue/partition_key.hpp"
#include "bufferqueue/storage/partition_waker.hpp"
#include "bufferqueue/storage/storage.hpp"
#include "bufferqueue/topic/option_checks.hpp"
#include "bufferqueue/topic/partitioned_topic.hpp"
#include "bufferqueue/topic/topic_context.hpp"
#include "storage/test_backend/test_backend_acknowledger.hpp"
#include "storage/test_backend/test_backend_membership.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace bufferqueue_test_backend {

template <class T>
class test_backend_partition;

/// The outside system a test backend topic reads from: an outside writer appends to a partition of
/// an attached topic with `publish`, from any thread, without a producer. Thread-safe.
template <class T>
class test_backend_log {
public:
    /// Appends `items` to partition `partition` of the attached topic, as records that were never
    /// admitted by the topic (they hold no bounded capacity), and wakes the partition's waiting
    /// consumers. Returns false when no open partition `partition` is attached. Allocates.
    bool publish(std::size_t partition, std::span<const T> items)
    {
        std::lock_guard lock(mutex_);  // keeps the partition (and the waker's target) alive
        const auto found = partitions_.find(partition);
        return found != partitions_.end() && found->second->publish(items);
    }

    /// The thread that last appended to partition `partition` through the topic (default id when
    /// none did), to see where a blocking partition's calls run.
    std::thread::id last_append_thread(std::size_t partition) const
    {
        std::lock_guard lock(mutex_);
        const auto found = partitions_.find(partition);
        return found == partitions_.end() ? std::thread::id() : found->second->last_append_thread();
    }

    /// The thread that last pulled from partition `partition` (default id when none did).
    std::thread::id last_pull_thread(std::size_t partition) const
    {
        std::lock_guard lock(mutex_);
        const auto found = partitions_.find(partition);
        return found == partitions_.end() ? std::thread::id() : found->second->last_pull_thread();
    }

    /// From now on, pulls from the attached partitions wait until `resume_pulls` (a storage whose
    /// reads hang, as a broker's do in an outage), holding the thread that called them.
    void stall_pulls()
    {
        std::lock_guard lock(stall_mutex_);
        stalled_ = true;
    }

    /// Ends `stall_pulls`: the waiting pulls go on.
    void resume_pulls()
    {
        {
            std::lock_guard lock(stall_mutex_);
            stalled_ = false;
        }
        resumed_.notify_all();
    }

    /// Pulls waiting in `stall_pulls` now.
    std::size_t stalled_pulls() const
    {
        std::lock_guard lock(stall_mutex_);
        return stalled_pulls_;
    }

    /// How many partitions are attached now.
    std::size_t attached() const
    {
        std::lock_guard lock(mutex_);
        return partitions_.size();
    }

private:
    friend class test_backend_partition<T>;

    void attach(std::size_t partition, test_backend_partition<T>& storage)
    {
        std::lock_guard lock(mutex_);
        partitions_[partition] = &storage;
    }

    void detach(std::size_t partition, const test_backend_partition<T>& storage) noexcept
    {
        std::lock_guard lock(mutex_);
        if (const auto found = partitions_.find(partition); found != partitions_.end() && found->second == &storage) {
            partitions_.erase(found);
        }
    }

    // Called by a partition's pull, holding none of its locks.
    void wait_while_stalled()
    {
        std::unique_lock lock(stall_mutex_);
        ++stalled_pulls_;
        resumed_.wait(lock, [this] { return !stalled_; });
        --stalled_pulls_;
    }

    mutable std::mutex mutex_;
    std::map<std::size_t, test_backend_partition<T>*> partitions_;  // guarded by mutex_
    mutable std::mutex stall_mutex_;
    std::condition_variable resumed_;
    bool stalled_ = false;           // guarded by stall_mutex_
    std::size_t stalled_pulls_ = 0;  // guarded by stall_mutex_: pulls waiting in wait_while_stalled
};

/// A storage partition (`bufferqueue::storage_partition`) over a std::deque guarded by a mutex.
/// Offsets count items from 0. A record stays until every group has committed past it; a new group
/// starts at the oldest record still held. Every member is thread-safe as the concept requires; the
/// statistics members are lock-free.
template <class T>
class test_backend_partition {
public:
    /// A group's progress. `batch` holds the latest pull's items (so its span stays valid whatever
    /// happens to the deque) and belongs to the one consumer using the cursor.
    struct cursor {
        std::string group;
        std::atomic<std::uint64_t> committed{0};
        std::vector<T> batch;
    };

    /// `log`, when set, lets an outside writer reach this partition as its partition `index`.
    test_backend_partition(std::shared_ptr<test_backend_log<T>> log, std::size_t index)
        : log_(std::move(log)), index_(index)
    {
        if (log_) {
            log_->attach(index_, *this);
        }
    }

    test_backend_partition(const test_backend_partition&) = delete;
    test_backend_partition& operator=(const test_backend_partition&) = delete;

    ~test_backend_partition()
    {
        if (log_) {
            log_->detach(index_, *this);
        }
    }

    void append(const bufferqueue::item_source<T>& source, std::size_t& appended)
    {
        last_append_thread_.store(std::this_thread::get_id(), std::memory_order_relaxed);
        std::lock_guard lock(mutex_);
        if (closed_) {
            throw bufferqueue::error(bufferqueue::errc::closed, "test backend partition is closed");
        }
        try {
            for (; appended < source.count; ++appended) {
                records_.push_back(record{source[appended], true});
            }
        } catch (...) {
            publish_end();
            throw;
        }
        publish_end();
    }

    cursor& open_cursor(std::string_view group)
    {
        std::lock_guard lock(mutex_);
        for (cursor& existing : cursors_) {
            if (existing.group == group) {
                return existing;  // opened again: resumes from its committed position
            }
        }
        cursor& added = cursors_.emplace_back();
        added.group = std::string(group);
        added.committed.store(base_, std::memory_order_release);
        return added;
    }

    bool has_group(std::string_view group) const
    {
        std::lock_guard lock(mutex_);
        return std::any_of(cursors_.begin(), cursors_.end(),
                           [group](const cursor& each) { return each.group == group; });
    }

    std::uint64_t remove_group(std::string_view group)
    {
        std::lock_guard lock(mutex_);
        const auto found =
            std::find_if(cursors_.begin(), cursors_.end(), [group](const cursor& each) { return each.group == group; });
        if (found == cursors_.end()) {
            return 0;
        }
        cursors_.erase(found);
        return trim();
    }

    bufferqueue::pull_result<T> pull(cursor& reader, std::size_t max_items)
    {
        last_pull_thread_.store(std::this_thread::get_id(), std::memory_order_relaxed);
        if (log_) {
            log_->wait_while_stalled();
        }
        std::lock_guard lock(mutex_);
        const std::uint64_t from = reader.committed.load(std::memory_order_relaxed);
        const std::uint64_t end = base_ + records_.size();
        if (closed_ || from >= end) {
            return {{}, from};
        }
        const auto first = static_cast<std::size_t>(from - base_);
        const auto count = static_cast<std::size_t>(std::min<std::uint64_t>(max_items, end - from));
        reader.batch.clear();
        for (std::size_t index = first; index < first + count; ++index) {
            reader.batch.push_back(records_[index].item);
        }
        return {std::span<const T>(reader.batch), from + count};
    }

    std::uint64_t commit(cursor& reader, std::uint64_t next_offset)
    {
        std::lock_guard lock(mutex_);
        reader.committed.store(next_offset, std::memory_order_release);
        return trim();
    }

    void release_batch(cursor&) noexcept {}  // the batch lives in the cursor until the next pull

    bool has_data(const cursor& reader) const noexcept
    {
        return end_.load(std::memory_order_acquire) > reader.committed.load(std::memory_order_acquire);
    }

    void close() noexcept
    {
        std::lock_guard lock(mutex_);
        closed_ = true;
    }

    /// Called once by the topic, when the partition joins it.
    void bind_waker(bufferqueue::partition_waker waker) noexcept
    {
        std::lock_guard lock(mutex_);
        waker_ = waker;
    }

    // The statistics (bufferqueue::storage_partition_statistics).
    std::uint64_t end_items() const noexcept { return end_.load(std::memory_order_acquire); }
    std::uint64_t earliest_items() const noexcept { return earliest_.load(std::memory_order_acquire); }
    std::uint64_t committed_items(const cursor& reader) const noexcept
    {
        return reader.committed.load(std::memory_order_acquire);
    }

    std::thread::id last_append_thread() const noexcept { return last_append_thread_.load(std::memory_order_relaxed); }
    std::thread::id last_pull_thread() const noexcept { return last_pull_thread_.load(std::memory_order_relaxed); }

private:
    friend class test_backend_log<T>;

    struct record {
        T item;
        bool admitted = false;  // appended through `append` (holds bounded capacity), not `publish`
    };

    // The outside writer's append; false once closed.
    bool publish(std::span<const T> items)
    {
        bufferqueue::partition_waker waker;
        {
            std::lock_guard lock(mutex_);
            if (closed_) {
                return false;
            }
            try {
                for (const T& item : items) {
                    records_.push_back(record{item, false});
                }
            } catch (...) {
                publish_end();
                throw;
            }
            publish_end();
            waker = waker_;
        }
        waker.notify();  // after the records are visible to has_data and pull
        return true;
    }

    // With mutex_ held.
    void publish_end() noexcept { end_.store(base_ + records_.size(), std::memory_order_release); }

    // Drops the records every group has committed past; returns how many of them were admitted.
    // With mutex_ held.
    std::uint64_t trim()
    {
        if (cursors_.empty()) {
            return 0;  // nobody has read anything yet: everything stays held
        }
        std::uint64_t minimum = std::numeric_limits<std::uint64_t>::max();
        for (const cursor& each : cursors_) {
            minimum = std::min(minimum, each.committed.load(std::memory_order_relaxed));
        }
        std::uint64_t released = 0;
        while (base_ < minimum && !records_.empty()) {
            released += records_.front().admitted ? 1 : 0;
            records_.pop_front();
            ++base_;
        }
        earliest_.store(base_, std::memory_order_release);
        return released;
    }

    const std::shared_ptr<test_backend_log<T>> log_;
    const std::size_t index_;

    mutable std::mutex mutex_;
    std::deque<record> records_;              // guarded by mutex_
    std::uint64_t base_ = 0;                  // offset of records_.front(); guarded by mutex_
    std::list<cursor> cursors_;               // guarded by mutex_; stable addresses
    bool closed_ = false;                     // guarded by mutex_
    bufferqueue::partition_waker waker_;      // guarded by mutex_
    std::atomic<std::uint64_t> end_{0};       // base_ + records_.size(), published after every append
    std::atomic<std::uint64_t> earliest_{0};  // base_, for earliest_items()
    std::atomic<std::thread::id> last_append_thread_{};
    std::atomic<std::thread::id> last_pull_thread_{};
};

/// The same partition, declared blocking (as a backend doing network I/O would be): its topic's
/// asynchronous operations call it on the queue's blocking pool.
template <class T>
class test_backend_blocking_partition final : public test_backend_partition<T> {
public:
    using test_backend_partition<T>::test_backend_partition;
};

/// The same partition, declared as storage behind a network client (as Kafka's is): blocking, but
/// its appends only hand items over (`blocking_appends = false`: produces call it inline), and its
/// topic's reads and commits run on a pool of two threads of its own (`own_pool_threads`).
template <class T>
class test_backend_network_partition final : public test_backend_partition<T> {
public:
    using test_backend_partition<T>::test_backend_partition;
};

/// The same partition behind a broker that acknowledges appends later (`bufferqueue::
/// acknowledging_partition`): each append is stored at once (readable at once, in order) and its
/// acknowledgement comes from `acknowledger`'s thread, `delay` later; an awaited produce completes
/// then. The plain `append` (`try_produce`) hands items over the same way without a listener.
/// Both throw `errc::queue_full` when the acknowledger's send queue is full (nothing is stored).
template <class T>
class test_backend_acknowledging_partition final : public test_backend_partition<T> {
public:
    test_backend_acknowledging_partition(std::shared_ptr<test_backend_log<T>> log, std::size_t index, std::string topic,
                                         std::shared_ptr<test_backend_acknowledger> acknowledger)
        : test_backend_partition<T>(std::move(log), index), topic_(std::move(topic)), index_(index),
          acknowledger_(std::move(acknowledger))
    {
    }

    void append(const bufferqueue::item_source<T>& source, std::size_t& appended) { take(source, appended, nullptr); }

    void append_acknowledged(const bufferqueue::item_source<T>& source, std::size_t& handed,
                             bufferqueue::append_listener& listener)
    {
        take(source, handed, &listener);
    }

    /// Closes the acknowledger first: the appends still waiting are answered with `errc::closed`.
    void close() noexcept
    {
        acknowledger_->close();
        test_backend_partition<T>::close();
    }

private:
    void take(const bufferqueue::item_source<T>& source, std::size_t& taken, bufferqueue::append_listener* listener)
    {
        acknowledger_->reserve(topic_, index_, source.count);
        try {
            test_backend_partition<T>::append(source, taken);
        } catch (...) {
            acknowledger_->enqueue(source.count, taken, listener);
            throw;
        }
        acknowledger_->enqueue(source.count, taken, listener);
    }

    const std::string topic_;
    const std::size_t index_;
    const std::shared_ptr<test_backend_acknowledger> acknowledger_;
};

}  // namespace bufferqueue_test_backend

template <class T>
struct bufferqueue::storage_traits<bufferqueue_test_backend::test_backend_acknowledging_partition<T>> {
    static constexpr bool blocking = false;
    static constexpr std::string_view backend_name = "test-acknowledging";
};

template <class T>
struct bufferqueue::storage_traits<bufferqueue_test_backend::test_backend_partition<T>> {
    static constexpr bool blocking = false;
    static constexpr std::string_view backend_name = "test";
};

template <class T>
struct bufferqueue::storage_traits<bufferqueue_test_backend::test_backend_blocking_partition<T>> {
    static constexpr bool blocking = true;
    static constexpr std::string_view backend_name = "test-blocking";
};

template <class T>
struct bufferqueue::storage_traits<bufferqueue_test_backend::test_backend_network_partition<T>> {
    static constexpr bool blocking = true;
    static constexpr bool blocking_appends = false;
    static constexpr std::size_t own_pool_threads = 2;
    static constexpr std::string_view backend_name = "test-network";
};

namespace bufferqueue_test_backend {

static_assert(bufferqueue::storage_partition<test_backend_partition<int>, int>);
static_assert(bufferqueue::wakeable_partition<test_backend_partition<int>>);
static_assert(bufferqueue::storage_partition_statistics<test_backend_partition<int>>);
static_assert(!bufferqueue::storage_traits<test_backend_partition<int>>::blocking);
static_assert(bufferqueue::storage_partition<test_backend_blocking_partition<int>, int>);
static_assert(bufferqueue::storage_traits<test_backend_blocking_partition<int>>::blocking);
static_assert(!bufferqueue::storage_appends_block<test_backend_network_partition<int>>());
static_assert(bufferqueue::storage_own_pool_threads<test_backend_network_partition<int>>() == 2);
static_assert(bufferqueue::storage_appends_block<test_backend_blocking_partition<int>>());
static_assert(bufferqueue::storage_own_pool_threads<test_backend_blocking_partition<int>>() == 0);
static_assert(!bufferqueue::acknowledging_partition<test_backend_partition<int>, int>);
static_assert(bufferqueue::storage_partition<test_backend_acknowledging_partition<int>, int>);
static_assert(bufferqueue::acknowledging_partition<test_backend_acknowledging_partition<int>, int>);

/// Registration options of a test backend topic (`queue.add_topic(test_backend_topic_options<T>{...})`).
template <class T>
struct test_backend_topic_options {
    /// Topic name; not empty or only whitespace.
    std::string name{};
    /// Number of partitions, 1 to `bufferqueue::max_partitions`.
    std::size_t partitions = 1;
    /// Topic-wide limit on admitted items not yet committed by every group; empty: unbounded.
    std::optional<std::size_t> bounded_capacity{};
    /// What `produce` does while the topic is full.
    bufferqueue::full_mode full_mode = bufferqueue::full_mode::wait;
    /// Optional key routing; round-robin when empty.
    bufferqueue::key_selector<T> partition_key{};
    /// When set, an outside writer reaches the topic's partitions through it.
    std::shared_ptr<test_backend_log<T>> log{};
    /// Builds the topic over `test_backend_blocking_partition`, whose calls the handles make on the
    /// queue's blocking pool.
    bool blocking = false;
    /// Builds the topic over `test_backend_network_partition` instead (blocking reads and commits on
    /// a pool of the topic's own, appends inline); takes precedence over `blocking`.
    bool network = false;
    /// When set, the topic's partitions acknowledge appends through it
    /// (`test_backend_acknowledging_partition`; `blocking` is then ignored). One per topic.
    std::shared_ptr<test_backend_acknowledger> acknowledger{};
    /// When set, the topic's groups are assigned partitions by it (outside membership: consumers
    /// start with none). One per topic, made for its partition count: `test_backend_membership`, or any
    /// other (the process-shared membership of persistent topics is tested through it).
    std::shared_ptr<bufferqueue::group_membership> membership{};
};

namespace implementation {

template <class Partition, class T>
bufferqueue::registered_topic make_test_backend_topic(test_backend_topic_options<T> options,
                                                      bufferqueue::topic_context& context)
{
    bufferqueue::topic_partitions<Partition> partitions;
    partitions.reserve(options.partitions);
    for (std::size_t partition = 0; partition < options.partitions; ++partition) {
        if constexpr (std::is_same_v<Partition, test_backend_acknowledging_partition<T>>) {
            partitions.emplace_back(options.log, partition, options.name, options.acknowledger);
        } else {
            partitions.emplace_back(options.log, partition);
        }
    }
    return bufferqueue::make_partitioned_topic(context,
                                               bufferqueue::topic_settings<T>{
                                                   .name = std::move(options.name),
                                                   .partition_key = std::move(options.partition_key),
                                                   .bounded_capacity = options.bounded_capacity,
                                                   .full_mode = options.full_mode,
                                                   .membership = options.membership,
                                               },
                                               std::move(partitions));
}

}  // namespace implementation

/// The backend's customization point, found by argument-dependent lookup from
/// `bufferqueue::buffer_queue::add_topic`. Throws `bufferqueue::error` `errc::invalid_argument`
/// naming the option at fault.
template <class T>
bufferqueue::registered_topic make_topic(test_backend_topic_options<T> options, bufferqueue::topic_context& context)
{
    constexpr std::string_view kind = "test backend";
    bufferqueue::require_topic_name(kind, options.name);
    bufferqueue::require_partition_count(kind, options.name, options.partitions);
    bufferqueue::require_bounds(kind, options.name, options.bounded_capacity, options.full_mode);
    if (options.acknowledger) {
        return implementation::make_test_backend_topic<test_backend_acknowledging_partition<T>>(std::move(options),
                                                                                                context);
    }
    if (options.network) {
        return implementation::make_test_backend_topic<test_backend_network_partition<T>>(std::move(options), context);
    }
    if (options.blocking) {
        return implementation::make_test_backend_topic<test_backend_blocking_partition<T>>(std::move(options), context);
    }
    return implementation::make_test_backend_topic<test_backend_partition<T>>(std::move(options), context);
}

}  // namespace bufferqueue_test_backend
