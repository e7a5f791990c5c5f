// The test backend's stand-in for a group protocol owned outside the process's topic (a broker's,
// or other processes'): a `bufferqueue::group_membership` that assigns a topic's partitions to the
// open consumers of each group from a thread of its own, a short delay after every join or leave,
// as a broker's rebalance does. Public headers only.
#pragma once

#include "bufferqueue/storage/group_membership.hpp"

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace bufferqueue_test_backend {

/// Rebalances each group of one topic `delay` after its last join or leave: the open consumers, by
/// index, get contiguous shares of the `partitions` (the first ones one more), handed out through the
/// topic's `membership_port`. Tests may stop the automatic rebalances (`manual`) and move partitions
/// themselves through `port()`. Counts the optional calls. Thread-safe; one per topic.
class test_backend_membership final : public bufferqueue::group_membership {
public:
    explicit test_backend_membership(std::size_t partitions,
                                     std::chrono::microseconds delay = std::chrono::microseconds(2000))
        : partitions_(partitions), delay_(delay), thread_([this] { run(); })
    {
    }

    ~test_backend_membership() override { close(); }

    void bind(bufferqueue::membership_port port) noexcept override
    {
        const std::lock_guard lock(mutex_);
        port_ = std::move(port);
    }

    void consumers_created(const std::string& group, std::size_t count) override
    {
        {
            const std::lock_guard lock(mutex_);
            group_state& state = groups_[group];
            state.open.clear();
            for (std::size_t index = 0; index < count; ++index) {
                state.open.insert(index);
            }
            state.due = std::chrono::steady_clock::now() + delay_;
            state.pending = true;
        }
        wake_.notify_one();
    }

    void consumer_closed(const std::string& group, std::size_t consumer) noexcept override
    {
        std::chrono::milliseconds slow{0};
        {
            const std::lock_guard lock(mutex_);
            ++closes_begun_;
            slow = slow_close_reports_;
        }
        std::this_thread::sleep_for(slow);  // a membership slow to act on a leave (slow_close_reports)
        {
            const std::lock_guard lock(mutex_);
            const auto found = groups_.find(group);
            if (found == groups_.end()) {
                return;
            }
            found->second.open.erase(consumer);
            found->second.due = std::chrono::steady_clock::now() + delay_;
            found->second.pending = true;
            ++closed_consumers_;
        }
        wake_.notify_one();
    }

    void close() noexcept override
    {
        {
            const std::lock_guard lock(mutex_);
            if (closed_) {
                return;
            }
            closed_ = true;
        }
        wake_.notify_one();
        if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) {
            thread_.join();
        }
    }

    void refresh_statistics() noexcept override
    {
        const std::lock_guard lock(mutex_);
        ++statistics_refreshes_;
    }

    bool remove_group(const std::string& group) override
    {
        const std::lock_guard lock(mutex_);
        removed_groups_.push_back(group);
        return groups_.erase(group) != 0;
    }

    /// Records the hint with what `partitions_in_use` says at that moment (asked from inside the hint,
    /// as a membership sharing partitions with other processes would).
    void partitions_let_go(const std::string& group) noexcept override
    {
        bufferqueue::membership_port bound;
        {
            const std::lock_guard lock(mutex_);
            bound = port_;
        }
        std::vector<std::size_t> in_use;
        try {
            in_use = bound.partitions_in_use(group);
        } catch (...) {
            in_use = {999};  // shows up in the test as a partition no topic has
        }
        const std::lock_guard lock(mutex_);
        let_go_hints_.push_back({group, std::move(in_use)});
    }

    /// Each `partitions_let_go` so far: the group, and the partitions in use when it came.
    std::vector<std::pair<std::string, std::vector<std::size_t>>> let_go_hints() const
    {
        const std::lock_guard lock(mutex_);
        return let_go_hints_;
    }

    /// No automatic rebalance from now on (the test moves partitions through `port()`).
    void manual()
    {
        const std::lock_guard lock(mutex_);
        manual_ = true;
    }

    /// Rebalances `group` now, on the calling thread, also when `manual`: the consumers it counts as
    /// open get their contiguous shares (the first ones one more), as a topic without outside
    /// membership splits its partitions. Throws what the port throws.
    void rebalance_now(const std::string& group)
    {
        std::vector<std::size_t> members;
        bufferqueue::membership_port port;
        {
            const std::lock_guard lock(mutex_);
            const auto found = groups_.find(group);
            if (found != groups_.end()) {
                members.assign(found->second.open.begin(), found->second.open.end());
            }
            port = port_;
            ++rebalances_;
        }
        const std::vector<std::vector<std::size_t>> shares = shares_of(members.size());
        for (std::size_t position = 0; position < members.size(); ++position) {
            port.assign(group, members[position], shares[position]);
        }
    }

    /// From now on, every `consumer_closed` waits `delay` before it acts (a membership that is slow
    /// to act on a leave), so a test can run something while a close report is in flight.
    void slow_close_reports(std::chrono::milliseconds delay)
    {
        const std::lock_guard lock(mutex_);
        slow_close_reports_ = delay;
    }

    /// The consumers of `group` the membership counts as open (its next rebalance shares among them).
    std::set<std::size_t> open_consumers(const std::string& group) const
    {
        const std::lock_guard lock(mutex_);
        const auto found = groups_.find(group);
        return found != groups_.end() ? found->second.open : std::set<std::size_t>{};
    }

    /// `consumer_closed` calls begun so far (those of `closed_consumers` and any still waiting).
    std::size_t closes_begun() const
    {
        const std::lock_guard lock(mutex_);
        return closes_begun_;
    }

    /// The port the topic bound (to move partitions by hand).
    bufferqueue::membership_port port() const
    {
        const std::lock_guard lock(mutex_);
        return port_;
    }

    /// Rebalances carried out so far (all groups).
    std::size_t rebalances() const
    {
        const std::lock_guard lock(mutex_);
        return rebalances_;
    }

    std::size_t closed_consumers() const
    {
        const std::lock_guard lock(mutex_);
        return closed_consumers_;
    }

    std::size_t statistics_refreshes() const
    {
        const std::lock_guard lock(mutex_);
        return statistics_refreshes_;
    }

    std::vector<std::string> removed_groups() const
    {
        const std::lock_guard lock(mutex_);
        return removed_groups_;
    }

private:
    struct group_state {
        std::set<std::size_t> open;  // consumer indexes
        std::chrono::steady_clock::time_point due{};
        bool pending = false;
    };

    void run()
    {
        std::unique_lock lock(mutex_);
        while (!closed_) {
            auto next_due = std::chrono::steady_clock::time_point::max();
            std::string due_group;
            bool found_due = false;
            const auto now = std::chrono::steady_clock::now();
            for (auto& [name, state] : groups_) {
                if (!state.pending || manual_) {
                    continue;
                }
                if (state.due <= now) {
                    due_group = name;
                    found_due = true;
                    break;
                }
                next_due = std::min(next_due, state.due);
            }
            if (!found_due) {
                if (next_due == std::chrono::steady_clock::time_point::max()) {
                    wake_.wait(lock);
                } else {
                    wake_.wait_until(lock, next_due);
                }
                continue;
            }
            group_state& state = groups_[due_group];
            state.pending = false;
            const std::vector<std::size_t> members(state.open.begin(), state.open.end());
            const bufferqueue::membership_port port = port_;
            ++rebalances_;
            lock.unlock();  // the port never calls back, but the topic may call in meanwhile
            rebalance(port, due_group, members);
            lock.lock();
        }
    }

    // Contiguous shares over `members`; a partition assigned to a member is revoked from its holder
    // by the topic first, so assigning every share is the whole rebalance.
    void rebalance(const bufferqueue::membership_port& port, const std::string& group,
                   const std::vector<std::size_t>& members) const
    {
        // No members: the partitions stay with nobody until a consumer joins.
        const std::vector<std::vector<std::size_t>> shares = shares_of(members.size());
        for (std::size_t position = 0; position < members.size(); ++position) {
            try {
                port.assign(group, members[position], shares[position]);
            } catch (...) {
                // That consumer closed meanwhile: its leave schedules the next rebalance.
            }
        }
    }

    // The contiguous shares of `members` consumers, by position (the first ones one more).
    std::vector<std::vector<std::size_t>> shares_of(std::size_t members) const
    {
        std::vector<std::vector<std::size_t>> shares(members);
        std::size_t next = 0;
        for (std::size_t position = 0; position < members; ++position) {
            const std::size_t share = partitions_ / members + (position < partitions_ % members ? 1 : 0);
            for (std::size_t i = 0; i < share; ++i) {
                shares[position].push_back(next++);
            }
        }
        return shares;
    }

    const std::size_t partitions_;
    const std::chrono::microseconds delay_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    bufferqueue::membership_port port_;                                           // guarded by mutex_
    std::map<std::string, group_state> groups_;                                   // guarded by mutex_
    bool manual_ = false;                                                         // guarded by mutex_
    bool closed_ = false;                                                         // guarded by mutex_
    std::size_t rebalances_ = 0;                                                  // guarded by mutex_
    std::size_t closed_consumers_ = 0;                                            // guarded by mutex_
    std::size_t closes_begun_ = 0;                                                // guarded by mutex_
    std::chrono::milliseconds slow_close_reports_{0};                             // guarded by mutex_
    std::size_t statistics_refreshes_ = 0;                                        // guarded by mutex_
    std::vector<std::string> removed_groups_;                                     // guarded by mutex_
    std::vector<std::pair<std::string, std::vector<std::size_t>>> let_go_hints_;  // guarded by mutex_
    std::thread thread_;  // last: starts after the members it reads are initialized
};

}  // namespace bufferqueue_test_backend
