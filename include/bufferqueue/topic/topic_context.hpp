// bufferqueue: what a storage backend receives from the registry while it builds a topic, and what
// it hands back - the customization point of `buffer_queue::add_topic`.
#pragma once

#include "bufferqueue/detail/config.hpp"
#include "bufferqueue/detail/io_pool.hpp"
#include "bufferqueue/detail/type_name.hpp"
#include "bufferqueue/topic/detail/letter_producer.hpp"
#include "bufferqueue/topic/detail/topic.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <concepts>
#include <cstddef>
#include <memory>
#include <string>
#include <typeindex>
#include <typeinfo>
#include <utility>

namespace bufferqueue {

class buffer_queue;
class registered_topic;

namespace detail {
struct registered_topic_access;
}  // namespace detail

/// What a backend may use while it builds a topic, inside its `make_topic(Options, topic_context&)`
/// (see `buffer_queue::add_topic` and docs/backends.md). The registry owns it; a backend only uses
/// the reference it is given, during that call.
///
/// Thread-safety: every member is thread-safe (several `add_topic` calls may run at once).
class topic_context {
public:
    topic_context(const topic_context&) = delete;
    topic_context& operator=(const topic_context&) = delete;
    /// The registry destroys its context; a backend never does (it holds only a reference).
    virtual ~topic_context() = default;

    /// The queue's executor: where completions run whose handler has no executor of its own. A
    /// topic built with `make_partitioned_topic` gets it without asking.
    virtual const boost::asio::any_io_executor& executor() const noexcept = 0;

    /// The queue's pool for blocking I/O, made on the first call (two threads) and shared with every
    /// topic that asks: the topic holds it with shared ownership; after the queue is destroyed it
    /// refuses work (`io_pool::post` returns false). `make_partitioned_topic` calls it exactly when
    /// `storage_traits<Partition>::blocking`, so a backend rarely needs it itself. Allocates on the
    /// first call; throws what starting threads throws.
    virtual std::shared_ptr<detail::io_pool> blocking_pool() = 0;

    /// A pool of `threads` threads of the topic's own, for a backend whose blocking waits are on the
    /// network (a broker's answer to a commit): an outage of that storage then never holds the
    /// threads the queue's other topics use (`blocking_pool`). A new pool per call, held by the topic
    /// with shared ownership; the queue's destructor shuts it down as it does `blocking_pool`.
    /// Allocates, starts threads; throws what starting threads throws.
    virtual std::shared_ptr<detail::io_pool> dedicated_pool(std::size_t threads) = 0;

    /// Throws `bufferqueue::error`: `errc::topic_exists` when a topic `name` of item type `type`
    /// (`type_name` is how messages show it) is registered, `errc::closed` once the queue is closed.
    /// A backend that acquires something exclusive before it can build the topic (a folder lock, a
    /// connection) calls it first, so a duplicate is reported as `topic_exists` rather than as a
    /// conflict over that resource. `add_topic` checks again when it registers the built topic.
    virtual void require_unregistered(const std::string& name, std::type_index type,
                                      const std::string& type_name) const = 0;

    /// `require_unregistered` for a topic of items `T`.
    template <class T>
    void require_unregistered(const std::string& name) const
    {
        require_unregistered(name, typeid(T), detail::readable_type_name<T>());
    }

protected:
    /// For the registry's implementation; never throws.
    topic_context() = default;
};

/// What `make_topic` returns: the built topic, owned until `add_topic` registers it. Opaque to a
/// backend (it comes from `make_partitioned_topic`); destroying an unregistered one closes the topic
/// and releases what it holds. Move-only; not thread-safe (one owner).
class registered_topic {
public:
    /// Takes the topic over; the source then holds none (destroying it does nothing). Never throws.
    registered_topic(registered_topic&&) noexcept = default;
    /// Takes the source's topic over; the topic this one held is released as by the destructor.
    /// Never throws.
    registered_topic& operator=(registered_topic&&) noexcept = default;
    /// Releases the topic unless `add_topic` registered it (its ownership then moved to the queue).
    ~registered_topic() = default;

private:
    friend struct detail::registered_topic_access;
    registered_topic(std::shared_ptr<detail::topic_base> topic, detail::letter_producer letters) noexcept
        : topic_(std::move(topic)), letters_(std::move(letters))
    {
    }

    std::shared_ptr<detail::topic_base> topic_;
    detail::letter_producer letters_;  // a topic of dead_letter<T>'s: how consumers produce letters into it
};

namespace detail {

/// The topic layer's and the registry's access to `registered_topic`.
struct registered_topic_access {
    /// The built `topic`, with its letter producer when its items are `dead_letter<T>`s (made here,
    /// so only a topic of letters instantiates their produce). Allocates that producer.
    template <class T>
    static registered_topic make(std::shared_ptr<topic<T>> topic)
    {
        letter_producer letters = letter_producer_of(topic);
        return registered_topic(std::move(topic), std::move(letters));
    }
    static std::shared_ptr<topic_base> release(registered_topic&& made) noexcept { return std::move(made.topic_); }
    /// The letter producer of a topic of `dead_letter<T>`, else empty; taken once, before `release`.
    static letter_producer release_letters(registered_topic& made) noexcept { return std::move(made.letters_); }
};

}  // namespace detail

/// The customization point of `buffer_queue::add_topic`: an options type `Options` for which
/// argument-dependent lookup finds `registered_topic make_topic(Options, topic_context&)` (declare it
/// in the namespace of `Options`, next to it).
template <class Options>
concept topic_options = requires(Options options, topic_context& context)
{
    {
        make_topic(std::move(options), context)
        } -> std::same_as<registered_topic>;
};

}  // namespace bufferqueue
