// topic_core (topic/detail/topic_core.hpp): the typed topic's members that depend on neither its item
// type nor its storage, compiled once.
#include "bufferqueue/topic/detail/topic_core.hpp"

#include "bufferqueue/topic/detail/topic_statistics.hpp"

#include <utility>

namespace bufferqueue::detail {

topic_core::~topic_core() = default;

topic_core::topic_core(settings configuration, std::vector<partition_slot_base*> slots)
    : name_(std::move(configuration.name)), item_type_name_(std::move(configuration.item_type_name)),
      backend_name_(configuration.backend_name), full_mode_(configuration.full_mode),
      executor_(std::move(configuration.executor)), slots_(std::move(slots)),
      resources_(std::move(configuration.resources)), runner_(std::move(configuration.blocking_pool))
{
    if (configuration.bounded_capacity) {
        gate_.emplace(*configuration.bounded_capacity);
    }
    if (configuration.membership) {
        membership_ = std::move(configuration.membership);
        link_ = std::make_shared<membership_link>(static_cast<membership_target&>(*this));
        groups_.use_outside_membership(*membership_);
        membership_->bind(membership_port(link_));
    }
}

void topic_core::close() noexcept
{
    if (closed_.exchange(true, std::memory_order_acq_rel)) {
        return;
    }
    if (membership_) {
        membership_->close();  // leaves the groups; then the port refuses
        link_->clear();
    }
    if (gate_) {
        gate_->close();
    }
    groups_.close_all();
    for (partition_slot_base* slot : slots_) {
        slot->close_storage();
    }
    resources_.reset();
}

std::vector<std::shared_ptr<consumer_base>> topic_core::create_consumers(const pull_consumer_options& options,
                                                                         std::size_t count,
                                                                         std::shared_ptr<const void> keep_alive)
{
    consumer_context context{.topic_name = name_,
                             .executor = executor_,
                             .runner = runner_,
                             .topic_closed = &closed_,
                             .gate = gate(),
                             .keep_alive = std::move(keep_alive)};
    return groups_.create(name_, slots_, options, count, context);  // tells the membership
}

topic_stats topic_core::stats()
{
    if (membership_) {
        membership_->refresh_statistics();
    }
    return collect_topic_stats(name_, item_type_name_, backend_name_, slots_, groups_, gate());
}

bool topic_core::has_group(const std::string& group)
{
    return groups_.has_group(slots_, group);
}

bool topic_core::remove_group(const std::string& group)
{
    const bool here = groups_.remove(name_, slots_, group, closed_, gate());
    const bool elsewhere = membership_ ? membership_->remove_group(group) : false;
    return here || elsewhere;
}

void topic_core::assign_partitions(const std::string& group, std::size_t consumer,
                                   std::span<const std::size_t> partitions)
{
    groups_.assign(name_, group, consumer, partitions);
}

void topic_core::revoke_partitions(const std::string& group, std::size_t consumer,
                                   std::span<const std::size_t> partitions)
{
    groups_.revoke(name_, group, consumer, partitions);
}

std::vector<std::size_t> topic_core::partitions_in_use(const std::string& group)
{
    return groups_.partitions_in_use(name_, group);
}

}  // namespace bufferqueue::detail
