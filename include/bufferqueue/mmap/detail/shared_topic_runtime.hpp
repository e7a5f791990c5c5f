// Internal: what a process-shared persistent topic holds while it is open (issue 27): the shared
// hold on its folder, the shared header, the one watcher that publishes other processes' appends to
// this process's consumers and re-shares the consumer groups when the membership changed, and the
// consumer-group membership shared with the other processes. See
// docs/mmap-storage.md, "Process-shared topics", and docs/design/process-shared-topics.md.
#pragma once

#include "bufferqueue/mmap/detail/file_directory.hpp"
#include "bufferqueue/mmap/detail/mmap_log_writer.hpp"
#include "bufferqueue/mmap/detail/shared_topic_header.hpp"
#include "bufferqueue/mmap/detail/shared_topic_watcher.hpp"
#include "bufferqueue/mmap/detail/topic_options_format.hpp"
#include "bufferqueue/storage/group_membership.hpp"

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace bufferqueue::detail {

class process_group_membership;

/// What the runtime calls on a partition of this process (implemented over `mmap_partition<T>` by
/// the topic). Both must not throw.
class shared_partition_hooks {
public:
    /// Publish what other processes appended; wake the partition's consumers when there is more.
    virtual void refresh() noexcept = 0;
    /// Re-read `group`'s committed position: the partition is about to go to a consumer here.
    virtual void reload_group(std::string_view group) noexcept = 0;

protected:
    ~shared_partition_hooks() = default;
};

/// The process-shared state of one open topic. Build it, open the partitions (`first()` says
/// whether this process recovers and repairs the folder, as today, or finds it open elsewhere),
/// `share` each partition through `link` and `attach` its hooks, then `start`. Destroying it stops
/// the watcher and lets go of the folder; every partition must have detached (its close) before.
///
/// Thread-safety: `attach`, `detach` and the watcher's calls of the partitions' hooks are serialized
/// by one mutex; a partition's hooks are never called once `detach` returned. The watcher re-shares
/// the groups of the membership `make_membership` made (without that mutex) until the membership
/// closes or is destroyed.
class shared_topic_runtime {
public:
    /// How often the watcher looks without being woken, and re-shares partitions without a
    /// membership notification (the bound on how long a dead process's partitions wait for a
    /// survivor).
    static constexpr std::chrono::milliseconds period{200};

    /// Takes the shared hold on `topic_folder` (waiting while another queue opens it), checks
    /// `options` against the folder's stored ones (`check_topic_options`) before anything changes, and
    /// maps its shared header, made anew when no other queue has the folder open. Throws
    /// `error(errc::io_error)` when a queue that is not process-shared has the folder open or for OS
    /// failures, `error(errc::invalid_argument)` naming the option, both values and the folder when the
    /// folder holds data written with other options or the other processes opened it with different
    /// `options`, or naming the header and its owner when another user owns it and `access` is not
    /// `group_write` (see `shared_topic_header`), `error(errc::corrupt_data)` for a damaged header or
    /// topic.options. The files and folders it and its membership create are made for `access`.
    shared_topic_runtime(std::string_view topic, const std::string& topic_folder, const shared_topic_options& options,
                         file_access access = file_access::owner);

    shared_topic_runtime(const shared_topic_runtime&) = delete;
    shared_topic_runtime& operator=(const shared_topic_runtime&) = delete;
    ~shared_topic_runtime();

    /// True when no other queue had the folder open: this one recovers and repairs it.
    bool first() const noexcept { return lock_.first(); }

    /// What `check_topic_options` asked to store in topic.options; only the `first()` queue stores it.
    const std::optional<stored_topic_options>& options_to_store() const noexcept { return options_to_store_; }

    /// Partition `partition`'s part of the shared header.
    mmap_log_writer::shared_log_link link(std::size_t partition) const;

    /// Holds partition `partition`'s append lock while it lives (repairing what a writer that died
    /// holding it left): a later opener recovers the partition under it, so no other process
    /// appends or rolls over meanwhile. Throws like `process_shared_mutex::lock` and the repair.
    class partition_guard {
    public:
        partition_guard(const shared_topic_runtime& runtime, std::size_t partition, const mmap_partition_files& files);
        ~partition_guard() { lock_.unlock(); }
        partition_guard(const partition_guard&) = delete;
        partition_guard& operator=(const partition_guard&) = delete;

    private:
        process_shared_mutex lock_;
    };

    /// Registers partition `partition`'s hooks, called until `detach(partition)`.
    void attach(std::size_t partition, shared_partition_hooks& hooks);

    /// Stops calling partition `partition`'s hooks; waits for a call in progress. Never throws.
    void detach(std::size_t partition) noexcept;

    /// The consumer-group membership shared with the other processes (process_membership.hpp),
    /// re-reading a group's checkpoint through the partition's hooks before it assigns a partition;
    /// the watcher re-shares its groups. Call once, before `start`. Throws `std::bad_alloc`.
    std::shared_ptr<group_membership> make_membership();

    /// Starts the watcher and lets other queues open the folder. Throws `std::system_error` when
    /// the thread cannot start.
    void start();

private:
    struct registry {
        std::mutex mutex;
        std::map<std::size_t, shared_partition_hooks*> partitions;  // guarded by mutex

        void refresh_all() noexcept;
        void reload(const std::string& group, std::size_t partition) noexcept;
    };

    void rebalance_membership() const noexcept;  // on the watcher's thread

    std::string folder_;
    std::size_t partitions_ = 0;
    file_access access_ = file_access::owner;
    shared_directory_lock lock_;
    std::optional<stored_topic_options> options_to_store_;  // checked after the lock, before the header
    shared_topic_header header_;
    std::shared_ptr<registry> registry_ = std::make_shared<registry>();
    std::weak_ptr<process_group_membership> membership_;  // set before start(); the topic owns it
    std::optional<shared_topic_watcher> watcher_;         // last: stopped first
};

}  // namespace bufferqueue::detail
