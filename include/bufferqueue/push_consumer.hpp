// bufferqueue: push consumers - handlers the queue calls with every batch of a subscription.
#pragma once

#include "bufferqueue/detail/config.hpp"

#include "bufferqueue/batch.hpp"
#include "bufferqueue/detail/completion.hpp"
#include "bufferqueue/producer.hpp"
#include "bufferqueue/retry_backoff.hpp"

#include <concepts>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <string_view>
#include <type_traits>

namespace bufferqueue {

/// How many handler instances a push consumer type gets.
enum class lifetime {
    singleton,  ///< one instance shared by every loop of the subscription (so it must be thread-safe)
    per_batch,  ///< a fresh instance for every delivered batch, destroyed when its handler finishes or throws
};

/// What a push consumer reads and how: a compile-time descriptor, usually a
/// `static constexpr push_subscription subscription{...}` member of the consumer type. The strings
/// are copied at registration. Every field has a default; `topic` and `group` must be set.
struct push_subscription {
    /// Name of the topic to read; registered for the handler's item type.
    std::string_view topic{};
    /// Consumer group, new on the topic; must not be empty.
    std::string_view group{};
    /// Upper bound of items per delivered batch, at least 1.
    std::size_t batch_size = 100;
    /// Instances of the consumer type: one shared, or one per batch.
    bufferqueue::lifetime lifetime = bufferqueue::lifetime::singleton;
    /// Push loops (pull consumers of the group) running at once, 1..the topic's partition count.
    std::size_t concurrency = 1;
    /// Manual commit only: deliveries of one batch whose handler keeps throwing before the loop gives
    /// up on it (reports it once and stops, leaving it uncommitted; see docs/push-consumers.md).
    /// 0 (the default, as before) retries without limit. Ignored under auto commit, where the batch
    /// was committed when pulled and is handed to the handler once.
    std::size_t max_attempts = 0;
    /// Manual commit only: the delays between those deliveries (a timer on the queue's executor).
    bufferqueue::retry_backoff retry_backoff{};
    /// Manual commit with `max_attempts` > 0: a topic of `bufferqueue::dead_letter<T>` in the same
    /// queue. A batch that failed `max_attempts` times goes there, one dead letter per item, and is
    /// committed only once that produce is acknowledged; the loop then goes on with the next batch.
    /// Empty (the default): the loop stops on such a batch instead. See docs/push-consumers.md.
    std::string_view dead_letter_topic{};
};

namespace detail {

template <class T>
class push_loop;

/// What a committer commits through: the loop's pull consumer.
class commit_target {
public:
    commit_target(const commit_target&) = delete;
    commit_target& operator=(const commit_target&) = delete;

    /// Commits the batch being handled and completes `completion` with the result.
    virtual void start_commit(std::unique_ptr<pending_completion<boost::system::error_code>> completion) = 0;
    /// Whether the batch being handled was committed.
    virtual bool batch_committed() const noexcept = 0;
    /// Where completions without an executor of their own run.
    virtual const boost::asio::any_io_executor& executor() const noexcept = 0;

protected:
    commit_target() = default;
    ~commit_target() = default;
};

}  // namespace detail

/// What a manual-commit push handler receives: commits the batch this call of the handler was
/// given. A committer is valid only while that handler call runs.
///
/// If the handler returns without committing (and without throwing), the batch stays uncommitted
/// and is delivered again (at-least-once, as with a pull consumer that does not commit): returning
/// without a commit is how a handler asks for redelivery. A handler that commits and then throws
/// is reported to the error sink; its batch is committed and not delivered again.
///
/// Thread-safety: use it from the handler only, one `commit()` at a time.
class committer {
public:
    committer(const committer&) = delete;
    committer& operator=(const committer&) = delete;

    /// Commits the batch being handled. Signature `void(boost::system::error_code)`; errors:
    /// `errc::nothing_to_commit` (already committed), `errc::closed` (the queue closed),
    /// `errc::io_error` (a persistent topic could not store the offset), `errc::operation_in_progress`
    /// (a second commit while one is pending). Under `use_awaitable` a failure is thrown as
    /// `boost::system::system_error`. Persistent topics do their file I/O off the caller's executor.
    template <class CompletionToken = default_completion_token>
    auto commit(CompletionToken&& token = default_completion_token())
    {
        return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
            [](auto handler, committer* self) {
                auto completion = detail::make_pending_completion<boost::system::error_code>(std::move(handler),
                                                                                             self->target_->executor());
                self->target_->start_commit(std::move(completion));
            },
            token, this);
    }

    /// True once a `commit()` of this batch succeeded.
    bool committed() const noexcept { return target_->batch_committed(); }

private:
    template <class T>
    friend class detail::push_loop;

    explicit committer(detail::commit_target& target) noexcept : target_(&target) {}

    detail::commit_target* target_;
};

/// A failure a push loop reports to the queue's error sink: a handler (or a per-batch factory) threw,
/// or pulling failed (for example `errc::io_error` on a persistent topic). The views are valid only
/// during the sink call.
struct push_error {
    /// The subscription's topic.
    std::string_view topic{};
    /// The subscription's group.
    std::string_view group{};
    /// The exception thrown.
    std::exception_ptr exception{};
    /// The exception's `what()`, or "unknown exception" for a type not derived from std::exception.
    std::string_view message{};
};

/// Receives push consumer failures. Called from push loops, possibly from several threads at once
/// (when the queue's executor has several), so it must be thread-safe; exceptions it throws are
/// ignored.
using push_error_sink = std::function<void(const push_error&)>;

/// The default error sink: writes one line to stderr (one fprintf call), naming topic, group and message.
void default_push_error_sink(const push_error& failure);

namespace detail {

template <class... Parameters>
struct parameter_list {
};

template <class Function>
struct member_parameters {
};
template <class Result, class Class, class... Parameters>
struct member_parameters<Result (Class::*)(Parameters...)> {
    using type = parameter_list<Parameters...>;
};
template <class Result, class Class, class... Parameters>
struct member_parameters<Result (Class::*)(Parameters...) const> {
    using type = parameter_list<Parameters...>;
};
template <class Result, class Class, class... Parameters>
struct member_parameters<Result (Class::*)(Parameters...) noexcept> {
    using type = parameter_list<Parameters...>;
};
template <class Result, class Class, class... Parameters>
struct member_parameters<Result (Class::*)(Parameters...) const noexcept> {
    using type = parameter_list<Parameters...>;
};

template <class List>
struct batch_parameter {
};
template <class First, class... Rest>
struct batch_parameter<parameter_list<First, Rest...>> {
    using type = std::remove_cvref_t<First>;
};

template <class Batch>
struct batch_item {
};
template <class T>
struct batch_item<batch<T>> {
    using type = T;
};

/// The item type of a non-overloaded, non-template member function whose first parameter is a
/// `batch<T>` (by value or reference).
template <class MemberFunction>
using item_of_member =
    typename batch_item<typename batch_parameter<typename member_parameters<MemberFunction>::type>::type>::type;

/// Marks "deduce the item type from the handler".
struct deduced_item {};

}  // namespace detail

/// A handler object for items `T` with auto commit: `consume(batch<T>)` returning an awaitable.
template <class Handler, class T>
concept auto_commit_push_handler = requires(Handler& handler, batch<T> items)
{
    {
        handler.consume(items)
        } -> std::same_as<boost::asio::awaitable<void>>;
};

/// A handler object for items `T` with manual commit: `consume(batch<T>, committer&)`.
template <class Handler, class T>
concept manual_commit_push_handler = requires(Handler& handler, batch<T> items, committer& commit)
{
    {
        handler.consume(items, commit)
        } -> std::same_as<boost::asio::awaitable<void>>;
};

/// A push consumer type: a `static constexpr push_subscription subscription` and one non-template,
/// non-overloaded `consume` member, either `consume(batch<T>)` (auto commit) or
/// `consume(batch<T>, committer&)` (manual commit), returning `boost::asio::awaitable<void>`. The
/// item type `T` is deduced from the first parameter.
template <class Consumer>
concept push_consumer = requires
{
    {
        Consumer::subscription
        } -> std::convertible_to<push_subscription>;
    typename detail::item_of_member<decltype(&Consumer::consume)>;
}
&&(auto_commit_push_handler<Consumer, detail::item_of_member<decltype(&Consumer::consume)>> !=
   manual_commit_push_handler<Consumer, detail::item_of_member<decltype(&Consumer::consume)>>);

/// A callable push handler for items `T`: `handler(batch<T>)` (auto commit) or
/// `handler(batch<T>, committer&)` (manual commit), returning `boost::asio::awaitable<void>`.
template <class Handler, class T>
concept push_handler = std::copy_constructible<Handler> &&
    (std::is_invocable_r_v<boost::asio::awaitable<void>, Handler&, batch<T>> !=
     std::is_invocable_r_v<boost::asio::awaitable<void>, Handler&, batch<T>, committer&>);

}  // namespace bufferqueue
