// Internal: the typed edge of the dead-letter path - how a topic of `dead_letter<T>` produces the
// letters a consumer's `dead_letter_path` describes (consumer/detail/dead_letter_path.hpp). Made once,
// when such a topic is registered (`registered_topic_access::make`), and handed by the registry to
// each consumer that names it, so no other code instantiates a produce of `dead_letter<T>`.
#pragma once

#include "bufferqueue/consumer/detail/dead_letter_path.hpp"
#include "bufferqueue/dead_letter.hpp"
#include "bufferqueue/topic/detail/produce_steps.hpp"
#include "bufferqueue/topic/detail/topic.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

namespace bufferqueue::detail {

/// The letters `contents` describes, as `dead_letter<T>`s (`contents.items` are `T`s). Allocates.
template <class T>
std::vector<dead_letter<T>> make_letters(const letter_contents& contents)
{
    const T* items = static_cast<const T*>(contents.items);
    std::vector<dead_letter<T>> letters;
    letters.reserve(contents.count);
    for (std::size_t index = 0; index < contents.count; ++index) {
        letters.push_back(
            {.item = items != nullptr ? std::optional<T>(items[index]) : std::nullopt,
             .payload = std::vector<std::byte>(contents.payload.begin(), contents.payload.end()),
             .topic = std::string(contents.topic),
             .partition = contents.partition,
             .offset = contents.offsets.empty() ? std::nullopt : std::optional<std::uint64_t>(contents.offsets[index]),
             .attempts = contents.attempts,
             .error = std::string(contents.error)});
    }
    return letters;
}

/// The letter producer of the topic `letters`: produces each call's letters as one produce, as
/// `producer<dead_letter<T>>::produce` does (routed by the topic's key, computed before anything
/// starts, so a throwing key selector stores nothing; stored by its runner; waiting for room on a
/// bounded topic). Holds the topic alive. Thread-safe; allocates the letters per call.
template <class T>
letter_producer make_letter_producer(std::shared_ptr<topic<dead_letter<T>>> letters)
{
    return [letters = std::move(letters)](const letter_contents& contents, letter_acknowledgement acknowledge) {
        std::vector<dead_letter<T>> made = make_letters<T>(contents);
        std::vector<std::uint32_t> partitions;
        if (const auto& key = letters->partition_key()) {
            partitions.reserve(made.size());
            for (const dead_letter<T>& letter : made) {
                partitions.push_back(key_partition(*letters, key, letter));  // throws before anything is started
            }
        }
        initiate_produce<dead_letter<T>>{}(std::move(acknowledge), letters, std::move(made), {}, std::move(partitions),
                                           std::stop_token());
    };
}

/// The letter producer of `topic` when its items are `dead_letter<T>`s; empty for any other topic.
template <class Item>
letter_producer letter_producer_of(const std::shared_ptr<topic<Item>>&)
{
    return {};
}
template <class T>
letter_producer letter_producer_of(const std::shared_ptr<topic<dead_letter<T>>>& topic)
{
    return make_letter_producer<T>(topic);
}

}  // namespace bufferqueue::detail
