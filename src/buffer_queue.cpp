#include "bufferqueue/buffer_queue.hpp"

#include "bufferqueue/detail/message.hpp"

#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <mutex>
#include <tuple>

namespace bufferqueue {

// The context every backend's make_topic receives from this queue.
class buffer_queue::context final : public topic_context {
public:
    explicit context(buffer_queue& queue) noexcept : queue_(queue) {}

    const boost::asio::any_io_executor& executor() const noexcept override { return queue_.executor_; }
    std::shared_ptr<detail::io_pool> blocking_pool() override { return queue_.blocking_pool(); }
    std::shared_ptr<detail::io_pool> dedicated_pool(std::size_t threads) override
    {
        return queue_.dedicated_pool(threads);
    }
    void require_unregistered(const std::string& name, std::type_index type,
                              const std::string& type_name) const override
    {
        queue_.require_unregistered(name, type, type_name);
    }

private:
    buffer_queue& queue_;
};

buffer_queue::buffer_queue(executor_type executor)
    : executor_(std::move(executor)), context_(std::make_unique<context>(*this))
{
}

buffer_queue::executor_type buffer_queue::io_context_executor(boost::asio::io_context& context)
{
    return context.get_executor();
}

buffer_queue::~buffer_queue()
{
    close();
    if (blocking_pool_) {
        // Topics held by handles share the pool: from here on it refuses work, and their
        // asynchronous operations complete with errc::closed instead of reaching freed threads.
        blocking_pool_->shut_down();
    }
    for (const std::shared_ptr<detail::io_pool>& pool : dedicated_pools_) {
        pool->shut_down();  // the same for the pools of the topics' own
    }
}

std::shared_ptr<detail::io_pool> buffer_queue::blocking_pool()
{
    std::unique_lock lock(mutex_);
    if (!blocking_pool_) {
        blocking_pool_ = std::make_shared<detail::io_pool>(2);
    }
    return blocking_pool_;
}

std::shared_ptr<detail::io_pool> buffer_queue::dedicated_pool(std::size_t threads)
{
    auto pool = std::make_shared<detail::io_pool>(threads);
    std::unique_lock lock(mutex_);
    dedicated_pools_.push_back(pool);
    return pool;
}

namespace {

void require_new(const std::map<std::string, std::vector<std::shared_ptr<detail::topic_base>>, std::less<>>& topics,
                 bool closed, const std::string& topic, std::type_index type, const std::string& type_name)
{
    if (closed) {
        throw error(errc::closed, detail::format_message("buffer_queue is closed: cannot add topic '{}'", topic));
    }
    if (const auto found = topics.find(topic); found != topics.end()) {
        for (const auto& existing : found->second) {
            if (existing->item_type() == type) {
                throw error(
                    errc::topic_exists,
                    detail::format_message("topic '{}' is already registered for item type {}", topic, type_name));
            }
        }
    }
}

}  // namespace

void buffer_queue::require_unregistered(const std::string& topic, std::type_index type,
                                        const std::string& type_name) const
{
    std::shared_lock lock(mutex_);
    require_new(topics_, closed_, topic, type, type_name);
}

void buffer_queue::add(registered_topic made)
{
    detail::letter_producer letters = detail::registered_topic_access::release_letters(made);
    std::shared_ptr<detail::topic_base> topic = detail::registered_topic_access::release(std::move(made));
    if (!topic) {
        throw error(errc::invalid_argument, "add_topic: make_topic returned a moved-from registered_topic");
    }
    std::unique_lock lock(mutex_);
    require_new(topics_, closed_, topic->name(), topic->item_type(), topic->item_type_name());
    std::vector<std::shared_ptr<detail::topic_base>>& named = topics_[topic->name()];
    named.push_back(topic);
    if (letters) {
        try {
            letter_producers_.emplace(topic.get(), std::move(letters));
        } catch (...) {
            named.pop_back();  // all or nothing
            throw;
        }
    }
}

std::shared_ptr<detail::topic_base> buffer_queue::find(std::string_view topic, std::type_index type,
                                                       std::string_view type_name) const
{
    std::shared_lock lock(mutex_);
    const auto found = topics_.find(topic);
    if (found == topics_.end()) {
        throw error(errc::no_such_topic,
                    detail::format_message("no topic '{}' is registered (item type {})", topic, type_name));
    }
    std::string others;
    for (const auto& candidate : found->second) {
        if (candidate->item_type() == type) {
            return candidate;
        }
        others += detail::format_message("{}{}", others.empty() ? "" : ", ", candidate->item_type_name());
    }
    throw error(errc::type_mismatch,
                detail::format_message("topic '{}' is not registered for item type {}; it is registered for: {}", topic,
                                       type_name, others));
}

detail::letter_producer buffer_queue::find_letter_producer(std::string_view topic, std::string_view group,
                                                           std::string_view dead_letter_topic, std::type_index type,
                                                           std::string_view type_name) const
{
    if (dead_letter_topic.empty()) {
        return {};
    }
    std::shared_ptr<detail::topic_base> letters;
    try {
        letters = find(dead_letter_topic, type, type_name);
    } catch (const error& failure) {
        throw error(
            static_cast<errc>(failure.code().value()),
            detail::format_message("topic '{}' group '{}': 'dead_letter_topic': {}", topic, group, failure.what()));
    }
    std::shared_lock lock(mutex_);
    return letter_producers_.at(letters.get());  // every topic of dead_letter<T> registered one
}

std::shared_ptr<detail::dead_letter_path> buffer_queue::letter_path(std::shared_ptr<detail::consumer_base> consumer,
                                                                    const detail::letter_producer& letters,
                                                                    const pull_consumer_options& options,
                                                                    const std::string& item_type_name)
{
    return std::make_shared<detail::dead_letter_path>(std::move(consumer), letters, options.dead_letter_topic,
                                                      counters_.of(options.topic, item_type_name, options.group));
}

std::vector<topic_stats> buffer_queue::stats() const
{
    std::vector<std::shared_ptr<detail::topic_base>> registered;
    {
        std::shared_lock lock(mutex_);
        for (const auto& [name, topics] : topics_) {
            registered.insert(registered.end(), topics.begin(), topics.end());
        }
    }
    std::vector<topic_stats> snapshots;
    snapshots.reserve(registered.size());
    for (const auto& topic : registered) {
        snapshots.push_back(topic->stats());
        counters_.add_to(snapshots.back());
    }
    std::sort(snapshots.begin(), snapshots.end(), [](const topic_stats& left, const topic_stats& right) {
        return std::tie(left.topic, left.item_type) < std::tie(right.topic, right.item_type);
    });
    return snapshots;
}

void buffer_queue::validate(const pull_consumer_options& options)
{
    if (options.group.empty() || detail::only_whitespace(options.group)) {
        throw error(errc::invalid_argument,
                    detail::format_message("topic '{}': option 'group' must not be empty or only whitespace (got '{}')",
                                           options.topic, options.group));
    }
    if (options.batch_size < 1) {
        throw error(errc::invalid_argument,
                    detail::format_message("topic '{}' group '{}': option 'batch_size' must be at least 1",
                                           options.topic, options.group));
    }
}

void buffer_queue::start()
{
    if (is_closed()) {
        throw error(errc::closed, "buffer_queue::start(): the queue is closed");
    }
    push_->start(executor_);
}

void buffer_queue::set_push_error_sink(push_error_sink sink)
{
    push_->set_error_sink(std::move(sink));
}

void buffer_queue::close() noexcept
{
    push_->close();
    std::map<std::string, std::vector<std::shared_ptr<detail::topic_base>>, std::less<>> closing;
    {
        std::unique_lock lock(mutex_);
        closed_ = true;
        closing = topics_;
    }
    for (const auto& [name, registered] : closing) {
        for (const auto& topic : registered) {
            topic->close();
        }
    }
}

bool buffer_queue::is_closed() const noexcept
{
    std::shared_lock lock(mutex_);
    return closed_;
}

}  // namespace bufferqueue
