#include "bufferqueue/mmap/detail/process_membership.hpp"

#include "bufferqueue/detail/message.hpp"

#include <algorithm>
#include <set>
#include <utility>

namespace bufferqueue::detail {

process_group_membership::process_group_membership(
    std::string topic_folder, std::size_t partitions, shared_wakeups wakeups,
    std::function<void(const std::string& group, std::size_t partition)> before_assign, file_access access)
    : topic_folder_(std::move(topic_folder)), partitions_(partitions), wakeups_(wakeups),
      before_assign_(std::move(before_assign)), access_(access)
{
}

process_group_membership::~process_group_membership()
{
    close();
}

void process_group_membership::bind(membership_port port) noexcept
{
    const std::lock_guard lock(mutex_);
    port_ = std::move(port);
}

void process_group_membership::consumers_created(const std::string& group, std::size_t count)
{
    const std::lock_guard lock(mutex_);
    if (closed_) {
        throw error(errc::closed, detail::format_message("consumer group '{}': its topic is closed", group));
    }
    auto& state = groups_[group];
    if (!state) {
        state = std::make_unique<group_state>(group_leases(group, topic_folder_, access_));
    }
    for (std::size_t index = 0; index < count; ++index) {
        state->members.insert_or_assign(index, state->leases.join());
    }
    // Takes at once the share no live process holds (all of it when the group has no other live
    // member: a dead process's leases the kernel released), so the consumers own it when their
    // creation returns; what others still hold comes on the watcher thread once they let go. A
    // failure (a lease file that cannot be opened) fails the creation, naming the file.
    rebalance(group, *state);  // a lease it let go, the notification below announces
    notify_while_open();       // every process re-shares, this one's watcher included
}

void process_group_membership::consumer_closed(const std::string& group, std::size_t consumer) noexcept
{
    const std::lock_guard lock(mutex_);
    const auto found = groups_.find(group);
    if (found == groups_.end()) {
        return;
    }
    found->second->members.erase(consumer);  // closes its slot's lock file: the slot is free
    std::erase_if(found->second->assigned, [&](const auto& given) { return given.second == consumer; });
    notify_while_open();
}

void process_group_membership::partitions_let_go(const std::string& /*group*/) noexcept
{
    const std::lock_guard lock(mutex_);
    notify_while_open();  // the watcher releases the leases of what nobody here reads any more
}

void process_group_membership::notify_while_open() noexcept
{
    // Under mutex_: close() cannot return - and the topic unmap the header that holds the words -
    // while a notification runs, and none follows it.
    if (!closed_) {
        wakeups_.notify_membership();
    }
}

void process_group_membership::close() noexcept
{
    {
        // Waits for a rebalance in progress; later ones see closed_ and do nothing.
        const std::lock_guard lock(mutex_);
        if (closed_) {
            return;
        }
        closed_ = true;
        groups_.clear();  // every slot and lease is let go
    }
    wakeups_.notify_membership();  // the other processes re-share at once
}

void process_group_membership::rebalance_all() noexcept
{
    const std::lock_guard lock(mutex_);
    if (closed_) {
        return;
    }
    bool released = false;
    for (auto& [name, group] : groups_) {
        try {
            released = rebalance(name, *group) || released;
        } catch (...) {
            // A file error or a closed topic: the next wake-up or period tries again.
        }
    }
    if (released) {
        notify_while_open();  // a process waiting for a lease we let go takes it now
    }
}

bool process_group_membership::rebalance(const std::string& name, group_state& group)
{
    // Who should read what: this process's consumers, ranked among every process's live members.
    const std::vector<std::size_t> live = group.leases.live_members();
    std::map<std::size_t, std::size_t> wanted;  // partition -> consumer index here
    for (const auto& [consumer, member] : group.members) {
        const auto rank = std::lower_bound(live.begin(), live.end(), member.slot);
        if (rank == live.end() || *rank != member.slot) {
            continue;  // not seen as live yet (cannot happen while we hold its lock): next time
        }
        for (const std::size_t partition :
             member_partitions(partitions_, live.size(), static_cast<std::size_t>(rank - live.begin()))) {
            wanted[partition] = consumer;
        }
    }

    // Give up what is no longer ours: revoke it, and release its lease once nobody here uses it.
    for (auto it = group.assigned.begin(); it != group.assigned.end();) {
        const auto want = wanted.find(it->first);
        if (want == wanted.end() || want->second != it->second) {
            const std::size_t partition = it->first;
            port_.revoke(name, it->second, std::vector<std::size_t>{partition});
            it = group.assigned.erase(it);
        } else {
            ++it;
        }
    }
    bool released = false;
    if (!group.partition_leases.empty()) {
        const std::vector<std::size_t> in_use_list = port_.partitions_in_use(name);
        const std::set<std::size_t> in_use(in_use_list.begin(), in_use_list.end());
        for (auto it = group.partition_leases.begin(); it != group.partition_leases.end();) {
            if (!wanted.contains(it->first) && !in_use.contains(it->first)) {
                it = group.partition_leases.erase(it);  // closing the descriptor releases the lease
                released = true;
            } else {
                ++it;
            }
        }
    }

    // Take what is ours: a partition another process still reads waits for its lease.
    for (const auto& [partition, consumer] : wanted) {
        if (group.assigned.contains(partition)) {
            continue;  // already that consumer's (a different one was revoked above)
        }
        if (!group.partition_leases.contains(partition)) {
            std::optional<unique_fd> lease = group.leases.try_take_partition(partition);
            if (!lease) {
                continue;  // the other process lets go, releases it and notifies
            }
            group.partition_leases.emplace(partition, std::move(*lease));
            if (before_assign_) {
                before_assign_(name, partition);
            }
        }
        port_.assign(name, consumer, std::vector<std::size_t>{partition});
        group.assigned[partition] = consumer;
    }
    return released;
}

}  // namespace bufferqueue::detail
