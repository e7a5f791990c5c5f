// bufferqueue: the registry that owns every topic.
#pragma once

#include "bufferqueue/detail/config.hpp"

#include "bufferqueue/dead_letter.hpp"

#include "bufferqueue/detail/group_counters.hpp"
#include "bufferqueue/detail/io_pool.hpp"
#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/detail/type_name.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/options.hpp"
#include "bufferqueue/producer.hpp"
#include "bufferqueue/pull_consumer.hpp"
#include "bufferqueue/push/detail/push_loop.hpp"
#include "bufferqueue/push/detail/push_registration.hpp"
#include "bufferqueue/push_consumer.hpp"
#include "bufferqueue/stats.hpp"
#include "bufferqueue/topic/detail/topic.hpp"
#include "bufferqueue/topic/topic_context.hpp"

#include <concepts>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeindex>
#include <utility>
#include <vector>

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace bufferqueue {

/// The registry: owns every topic, hands out producers and creates consumer groups. Each
/// (item type, topic name) pair is an independent buffer; one name may be registered once per item
/// type. Producers and consumers keep their topic alive, so they never dangle, but once the queue is
/// closed or destroyed they only report `errc::closed`.
///
/// Thread-safety: every member function is thread-safe. Registration takes a reader/writer lock;
/// the produce and consume paths never touch it.
///
/// Push consumers: `add_push_consumers` / `add_push_consumer` register handlers before `start()`;
/// `start()` runs their loops on the queue's executor and `stop()` ends them (see
/// docs/push-consumers.md).
///
/// Threads: with the first persistent topic the queue starts a small pool of its own (two threads)
/// where asynchronous `produce`, `consume` and `commit` on persistent topics do their blocking file
/// I/O, so they never block an executor thread of the application; completions still run on the
/// handler's executor. Destroying the queue runs the work already handed to that pool and joins it;
/// persistent topics share ownership of the pool, so handles that outlive the queue never reach freed
/// threads: their asynchronous operations then complete with `errc::closed`.
class buffer_queue {
public:
    /// The queue's executor type: where completions run whose handler has no executor of its own.
    using executor_type = boost::asio::any_io_executor;

    /// `executor` runs completions whose handler has no associated executor of its own.
    explicit buffer_queue(executor_type executor);

    /// The same for an `io_context`'s own executor (`io.get_executor()`), which the library converts
    /// to `executor_type` (compiled once, src/buffer_queue.cpp) instead of every file that makes a
    /// queue: that conversion instantiates Asio's property machinery for the executor type.
    template <class IoExecutor>
        requires(std::same_as<std::remove_cvref_t<decltype(std::declval<const IoExecutor&>().context())>,
                              boost::asio::io_context>&&
                     std::same_as<IoExecutor, typename std::remove_cvref_t<decltype(std::declval<const IoExecutor&>()
                                                                                        .context())>::executor_type>)
    explicit buffer_queue(const IoExecutor& executor) : buffer_queue(io_context_executor(executor.context())) {}

    buffer_queue(const buffer_queue&) = delete;
    buffer_queue& operator=(const buffer_queue&) = delete;

    /// Closes every topic (see `close`).
    ~buffer_queue();

    /// Registers a topic of any storage backend: `options` is the backend's options type, for which
    /// argument-dependent lookup finds `make_topic(Options, topic_context&)` (the `topic_options`
    /// concept; see docs/backends.md). `memory_topic_options<T>` (memory/memory_topic.hpp)
    /// registers an in-memory topic; `mmap_topic_options<T>` (mmap/mmap_topic.hpp) a
    /// persistent one stored under `options.data_directory`, recovering what a previous run left
    /// there. Throws `bufferqueue::error`: `errc::invalid_argument` naming the option at fault,
    /// `errc::topic_exists` when (T, name) is registered, `errc::closed`, and what the backend
    /// reports (mmap: `errc::corrupt_data` naming the file and offset, `errc::io_error`, also when
    /// another queue, in this process or another, has the topic folder open). Allocates; a
    /// persistent topic does file I/O: call it at start-up, not from a latency-sensitive executor
    /// thread. Thread-safe.
    template <topic_options Options>
    void add_topic(Options options)
    {
        add(make_topic(std::move(options), *context_));
    }

    /// Refuses, with a readable message, an options type that no backend declares.
    template <class Options>
        requires(!topic_options<Options>)
    void add_topic(Options)
    {
        static_assert(topic_options<Options>,
                      "buffer_queue::add_topic: no `bufferqueue::registered_topic make_topic(Options, "
                      "bufferqueue::topic_context&)` is found for this options type; include the backend's header "
                      "(bufferqueue/memory/memory_topic.hpp, bufferqueue/mmap/mmap_topic.hpp, or "
                      "<bufferqueue/bufferqueue.hpp> for both), or declare make_topic in the namespace of the "
                      "options type (docs/backends.md)");
    }

    /// A producer for the topic (T, name). Throws `bufferqueue::error`: `errc::no_such_topic`, or
    /// `errc::type_mismatch` (the message lists the item types the name is registered for).
    template <class T>
    bufferqueue::producer<T> producer(std::string_view topic) const
    {
        return bufferqueue::producer<T>(find<T>(topic));
    }

    /// Creates consumer group `options.group` on `options.topic` with `count` consumers. Memory and
    /// exclusive mmap topics spread the partitions evenly and contiguously, for good (5 partitions, 2
    /// consumers: {0,1,2} and {3,4}); on process-shared mmap and Kafka topics the shares are neither
    /// fixed nor contiguous: a group protocol assigns and revokes them as the group's live members
    /// (of every process) come and go - on Kafka after this returns; on a process-shared topic before
    /// it returns when the group has no other live member, else as the others let go
    /// (docs/consumer-model.md, "Waiting for the assignment"). A new group
    /// starts at the topic's logical earliest position. A group whose consumers are all closed (or
    /// one known from a persistent topic's disk) is opened again and resumes from its committed
    /// position: uncommitted batches are delivered again. All or nothing: when a partition fails to
    /// create the group (a persistent checkpoint cannot be written), the partitions that created it
    /// remove it again. Throws `bufferqueue::error`: `errc::too_many_consumers` (count 0 or above
    /// the partition count), `errc::group_exists` (a consumer of the group is open),
    /// `errc::invalid_argument` (empty or only-whitespace group, batch_size 0), `errc::io_error`
    /// naming the partition and file, `errc::no_such_topic`, `errc::type_mismatch` (both also for a
    /// `dead_letter_topic` that names no topic of `dead_letter<T>`, naming that option), `errc::closed`.
    template <class T>
    std::vector<pull_consumer<T>> create_pull_consumers(const pull_consumer_options& options, std::size_t count)
    {
        validate(options);
        const detail::letter_producer letters =
            dead_letter_producer<T>(options.topic, options.group, options.dead_letter_topic);
        std::vector<pull_consumer<T>> consumers;
        for (auto& state : find<T>(options.topic)->create_consumers(options, count)) {
            std::shared_ptr<detail::dead_letter_path> path =
                letters ? letter_path(state, letters, options, detail::readable_type_name<T>()) : nullptr;
            consumers.emplace_back(std::move(state), std::move(path));
        }
        return consumers;
    }

    /// Creates a group with a single consumer that owns every partition.
    template <class T>
    pull_consumer<T> create_pull_consumer(const pull_consumer_options& options)
    {
        return std::move(create_pull_consumers<T>(options, 1).front());
    }

    /// Removes consumer group `group` of the topic (T, `topic`): its position stops pinning a bounded
    /// memory topic's capacity (the room only it held comes back) and a persistent topic's
    /// retention, its statistics counters (push failures, dead letters) are forgotten, and on a
    /// persistent topic its checkpoints are deleted - in each partition
    /// atomically (the group folder is renamed to a temporary name, then deleted; a crash in between
    /// leaves a leftover the next open removes). A group created later under the same name is a new
    /// group. Returns false when the topic has no such group (in this process or on disk). Throws
    /// `bufferqueue::error` naming topic and group: `errc::group_in_use` while any consumer of the
    /// group is open (close them first; push consumers: after `stop()` completes),
    /// `errc::io_error` (the message names the partition and file; partitions before it no longer
    /// hold the group, so call it again), `errc::no_such_topic`, `errc::type_mismatch`,
    /// `errc::closed`. Thread-safe; does file I/O on persistent topics. On a Kafka topic it also
    /// moves the group's committed offsets on the brokers back to the earliest records (a group
    /// join: blocks up to the topic's `admin_timeout`; `errc::group_in_use` when members elsewhere
    /// hold partitions, `errc::timed_out` / `errc::io_error` when the brokers do not answer;
    /// docs/kafka.md, "remove_group").
    template <class T>
    bool remove_group(std::string_view topic, std::string_view group)
    {
        const bool removed = find<T>(topic)->remove_group(std::string(group));
        counters_.forget(std::string(topic), detail::readable_type_name<T>(),
                         std::string(group));  // its statistics counters too
        return removed;
    }

    /// A statistics snapshot of the topic (T, `topic`): every partition's end and earliest item
    /// index, every group's committed positions and lag, the produced and consumed counters and
    /// what waits now, in items on every backend (see `topic_stats`, docs/statistics.md). Reads the
    /// storage's statistics without a lock on the produce path (a short lock shared with group
    /// registration, and each partition's waiter lock); allocates only the snapshot. Does no file
    /// I/O on memory and exclusive persistent topics; on a process-shared persistent topic it reads
    /// the checkpoint file of every group of every partition (the groups other processes created
    /// too), so call it off latency-sensitive executors there. A Kafka topic's snapshot asks its brokers: it blocks the
    /// calling thread up to the topic's `admin_timeout`, except on the thread running the topic's io_context, where it
    /// reports the last numbers known (docs/kafka.md, "Statistics"). Throws `bufferqueue::error`:
    /// `errc::no_such_topic`, `errc::type_mismatch` (the message lists the item types the name is
    /// registered for). Works after `close()` too (the last positions). Thread-safe.
    template <class T>
    topic_stats stats(std::string_view topic) const
    {
        topic_stats snapshot = find<T>(topic)->stats();
        counters_.add_to(snapshot);
        return snapshot;
    }

    /// Snapshots of every registered topic, whatever its item type and backend, ordered by topic
    /// name, then item type name (what a metrics exporter scrapes; each carries `topic`,
    /// `item_type` and `backend`). As `stats<T>` otherwise; throws only `std::bad_alloc`.
    /// Thread-safe: the registry's lock is held only to copy the list of topics.
    std::vector<topic_stats> stats() const;

    /// Registers push consumer types (see the `push_consumer` concept), each from its `subscription`
    /// member: creates the group with `concurrency` pull consumers now, so items produced from now on
    /// wait for it, and runs it from `start()`. Default-constructs the consumers: a singleton now, a
    /// per-batch consumer for every batch. Every subscription is checked before any group is created;
    /// throws `bufferqueue::error` naming topic and group: `errc::invalid_argument` (after `start()`,
    /// empty group, batch_size 0, the same topic and group twice), `errc::too_many_consumers`
    /// (concurrency 0 or above the partition count), `errc::no_such_topic`, `errc::type_mismatch`,
    /// `errc::group_exists`, `errc::closed` (after `stop()` or `close()`). Allocates.
    template <push_consumer... Consumers>
    void add_push_consumers()
    {
        add_push_consumer_types<Consumers...>(detail::default_push_factory<Consumers>{}...);
    }

    /// As above, each consumer made by the matching factory (called with no arguments, returning the
    /// consumer by value, `std::unique_ptr` or `std::shared_ptr`): once now for a singleton, for every
    /// batch for a per-batch consumer (a throwing factory is reported like a throwing handler).
    template <push_consumer... Consumers, class... Factories>
        requires(sizeof...(Factories) > 0 && sizeof...(Consumers) == sizeof...(Factories))
    void add_push_consumers(Factories... factories) { add_push_consumer_types<Consumers...>(std::move(factories)...); }

    /// Registers a callable push handler: `handler(batch<T>)` (auto commit) or
    /// `handler(batch<T>, committer&)` (manual commit) returning `boost::asio::awaitable<void>`. `T` is
    /// deduced from a non-generic handler's first parameter unless given. `singleton` shares one copy
    /// of `handler` between the loops; `per_batch` calls a fresh copy for every batch. Throws as
    /// `add_push_consumers`.
    template <class T = detail::deduced_item, class Handler>
    void add_push_consumer(const push_subscription& subscription, Handler handler)
    {
        using item = typename detail::callable_item<T, Handler>::type;
        static_assert(push_handler<Handler, item>,
                      "a push handler must be a copyable callable taking (bufferqueue::batch<T>) or "
                      "(bufferqueue::batch<T>, bufferqueue::committer&) and returning boost::asio::awaitable<void>");
        check_push_subscription<item>(subscription, {});
        detail::push_invoker<item> invoker = detail::make_push_invoker<item>(
            subscription.lifetime, detail::callable_handler_source<item, Handler>{std::move(handler)});
        std::vector<detail::pending_push> pending;
        pending.push_back(detail::make_push_loops<item>(
            find<item>(subscription.topic), subscription, std::move(invoker),
            std::is_invocable_v<Handler&, batch<item>, committer&>, executor_,
            dead_letter_producer<item>(subscription.topic, subscription.group, subscription.dead_letter_topic),
            counters_of<item>(subscription.topic, subscription.group)));
        detail::register_push(*push_, pending);
    }

    /// Starts every registered push loop on the queue's executor (`co_spawn`); returns at once.
    /// Idempotent while started. Throws `bufferqueue::error` `errc::closed` after `stop()` or
    /// `close()`: stopping is final.
    void start();

    /// Stops the push consumers: no loop pulls again, a waiting pull is aborted, running handlers
    /// finish, a dead-letter produce in flight is no longer awaited (its batch stays uncommitted).
    /// Completes (signature `void()`) once every loop has ended; at once when none runs
    /// (also before `start()`, which then stays impossible). No batch is lost: under manual commit an
    /// uncommitted batch stays in the topic for the next run; under auto commit a pulled batch is
    /// handed to its handler. Thread-safe; may be awaited from several places.
    template <class CompletionToken = default_completion_token>
    auto stop(CompletionToken&& token = default_completion_token())
    {
        return boost::asio::async_initiate<CompletionToken, void()>(
            [](auto handler, std::shared_ptr<detail::push_registry> registry, const executor_type& executor) {
                registry->stop(detail::make_pending_completion<>(std::move(handler), executor));
            },
            token, push_, executor_);
    }

    /// Replaces where push loop failures go; an empty function restores `default_push_error_sink`.
    /// Thread-safe; takes effect for the next failure.
    void set_push_error_sink(push_error_sink sink);

    /// Closes every topic: waiting `consume()` and `produce()` operations complete with
    /// `boost::asio::error::operation_aborted`, later calls fail with `errc::closed`. Idempotent.
    void close() noexcept;

    /// True once `close()` ran.
    bool is_closed() const noexcept;

    /// The executor given at construction.
    executor_type get_executor() const noexcept { return executor_; }

private:
    class context;  // the topic_context the queue hands to make_topic (buffer_queue.cpp)

    // `context.get_executor()` as an `executor_type`.
    static executor_type io_context_executor(boost::asio::io_context& context);

    void add(registered_topic made);
    std::shared_ptr<detail::io_pool> blocking_pool();
    std::shared_ptr<detail::io_pool> dedicated_pool(std::size_t threads);
    void require_unregistered(const std::string& topic, std::type_index type, const std::string& type_name) const;
    std::shared_ptr<detail::topic_base> find(std::string_view topic, std::type_index type,
                                             std::string_view type_name) const;
    static void validate(const pull_consumer_options& options);
    // The letter producer of the topic of item type `type` (`type_name`, a `dead_letter<T>`) that
    // `dead_letter_topic` names, or an empty one when that is empty; throws what `find` throws,
    // naming `topic`, `group` and the option.
    detail::letter_producer find_letter_producer(std::string_view topic, std::string_view group,
                                                 std::string_view dead_letter_topic, std::type_index type,
                                                 std::string_view type_name) const;
    // The dead-letter path of the pull consumer `consumer` of items `item_type_name`, whose letters
    // go through `letters`, with its group's counters.
    std::shared_ptr<detail::dead_letter_path> letter_path(std::shared_ptr<detail::consumer_base> consumer,
                                                          const detail::letter_producer& letters,
                                                          const pull_consumer_options& options,
                                                          const std::string& item_type_name);

    // Checks everything about a subscription that can be checked before its group is created.
    // `earlier` lists the (topic, group) pairs registered by the same call. Defined in
    // detail/buffer_queue_push.hpp, with add_push_consumer_types.
    template <class T>
    void check_push_subscription(const push_subscription& subscription,
                                 const std::vector<std::pair<std::string_view, std::string_view>>& earlier) const;

    // All or nothing: every singleton is made before any group is created, and a failure after some
    // groups were created removes the new ones again (groups that existed before stay).
    template <class... Consumers, class... Factories>
    void add_push_consumer_types(Factories... factories);

    // The statistics counters of (topic, T, group), shared by its consumers.
    template <class T>
    std::shared_ptr<detail::group_counters> counters_of(std::string_view topic, std::string_view group)
    {
        return counters_.of(std::string(topic), std::string(detail::readable_type_name<T>()), std::string(group));
    }

    // The letter producer of a dead-letter topic of `dead_letter<T>`, if `dead_letter_topic` names
    // one (else empty); throws naming topic, group and the option when no such topic is registered.
    template <class T>
    detail::letter_producer dead_letter_producer(std::string_view topic, std::string_view group,
                                                 std::string_view dead_letter_topic) const
    {
        return find_letter_producer(topic, group, dead_letter_topic, typeid(dead_letter<T>),
                                    detail::readable_type_name<dead_letter<T>>());
    }

    template <class T>
    std::shared_ptr<detail::topic<T>> find(std::string_view topic) const
    {
        return std::static_pointer_cast<detail::topic<T>>(find(topic, typeid(T), detail::readable_type_name<T>()));
    }

    executor_type executor_;
    mutable std::shared_mutex mutex_;
    std::map<std::string, std::vector<std::shared_ptr<detail::topic_base>>, std::less<>> topics_;  // by name
    // The letter producers of the topics of dead_letter<T>, by topic; guarded by mutex_.
    std::map<const detail::topic_base*, detail::letter_producer> letter_producers_;
    bool closed_ = false;  // guarded by mutex_
    // Made with the first persistent topic, shared with every persistent topic (so handles that outlive
    // the queue reach a live pool, which refuses work once the destructor shut it down); mutex_.
    std::shared_ptr<detail::io_pool> blocking_pool_;
    // The pools of topics that wait on the network (`topic_context::dedicated_pool`); mutex_.
    std::vector<std::shared_ptr<detail::io_pool>> dedicated_pools_;
    const std::shared_ptr<detail::push_registry> push_ = std::make_shared<detail::push_registry>();
    detail::group_counter_table counters_;          // thread-safe; the groups' push and dead-letter counts
    const std::unique_ptr<topic_context> context_;  // refers to this queue
};

}  // namespace bufferqueue

#include "bufferqueue/detail/buffer_queue_push.hpp"  // the push registration templates declared above
