// Internal: the dead-letter sink of a topic of `dead_letter<T>` - where a pull consumer of `T` sends
// the records it cannot decode (`pull_consumer_options::dead_letter_topic`). Made by that topic
// (`topic_base::make_dead_letter_sink`), so the code that produces letters is compiled only where a
// topic of `dead_letter<T>` is, not by every `create_pull_consumers<T>`.
#pragma once

#include "bufferqueue/consumer/detail/dead_letter_route.hpp"
#include "bufferqueue/dead_letter.hpp"
#include "bufferqueue/topic/detail/produce_steps.hpp"
#include "bufferqueue/topic/detail/topic.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>

namespace bufferqueue::detail {

/// The item type of a dead-letter topic's letters: `is_letter` and `item` (`T` of `dead_letter<T>`).
template <class Letter>
struct dead_letter_traits {
    static constexpr bool is_letter = false;
};
template <class T>
struct dead_letter_traits<dead_letter<T>> {
    static constexpr bool is_letter = true;
    using item = T;
};

/// Produces each letter into a topic of `dead_letter<T>`, as `producer<dead_letter<T>>::produce`
/// does: routed by the topic's key, stored by its runner, waiting for room on a bounded topic.
/// Not thread-safe (one `send` at a time, as `dead_letter_sink` says); holds the topic alive.
template <class T>
class topic_dead_letter_sink final : public dead_letter_sink {
public:
    explicit topic_dead_letter_sink(std::shared_ptr<topic<dead_letter<T>>> letters) noexcept
        : letters_(std::move(letters))
    {
    }

    void send(const std::string& topic, const skipped_record& record, std::string error,
              letter_acknowledgement acknowledge) override
    {
        dead_letter<T> letter = undecodable_letter<T>(topic, record, std::move(error));
        std::optional<std::uint32_t> partition;
        if (const auto& key = letters_->partition_key()) {
            partition = key_partition(*letters_, key, letter);  // throws before anything is started
        }
        initiate_produce_one<dead_letter<T>>{}(std::move(acknowledge), letters_, std::move(letter), partition,
                                               std::stop_token());
    }

private:
    const std::shared_ptr<topic<dead_letter<T>>> letters_;
};

}  // namespace bufferqueue::detail
