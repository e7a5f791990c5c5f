// The ring scan over a consumer's partitions: consumer/detail/ring_reader.hpp.
#include "bufferqueue/consumer/detail/ring_reader.hpp"

namespace bufferqueue::detail {

ring_reader::ring_reader(const consumer_context& context, std::string group, bool auto_commit, std::size_t batch_size,
                         set_pointer assignments)
    : context_(context), group_(std::move(group)), auto_commit_(auto_commit), batch_size_(batch_size),
      assignment_(std::move(assignments))
{
    rebuild_ready_set();
}

bool ring_reader::scan(untyped_batch& delivered, boost::system::error_code& error)
{
    failure_detail_.clear();  // a detail left by an earlier (awaited) scan must not describe this one
    failed_pull_ = false;
    more_ready_.store(false, std::memory_order_relaxed);
    adopt_if_reassigned();
    if (ready_) {
        return scan_marked(delivered, error);
    }
    const std::span<const entry> entries = assignment_.current().entries();
    const std::size_t count = entries.size();
    if (count == 0) {
        return false;
    }
    std::size_t at = ring_position_;
    std::size_t index = count;
    try {
        index = entries.front().storage->pull_first(entries, ring_position_, batch_size_, delivered, at);
    } catch (...) {
        record_failed_pull(entries[at], error);
        ring_position_ = at + 1 == count ? 0 : at + 1;
        return false;
    }
    if (index == count) {
        return false;
    }
    ring_position_ = index + 1 == count ? 0 : index + 1;
    return deliver(entries[index], delivered, error);
}

boost::system::error_code ring_reader::commit()
{
    if (!uncommitted_) {
        return errc::nothing_to_commit;
    }
    failure_detail_.clear();
    adopt_if_reassigned();
    if (assignment_.last_revoked()) {
        return errc::partition_revoked;
    }
    const boost::system::error_code result = commit_position(assignment_.last(), assignment_.last_next_offset());
    if (!result) {
        uncommitted_ = false;
    }
    return result;
}

boost::system::error_code ring_reader::unreadable(skipped_record& record)
{
    failure_detail_.clear();
    if (!failed_pull_) {
        return errc::nothing_to_skip;
    }
    adopt_if_reassigned();
    if (!assignment_.current().contains(failed_.partition)) {
        failed_pull_ = false;
        return errc::partition_revoked;
    }
    const std::optional<unreadable_record> found = failed_.storage->unreadable(failed_.cursor);
    if (!found) {
        return errc::nothing_to_skip;
    }
    record.partition = failed_.partition;
    record.offset = found->offset;
    record.next_offset = found->next_offset;
    record.payload.assign(found->payload.begin(), found->payload.end());
    return {};
}

boost::system::error_code ring_reader::skip(skipped_record& skipped)
{
    skipped_record found;
    if (const boost::system::error_code missing = unreadable(found)) {
        return missing;
    }
    const boost::system::error_code result = commit_position(failed_, found.next_offset);
    if (!result) {
        failed_pull_ = false;
        skipped = std::move(found);
    }
    return result;
}

bool ring_reader::scan_marked(untyped_batch& delivered, boost::system::error_code& error)
{
    const std::span<const entry> entries = assignment_.current().entries();
    const std::size_t count = entries.size();
    const auto may_wait = [entries](std::size_t index) noexcept {  // the entry's watcher is registered
        return entries[index].storage->prepare_wait(entries[index].cursor);
    };
    std::size_t position = ring_position_;
    std::size_t passed = 0;  // positions of this rotation behind the scan
    while (passed < count) {
        const std::size_t index = ready_->next(position);
        if (index == ready_set::none) {
            break;
        }
        passed += (index >= position ? index - position : index + count - position) + 1;
        if (passed > count) {
            break;  // before where the rotation began: the next scan's
        }
        position = index + 1 == count ? 0 : index + 1;
        const entry& each = entries[index];
        if (!try_pull(each, delivered, error)) {
            ring_position_ = position;
            ready_->settle(may_wait, false);
            return false;
        }
        if (delivered.count == 0) {
            ready_->found_empty(index);
            continue;
        }
        ring_position_ = position;
        ready_->settle(may_wait, false);
        return deliver(each, delivered, error);
    }
    ready_->settle(may_wait, true);
    return false;
}

bool ring_reader::try_pull(const entry& each, untyped_batch& pulled, boost::system::error_code& error)
{
    try {
        each.storage->pull(each.cursor, batch_size_, pulled);
        return true;
    } catch (...) {
        record_failed_pull(each, error);
        return false;
    }
}

void ring_reader::record_failed_pull(const entry& each, boost::system::error_code& error)
{
    error = current_exception_code(errc::corrupt_data);
    failure_detail_ = exception_message();
    failed_ = each;
    failed_pull_ = true;
}

bool ring_reader::deliver(const entry& each, untyped_batch& pulled, boost::system::error_code& error)
{
    assignment_.delivered(each, pulled.next_offset);
    more_ready_.store(pulled.more_ready, std::memory_order_relaxed);
    if (auto_commit_) {
        error = commit_position(each, pulled.next_offset);
        if (error) {
            release_held_batch();
            pulled.count = 0;
            return false;
        }
    } else {
        uncommitted_ = true;
    }
    pulled.partition = each.partition;
    return true;
}

void ring_reader::rebuild_ready_set() noexcept
{
    ready_.reset();
    const std::span<const entry> entries = assignment_.current().entries();
    if (entries.size() < ready_set::threshold) {
        return;
    }
    try {
        std::vector<partition_signal*> signals;
        signals.reserve(entries.size());
        for (const entry& each : entries) {
            signals.push_back(each.signal);
        }
        ready_ = std::make_unique<ready_set>(signals);
    } catch (...) {  // NOLINT(bugprone-empty-catch): without one, every scan visits every partition
    }
}

boost::system::error_code ring_reader::commit_position(const entry& each, std::uint64_t next_offset)
{
    try {
        const std::uint64_t released = each.storage->commit(each.cursor, next_offset);
        if (released != 0 && context_.gate != nullptr) {  // one virtual call, only when room came free
            context_.gate->release(static_cast<std::size_t>(released));
        }
    } catch (...) {
        failure_detail_ = exception_message();
        return current_exception_code(errc::io_error);
    }
    return {};
}

}  // namespace bufferqueue::detail
