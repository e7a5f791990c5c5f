// Internal: the type-erased faces of a typed topic that the registry and the handles use (the
// consumer's face, `consumer_base`, is the consumer layer's: consumer/detail/consumer_base.hpp).
#pragma once

#include "bufferqueue/consumer/detail/consumer_base.hpp"
#include "bufferqueue/detail/completion.hpp"
#include "bufferqueue/detail/storage_runner.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/options.hpp"
#include "bufferqueue/stats.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stop_token>
#include <string>
#include <typeindex>
#include <vector>

namespace bufferqueue::detail {

/// A registry entry: any topic, whatever its item type.
class topic_base {
public:
    topic_base(const topic_base&) = delete;
    topic_base& operator=(const topic_base&) = delete;
    virtual ~topic_base() = default;

    virtual const std::string& name() const noexcept = 0;
    virtual std::type_index item_type() const noexcept = 0;
    virtual const std::string& item_type_name() const noexcept = 0;
    /// Aborts waiting operations and rejects new ones. Idempotent, thread-safe.
    virtual void close() noexcept = 0;
    /// A snapshot of the topic's statistics (see `buffer_queue::stats`). Thread-safe; allocates.
    virtual topic_stats stats() = 0;

protected:
    topic_base() = default;
};

/// What a produce attempt that must not wait found.
enum class produce_outcome {
    done,       ///< every item is stored
    no_room,    ///< a bounded topic lacks room now (nothing stored)
    must_wait,  ///< wait mode: room must be waited for (nothing stored)
    closed,     ///< the topic is closed (nothing stored)
};

/// The error a produce completes with for `outcome`: none for `done`, `errc::closed`, and
/// `errc::queue_full` for no room (`must_wait` too: a caller that may wait checks for it first).
/// The one place this mapping is written. Never throws, allocates nothing.
inline boost::system::error_code produce_error(produce_outcome outcome) noexcept
{
    switch (outcome) {
    case produce_outcome::done: return {};
    case produce_outcome::closed: return make_error_code(errc::closed);
    case produce_outcome::no_room:
    case produce_outcome::must_wait: break;
    }
    return make_error_code(errc::queue_full);
}

/// A `produce()` that waits for room. Completes once. `stop` cancels the wait (see
/// `producer::with_cancellation`). Items it owns (`owned_items`) are moved into storage; a span it
/// was given instead is the caller's and is copied.
template <class T>
class produce_operation {
public:
    produce_operation(std::unique_ptr<pending_completion<boost::system::error_code>> completion,
                      std::vector<T> owned_items, std::span<const T> items, std::vector<std::uint32_t> partitions,
                      std::stop_token stop = {})
        : completion_(std::move(completion)), owned_items_(std::move(owned_items)),
          items_(owned_items_.empty() ? items : std::span<const T>(owned_items_)), partitions_(std::move(partitions)),
          stop_(std::move(stop))
    {
    }

    std::span<const T> items() const noexcept { return items_; }
    /// True when the operation owns its items, so storage may move them in.
    bool movable() const noexcept { return !owned_items_.empty(); }
    const std::uint32_t* partitions() const noexcept { return partitions_.empty() ? nullptr : partitions_.data(); }
    pending_completion<boost::system::error_code>& completion() noexcept { return *completion_; }
    const std::stop_token& stop_token() const noexcept { return stop_; }

private:
    std::unique_ptr<pending_completion<boost::system::error_code>> completion_;
    std::vector<T> owned_items_;
    std::span<const T> items_;
    std::vector<std::uint32_t> partitions_;
    std::stop_token stop_;
};

/// A topic of items `T`, whatever its storage. Every member is thread-safe.
template <class T>
class topic : public topic_base {
public:
    virtual std::uint32_t partition_count() const noexcept = 0;
    virtual const key_selector<T>& partition_key() const noexcept = 0;
    virtual const boost::asio::any_io_executor& executor() const noexcept = 0;
    /// Where asynchronous produces run their storage calls (see `storage_runner`): inline for
    /// storage whose appends never block (memory, a broker's client), on the queue's I/O pool for
    /// blocking storage (mmap: msync, fsync, rename), so they never block an executor thread of the
    /// application. Decided once, when the topic is made (`storage_appends_block`); consumers get
    /// their own (`consumer_base::runner`).
    virtual const storage_runner& runner() const noexcept = 0;

    /// Stores `items` now if possible; `partitions` holds each item's key partition, or is null
    /// for round-robin. `allow_wait` false turns `must_wait` into `no_room`. `movable`: the caller
    /// gives the items up (they are not `const` objects), so storage may move them in; items of
    /// an outcome other than `done` are left as they were.
    virtual produce_outcome produce_now(std::span<const T> items, const std::uint32_t* partitions, bool allow_wait,
                                        bool movable) = 0;
    /// Waits for room (wait mode) and stores the operation's items, then completes it.
    virtual void produce_waiting(std::unique_ptr<produce_operation<T>> operation) = 0;

    /// Creates `count` consumers of a new group, or of a group whose consumers are all closed; their
    /// batches hold items `T`.
    virtual std::vector<std::shared_ptr<consumer_base>> create_consumers(const pull_consumer_options& options,
                                                                         std::size_t count) = 0;
    /// True when some partition holds a position for `group`, or a consumer of it was created.
    virtual bool has_group(const std::string& group) = 0;
    /// See `buffer_queue::remove_group`.
    virtual bool remove_group(const std::string& group) = 0;
};

}  // namespace bufferqueue::detail
