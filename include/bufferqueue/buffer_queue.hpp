// bufferqueue: the registry that owns every topic.
#pragma once

#include "bufferqueue/detail/config.hpp"

#include "bufferqueue/detail/topic.hpp"
#include "bufferqueue/detail/type_name.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/memory_topic.hpp"
#include "bufferqueue/mmap_topic.hpp"
#include "bufferqueue/options.hpp"
#include "bufferqueue/producer.hpp"
#include "bufferqueue/pull_consumer.hpp"
#include <boost/asio/thread_pool.hpp>

#include <cstddef>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <typeindex>
#include <vector>

namespace bufferqueue {

/// The registry: owns every topic, hands out producers and creates consumer groups. Each
/// (item type, topic name) pair is an independent buffer; one name may be registered once per item
/// type. Producers and consumers keep their topic alive, so they never dangle, but once the queue is
/// closed or destroyed they only report `errc::closed`.
///
/// Thread-safety: every member function is thread-safe. Registration takes a reader/writer lock;
/// the produce and consume paths never touch it.
///
/// Threads: with the first persistent topic the queue starts a small pool of its own (two threads)
/// where asynchronous `produce`, `consume` and `commit` on persistent topics do their blocking file
/// I/O, so they never block an executor thread of the application; completions still run on the
/// handler's executor. Destroying the queue joins that pool.
class buffer_queue {
public:
    using executor_type = boost::asio::any_io_executor;

    /// `executor` runs completions whose handler has no associated executor of its own.
    explicit buffer_queue(executor_type executor);

    buffer_queue(const buffer_queue&) = delete;
    buffer_queue& operator=(const buffer_queue&) = delete;

    /// Closes every topic (see `close`).
    ~buffer_queue();

    /// Registers an in-memory topic. Throws `bufferqueue::error`: `errc::invalid_argument` naming the
    /// option at fault, `errc::topic_exists` when (T, name) is registered, `errc::closed`. Allocates.
    template <class T>
    void add_topic(memory_topic_options<T> options)
    {
        add(detail::make_memory_topic<T>(std::move(options), executor_));
    }

    /// Registers a persistent topic stored under `options.data_directory`, recovering what a previous
    /// run left there. Throws `bufferqueue::error`: `errc::invalid_argument` naming the option at fault,
    /// `errc::corrupt_data` naming the file and offset, `errc::io_error` (also when another queue, in
    /// this process or another, has the topic folder open), `errc::topic_exists`, `errc::closed`.
    /// Does file I/O: call it at start-up, not from a latency-sensitive executor thread.
    template <class T>
    void add_topic(mmap_topic_options<T> options)
    {
        // Checked before the folder is locked, so a duplicate is `topic_exists`, not a lock conflict.
        require_unregistered(options.name, typeid(T), detail::readable_type_name<T>());
        add(detail::make_mmap_topic<T>(std::move(options), executor_, blocking_executor()));
    }

    /// A producer for the topic (T, name). Throws `bufferqueue::error`: `errc::no_such_topic`, or
    /// `errc::type_mismatch` (the message lists the item types the name is registered for).
    template <class T>
    bufferqueue::producer<T> producer(std::string_view topic) const
    {
        return bufferqueue::producer<T>(find<T>(topic));
    }

    /// Creates consumer group `options.group` on `options.topic` with `count` consumers, spreading the
    /// partitions evenly and contiguously (5 partitions, 2 consumers: {0,1,2} and {3,4}). A new group
    /// starts at the topic's logical earliest position. Throws `bufferqueue::error`:
    /// `errc::too_many_consumers` (count 0 or above the partition count), `errc::group_exists`,
    /// `errc::invalid_argument` (empty group, batch_size 0), `errc::no_such_topic`,
    /// `errc::type_mismatch`, `errc::closed`.
    template <class T>
    std::vector<pull_consumer<T>> create_pull_consumers(const pull_consumer_options& options, std::size_t count)
    {
        validate(options);
        std::vector<pull_consumer<T>> consumers;
        for (auto& state : find<T>(options.topic)->create_consumers(options, count)) {
            consumers.emplace_back(std::move(state));
        }
        return consumers;
    }

    /// Creates a group with a single consumer that owns every partition.
    template <class T>
    pull_consumer<T> create_pull_consumer(const pull_consumer_options& options)
    {
        return std::move(create_pull_consumers<T>(options, 1).front());
    }

    /// Closes every topic: waiting `consume()` and `produce()` operations complete with
    /// `boost::asio::error::operation_aborted`, later calls fail with `errc::closed`. Idempotent.
    void close() noexcept;

    /// True once `close()` ran.
    bool is_closed() const noexcept;

    /// The executor given at construction.
    executor_type get_executor() const noexcept { return executor_; }

private:
    void add(std::shared_ptr<detail::topic_base> topic);
    boost::asio::any_io_executor blocking_executor();
    void require_unregistered(const std::string& topic, std::type_index type, const std::string& type_name) const;
    std::shared_ptr<detail::topic_base> find(std::string_view topic, std::type_index type,
                                             std::string_view type_name) const;
    static void validate(const pull_consumer_options& options);

    template <class T>
    std::shared_ptr<detail::topic<T>> find(std::string_view topic) const
    {
        return std::static_pointer_cast<detail::topic<T>>(find(topic, typeid(T), detail::readable_type_name<T>()));
    }

    executor_type executor_;
    mutable std::shared_mutex mutex_;
    std::map<std::string, std::vector<std::shared_ptr<detail::topic_base>>, std::less<>> topics_;  // by name
    bool closed_ = false;                                                                          // guarded by mutex_
    std::unique_ptr<boost::asio::thread_pool> blocking_pool_;  // made with the first persistent topic; mutex_
};

}  // namespace bufferqueue
