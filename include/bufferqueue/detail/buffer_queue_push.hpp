// bufferqueue: the registry's push-consumer registration - the bodies of `buffer_queue`'s member
// templates that check subscriptions and create their groups and loops (declared in buffer_queue.hpp,
// which includes this file after the class).
#pragma once

#include "bufferqueue/buffer_queue.hpp"

#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace bufferqueue {

// Contracts: at the declarations in buffer_queue.hpp.
template <class T>
void buffer_queue::check_push_subscription(
    const push_subscription& subscription,
    const std::vector<std::pair<std::string_view, std::string_view>>& earlier) const
{
    const std::string topic(subscription.topic);
    const std::string group(subscription.group);
    push_->require_registering(topic, group);
    validate({.topic = topic, .group = group, .auto_commit = false, .batch_size = subscription.batch_size});
    if (subscription.lifetime != lifetime::singleton && subscription.lifetime != lifetime::per_batch) {
        throw error(errc::invalid_argument,
                    detail::format_message("topic '{}' group '{}': invalid 'lifetime'", topic, group));
    }
    detail::check_retry_options(subscription);
    for (const auto& [other_topic, other_group] : earlier) {
        if (other_topic == subscription.topic && other_group == subscription.group) {
            throw error(errc::invalid_argument,
                        detail::format_message("topic '{}' group '{}': two push consumers subscribe with the same "
                                               "group",
                                               topic, group));
        }
    }
    const std::size_t partitions = find<T>(topic)->partition_count();
    if (subscription.concurrency < 1 || subscription.concurrency > partitions) {
        throw error(errc::too_many_consumers,
                    detail::format_message("topic '{}' group '{}': push concurrency {} must be between 1 and the "
                                           "topic's {} partitions",
                                           topic, group, subscription.concurrency, partitions));
    }
}

template <class... Consumers, class... Factories>
void buffer_queue::add_push_consumer_types(Factories... factories)
{
    std::vector<std::pair<std::string_view, std::string_view>> checked;
    ((check_push_subscription<detail::push_item<Consumers>>(Consumers::subscription, checked),
      checked.emplace_back(push_subscription(Consumers::subscription).topic,
                           push_subscription(Consumers::subscription).group)),
     ...);
    auto invokers = std::make_tuple(detail::make_push_invoker<detail::push_item<Consumers>>(
        push_subscription(Consumers::subscription).lifetime,
        detail::consumer_handler_source<detail::push_item<Consumers>, Consumers, Factories>{
            std::move(factories), Consumers::subscription})...);
    std::vector<detail::pending_push> pending;
    try {
        std::apply(
            [&](auto&... invoker) {
                (pending.push_back(detail::make_push_loops<detail::push_item<Consumers>>(
                     find<detail::push_item<Consumers>>(push_subscription(Consumers::subscription).topic),
                     Consumers::subscription, std::move(invoker),
                     manual_commit_push_handler<Consumers, detail::push_item<Consumers>>, executor_,
                     dead_letter_producer<detail::push_item<Consumers>>(Consumers::subscription.topic,
                                                                        Consumers::subscription.group,
                                                                        Consumers::subscription.dead_letter_topic),
                     counters_of<detail::push_item<Consumers>>(Consumers::subscription.topic,
                                                               Consumers::subscription.group))),
                 ...);
            },
            invokers);
    } catch (...) {
        detail::undo_push(pending);
        throw;
    }
    detail::register_push(*push_, pending);
}

}  // namespace bufferqueue
