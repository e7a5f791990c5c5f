#include "bufferqueue/mmap/detail/shared_topic_runtime.hpp"

#include "bufferqueue/mmap/detail/process_membership.hpp"
#include "bufferqueue/mmap/detail/topic_options_file.hpp"

#include <utility>

namespace bufferqueue::detail {

shared_topic_runtime::shared_topic_runtime(std::string_view topic, const std::string& topic_folder,
                                           const shared_topic_options& options, file_access access)
    : folder_(topic_folder), partitions_(options.partitions), access_(access), lock_(topic_folder, access),
      options_to_store_(check_topic_options(topic, topic_folder,
                                            {.partitions = options.partitions,
                                             .segment_size = options.segment_size,
                                             .serializer_name = options.serializer_name})),
      header_(topic, topic_folder, options, lock_.first(), access)
{
}

shared_topic_runtime::~shared_topic_runtime()
{
    watcher_.reset();
    lock_.finish_opening();  // a failed open lets the next queue try
}

mmap_log_writer::shared_log_link shared_topic_runtime::link(std::size_t partition) const
{
    return {header_.append_lock(partition), header_.log_slot(partition), header_.wakeups().event(), header_.path()};
}

shared_topic_runtime::partition_guard::partition_guard(const shared_topic_runtime& runtime, std::size_t partition,
                                                       const mmap_partition_files& files)
    : lock_(runtime.header_.append_lock(partition))
{
    if (lock_.lock()) {
        try {
            repair_shared_tail(files, runtime.header_.log_slot(partition), runtime.header_.path());
        } catch (...) {
            lock_.unlock();
            throw;
        }
    }
}

void shared_topic_runtime::attach(std::size_t partition, shared_partition_hooks& hooks)
{
    const std::lock_guard lock(registry_->mutex);
    registry_->partitions[partition] = &hooks;
}

void shared_topic_runtime::detach(std::size_t partition) noexcept
{
    const std::lock_guard lock(registry_->mutex);
    registry_->partitions.erase(partition);
}

std::shared_ptr<group_membership> shared_topic_runtime::make_membership()
{
    auto membership = std::make_shared<process_group_membership>(
        folder_, partitions_, header_.wakeups(),
        [registry = registry_](const std::string& group, std::size_t partition) { registry->reload(group, partition); },
        access_);
    membership_ = membership;
    return membership;
}

void shared_topic_runtime::start()
{
    watcher_.emplace(
        header_.wakeups(), period, [registry = registry_] { registry->refresh_all(); },
        [this] { rebalance_membership(); });
    lock_.finish_opening();
}

void shared_topic_runtime::rebalance_membership() const noexcept
{
    // Outside the registry's mutex: a rebalance re-reads checkpoints through it (reload). Should the
    // topic have let go of the membership meanwhile, it ends here, on this thread (its close only
    // lets go of files and notifies).
    if (const std::shared_ptr<process_group_membership> membership = membership_.lock()) {
        membership->rebalance_all();
    }
}

void shared_topic_runtime::registry::refresh_all() noexcept
{
    const std::lock_guard lock(mutex);
    for (const auto& [index, hooks] : partitions) {
        hooks->refresh();
    }
}

void shared_topic_runtime::registry::reload(const std::string& group, std::size_t partition) noexcept
{
    const std::lock_guard lock(mutex);
    if (const auto found = partitions.find(partition); found != partitions.end()) {
        found->second->reload_group(group);
    }
}

}  // namespace bufferqueue::detail
