// Internal: registering push consumers - how a subscription's handler is called (one shared
// instance or a fresh one per batch), its group and loops, all or nothing.
#pragma once

#include "bufferqueue/detail/config.hpp"

#include "bufferqueue/batch.hpp"
#include "bufferqueue/consumer/detail/dead_letter_path.hpp"
#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/options.hpp"
#include "bufferqueue/pull_consumer.hpp"
#include "bufferqueue/push/detail/push_handler_calls.hpp"
#include "bufferqueue/push/detail/push_loop.hpp"
#include "bufferqueue/push_consumer.hpp"
#include "bufferqueue/topic/detail/topic.hpp"

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace bufferqueue::detail {

/// The item type of a push handler: `T` when given, else deduced from a non-generic handler's first
/// parameter.
template <class T, class Handler>
struct callable_item {
    using type = T;
};
template <class Handler>
struct callable_item<deduced_item, Handler> {
    static_assert(
        requires { &Handler::operator(); }, "cannot deduce the item type of a generic or overloaded push handler: "
                                            "call add_push_consumer<T>(subscription, handler)");
    using type = item_of_member<decltype(&Handler::operator())>;
};

/// The item type of a push consumer type.
template <class Consumer>
using push_item = item_of_member<decltype(&Consumer::consume)>;

/// Default-constructs push consumers.
template <class Consumer>
struct default_push_factory {
    std::shared_ptr<Consumer> operator()() const { return std::make_shared<Consumer>(); }
};

/// A callable push handler, as the source of `make_push_invoker`: the singleton shares `handler`,
/// a per-batch handler copies it for every batch.
template <class T, class Handler>
struct callable_handler_source {
    Handler handler;

    std::shared_ptr<Handler> make_instance() { return std::make_shared<Handler>(std::move(handler)); }
    std::shared_ptr<const Handler> make_prototype() { return std::make_shared<const Handler>(std::move(handler)); }
    static boost::asio::awaitable<void> call(Handler& instance, batch<T> items, committer* commit)
    {
        return call_callable<T>(instance, std::move(items), commit);
    }
    static boost::asio::awaitable<void> call_fresh(const std::shared_ptr<const Handler>& prototype, batch<T> items,
                                                   committer* commit)
    {
        return call_fresh_callable<T>(prototype, std::move(items), commit);
    }
};

/// A push consumer type made by `factory`, as the source of `make_push_invoker`: the singleton is
/// made once, now (a throwing factory fails the registration, the message naming the
/// subscription), a per-batch consumer for every batch.
template <class T, class Consumer, class Factory>
struct consumer_handler_source {
    Factory factory;
    push_subscription subscription;

    std::shared_ptr<Consumer> make_instance()
    {
        try {
            return make_consumer_instance<Consumer>(factory);
        } catch (const error& failure) {
            throw error(static_cast<errc>(failure.code().value()),
                        format_message("push consumer of topic '{}' group '{}': {}", subscription.topic,
                                       subscription.group, failure.what()));
        }
    }
    std::shared_ptr<Factory> make_prototype() { return std::make_shared<Factory>(std::move(factory)); }
    static boost::asio::awaitable<void> call(Consumer& instance, batch<T> items, committer* commit)
    {
        return call_consume<T>(instance, std::move(items), commit);
    }
    static boost::asio::awaitable<void> call_fresh(const std::shared_ptr<Factory>& prototype, batch<T> items,
                                                   committer* commit)
    {
        return call_fresh_consumer<T, Consumer>(prototype, std::move(items), commit);
    }
};

/// How the loops of a subscription call its handler, for either source above: `lifetime::singleton`
/// shares one instance between the loops, `lifetime::per_batch` makes one for every batch.
template <class T, class Source>
push_invoker<T> make_push_invoker(lifetime how, Source source)
{
    if (how == lifetime::singleton) {
        return [instance = source.make_instance()](batch<T> items, committer* commit) {
            return Source::call(*instance, std::move(items), commit);
        };
    }
    return [prototype = source.make_prototype()](batch<T> items, committer* commit) {
        return Source::call_fresh(prototype, std::move(items), commit);
    };
}

/// Throws `bufferqueue::error` `errc::invalid_argument` naming topic, group and the option when
/// `subscription.retry_backoff` is invalid (negative delays, `maximum` below `initial`, `multiplier`
/// below 1 or not a number).
inline void check_retry_options(const push_subscription& subscription)
{
    const retry_backoff& backoff = subscription.retry_backoff;
    const auto fail = [&](const std::string& what) {
        throw error(errc::invalid_argument,
                    format_message("topic '{}' group '{}': {}", subscription.topic, subscription.group, what));
    };
    if (backoff.initial.count() < 0) {
        fail(format_message("'retry_backoff.initial' must not be negative (is {} ms)", backoff.initial.count()));
    }
    if (backoff.maximum < backoff.initial) {
        fail(format_message("'retry_backoff.maximum' ({} ms) must not be below 'retry_backoff.initial' ({} ms)",
                            backoff.maximum.count(), backoff.initial.count()));
    }
    if (!(backoff.multiplier >= 1.0)) {
        fail(format_message("'retry_backoff.multiplier' must be at least 1 (is {})", backoff.multiplier));
    }
}

/// One subscription's loops, made but not yet registered; `created` when its group was new.
struct pending_push {
    std::string topic;
    std::string group;
    bool created = false;
    std::function<bool()> remove_group;
    std::vector<std::shared_ptr<push_loop_base>> loops;
};

/// Creates the (checked) subscription's group on `topic` and its loops, not registered yet. On
/// failure a group this call created is removed again.
template <class T>
pending_push make_push_loops(const std::shared_ptr<topic<T>>& topic, const push_subscription& subscription,
                             push_invoker<T> invoker, bool manual_commit, const boost::asio::any_io_executor& executor,
                             letter_producer dead_letters, std::shared_ptr<group_counters> counters)
{
    if (dead_letters) {
        if (!manual_commit) {
            throw error(errc::invalid_argument,
                        format_message("topic '{}' group '{}': 'dead_letter_topic' needs a manual-commit handler "
                                       "(under auto commit a batch is committed before its handler runs)",
                                       subscription.topic, subscription.group));
        }
        if (subscription.max_attempts == 0) {
            throw error(errc::invalid_argument,
                        format_message("topic '{}' group '{}': 'dead_letter_topic' needs 'max_attempts' above 0 (0 "
                                       "retries a failing batch forever)",
                                       subscription.topic, subscription.group));
        }
    }
    const pull_consumer_options options{.topic = std::string(subscription.topic),
                                        .group = std::string(subscription.group),
                                        .auto_commit = !manual_commit,
                                        .batch_size = subscription.batch_size};
    pending_push made{.topic = options.topic,
                      .group = options.group,
                      .created = !topic->has_group(options.group),
                      .remove_group = [topic, group = options.group] { return topic->remove_group(group); },
                      .loops = {}};
    const std::vector<std::shared_ptr<consumer_base>> states =
        topic->create_consumers(options, subscription.concurrency);
    std::vector<pull_consumer<T>> consumers(states.begin(), states.end());
    try {
        for (std::size_t index = 0; index < consumers.size(); ++index) {
            // The loop's path to its dead-letter topic: its records that do not decode and the
            // batches it gives up on go there.
            std::shared_ptr<dead_letter_path> path =
                dead_letters ? std::make_shared<dead_letter_path>(states[index], dead_letters,
                                                                  std::string(subscription.dead_letter_topic), counters)
                             : nullptr;
            made.loops.push_back(std::make_shared<push_loop<T>>(std::move(consumers[index]), invoker, manual_commit,
                                                                executor, subscription.max_attempts,
                                                                subscription.retry_backoff, std::move(path), counters));
        }
    } catch (...) {
        made.loops.clear();
        consumers.clear();
        if (made.created) {
            try {
                made.remove_group();
            } catch (...) {
                // Best effort; the original failure is what the caller needs to see.
            }
        }
        throw;
    }
    return made;
}

/// Closes the loops' consumers and removes the groups the registration created. Never throws.
inline void undo_push(std::vector<pending_push>& pending) noexcept
{
    for (pending_push& each : pending) {
        each.loops.clear();  // destroys the loops and their consumers, which closes them
        if (each.created) {
            try {
                each.remove_group();
            } catch (...) {
                // Best effort; the original failure is what the caller needs to see.
            }
        }
    }
}

/// Hands the loops to `registry`, all of them or (undoing the groups) none.
inline void register_push(push_registry& registry, std::vector<pending_push>& pending)
{
    std::vector<std::shared_ptr<push_loop_base>> loops;
    for (const pending_push& each : pending) {
        loops.insert(loops.end(), each.loops.begin(), each.loops.end());
    }
    try {
        registry.add(std::move(loops), pending.front().topic, pending.front().group);
    } catch (...) {
        loops.clear();
        undo_push(pending);
        throw;
    }
}

}  // namespace bufferqueue::detail
