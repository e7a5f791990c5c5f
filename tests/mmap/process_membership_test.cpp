// Consumer groups shared by processes (issue 27): process_group_membership shares a group's
// partitions among the consumers of every process through lease files, re-shares them when a
// consumer joins or closes or its process is killed, and never lets two processes read one partition.
// The topics are the test backend's (in memory, one per process): what is shared here is the group's
// partitions, not the data.
#include "bufferqueue/mmap/detail/process_membership.hpp"
#include "bufferqueue/mmap/detail/shared_topic_header.hpp"
#include "storage/test_backend/test_backend.hpp"

#include "bufferqueue/buffer_queue.hpp"
#include "catch.hpp"
#include "child_process.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/io_context.hpp>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace process_membership_test {

namespace {

namespace bq = bufferqueue;
namespace tb = bufferqueue_test_backend;
namespace detail = bufferqueue::detail;
using bufferqueue::test::child_process;
using bufferqueue::test::run_until;
using bufferqueue::test::signal_pipe;
using bufferqueue::test::temporary_directory;
using partitions = std::vector<std::size_t>;
using namespace std::chrono_literals;

constexpr std::size_t partition_count = 6;

detail::shared_topic_options options()
{
    return {.partitions = partition_count, .segment_size = 4096, .serializer_name = "int"};
}

// Stands between a process membership and the topic's port, as the topic sees it: forwards every
// call and records which partitions of each group the membership assigned to this process's
// consumers and did not revoke (a consumer that closed let go of its own, group_membership.hpp). The membership assigns
// a partition only while this process holds its lease, so the record and `all_leases_held` below are how a test sees
// who reads what.
class recording_membership final : public bq::group_membership {
public:
    explicit recording_membership(std::shared_ptr<detail::process_group_membership> inner)
        : inner_(std::move(inner)), link_(std::make_shared<detail::membership_link>(recorder_))
    {
    }

    void bind(bq::membership_port port) noexcept override
    {
        recorder_.topic = std::move(port);
        inner_->bind(bq::membership_port(link_));
    }
    void consumers_created(const std::string& group, std::size_t count) override
    {
        inner_->consumers_created(group, count);
    }
    void consumer_closed(const std::string& group, std::size_t consumer) noexcept override
    {
        {
            const std::lock_guard lock(recorder_.mutex);
            std::erase_if(recorder_.assigned[group], [&](const auto& given) { return given.second == consumer; });
        }
        inner_->consumer_closed(group, consumer);
    }
    void partitions_let_go(const std::string& group) noexcept override { inner_->partitions_let_go(group); }
    void close() noexcept override { inner_->close(); }

    // The partitions of `group` assigned here and not revoked, ascending.
    partitions assigned(const std::string& group) const
    {
        const std::lock_guard lock(recorder_.mutex);
        const auto found = recorder_.assigned.find(group);
        partitions given;
        if (found != recorder_.assigned.end()) {
            for (const auto& [partition, consumer] : found->second) {
                given.push_back(partition);
            }
        }
        return given;
    }

    detail::process_group_membership& inner() { return *inner_; }

private:
    struct recorder final : detail::membership_target {
        void assign_partitions(const std::string& group, std::size_t consumer,
                               std::span<const std::size_t> given) override
        {
            topic.assign(group, consumer, given);
            const std::lock_guard lock(mutex);
            for (const std::size_t partition : given) {
                assigned[group][partition] = consumer;
            }
        }
        void revoke_partitions(const std::string& group, std::size_t consumer,
                               std::span<const std::size_t> taken) override
        {
            topic.revoke(group, consumer, taken);
            const std::lock_guard lock(mutex);
            for (const std::size_t partition : taken) {
                if (const auto found = assigned[group].find(partition);
                    found != assigned[group].end() && found->second == consumer) {
                    assigned[group].erase(found);
                }
            }
        }
        std::vector<std::size_t> partitions_in_use(const std::string& group) override
        {
            return topic.partitions_in_use(group);
        }

        bq::membership_port topic;  // set by bind, before any consumer exists
        mutable std::mutex mutex;
        std::map<std::string, std::map<std::size_t, std::size_t>> assigned;  // partition -> consumer; guarded by mutex
    };

    std::shared_ptr<detail::process_group_membership> inner_;
    recorder recorder_;
    std::shared_ptr<detail::membership_link> link_;
};

// True when some open file description holds the lease of every partition of group "g" in `folder`
// (a lease is one flock: a probe of its own cannot take a lease held in this process either).
bool all_leases_held(const std::string& folder)
{
    const detail::group_leases leases("g", folder);
    for (std::size_t partition = 0; partition < partition_count; ++partition) {
        if (leases.try_take_partition(partition)) {
            return false;  // nobody held it (the probe's lease is let go again here)
        }
    }
    return true;
}

// One process's queue: a test backend topic whose group "g" is shared with the other processes
// through `folder`, and the watcher that re-shares it (the mmap topic's shared_topic_runtime runs
// the one of its topics).
struct process_queue {
    explicit process_queue(const std::string& folder, bool first)
        : header("jobs", folder, options(), first),
          membership(std::make_shared<recording_membership>(
              std::make_shared<detail::process_group_membership>(folder, partition_count, header.wakeups()))),
          watcher(
              header.wakeups(), 20ms, [] {}, [this] { membership->inner().rebalance_all(); }),
          queue(io.get_executor())
    {
        queue.add_topic(tb::test_backend_topic_options<int>{
            .name = "jobs", .partitions = partition_count, .membership = membership});
    }

    bq::pull_consumer<int> consumer() { return queue.create_pull_consumer<int>({.topic = "jobs", .group = "g"}); }

    detail::shared_topic_header header;
    std::shared_ptr<recording_membership> membership;
    detail::shared_topic_watcher watcher;  // stopped after the queue closed the membership
    boost::asio::io_context io;
    bq::buffer_queue queue;
};

// Runs in a child: waits for `go`, then opens one consumer of group "g" in a queue of its own and
// reports its partition count (as a byte) whenever it changes, until killed.
int consume_in_child(const std::string& folder, const signal_pipe& go, const signal_pipe& report)
{
    if (!go.receive()) {
        return 2;
    }
    process_queue process(folder, false);
    auto consumer = process.consumer();
    std::size_t reported = 1000;
    while (true) {
        process.io.run_for(5ms);
        process.io.restart();
        const std::size_t owned = consumer.partitions().size();
        if (owned != reported) {
            reported = owned;
            report.send(static_cast<char>(owned));
        }
    }
}

// Stands for a topic whose consumers the membership assigns partitions to (what the port reaches
// once bound): it takes every assignment and revocation, and no partition is in use.
class accepting_target final : public detail::membership_target {
public:
    void assign_partitions(const std::string&, std::size_t, std::span<const std::size_t>) override {}
    void revoke_partitions(const std::string&, std::size_t, std::span<const std::size_t>) override {}
    std::vector<std::size_t> partitions_in_use(const std::string&) override { return {}; }
};

// `membership` bound to `target`, as a topic binds it before creating consumers.
void bind_to(detail::process_group_membership& membership, accepting_target& target)
{
    membership.bind(bq::membership_port(std::make_shared<detail::membership_link>(target)));
}

}  // namespace

TEST_CASE("a group's partitions are shared among the consumers of two processes, and move to the survivor when "
          "one is killed",
          "[mmap][shared][membership]")
{
    const temporary_directory folder;
    const signal_pipe go;
    const signal_pipe report;
    const detail::shared_topic_header made("jobs", folder.string(), options(), true);
    // Forked before this process starts threads.
    child_process other([&] { return consume_in_child(folder.string(), go, report); });

    process_queue process(folder.string(), false);
    auto consumer = process.consumer();
    REQUIRE(run_until(
        process.io, [&] { return consumer.partitions().size() == partition_count; }, 10s));
    CHECK(process.membership->assigned("g") == partitions{0, 1, 2, 3, 4, 5});
    CHECK(all_leases_held(folder.string()));

    // The other process joins: three partitions each, and no partition is leased by both at once
    // (a lease is one flock; this process lets go of a partition before the other can take it).
    REQUIRE(go.send());
    int child_owns = -1;
    REQUIRE(run_until(
        process.io,
        [&] {
            while (const auto owned = report.receive_within(0ms)) {
                child_owns = *owned;
            }
            return consumer.partitions().size() == 3 && child_owns == 3;
        },
        10s));
    // Both processes hold the leases of what they read: this one the three it was assigned, the
    // other the other three (its consumer reads them), so this one holds no other lease.
    const partitions assigned = process.membership->assigned("g");
    CHECK(assigned.size() == 3);
    CHECK(consumer.partitions() == assigned);
    CHECK(all_leases_held(folder.string()));

    other.kill(SIGKILL);
    CHECK(other.wait() == 128 + SIGKILL);
    // The kernel released the child's leases; within a few periods this process reads everything.
    REQUIRE(run_until(
        process.io, [&] { return consumer.partitions().size() == partition_count; }, 10s));
    CHECK(process.membership->assigned("g") == partitions{0, 1, 2, 3, 4, 5});
    CHECK(all_leases_held(folder.string()));  // the child is dead: by this process
}

TEST_CASE("the partitions of a consumer that closes go to the consumers left, in this process or another",
          "[mmap][shared][membership]")
{
    const temporary_directory folder;
    const detail::shared_topic_header made("jobs", folder.string(), options(), true);
    process_queue first(folder.string(), false);
    process_queue second(folder.string(), false);  // another queue stands for another process
    auto staying = first.consumer();
    auto leaving = second.consumer();
    const auto shared_evenly = [&] { return staying.partitions().size() == 3 && leaving.partitions().size() == 3; };
    REQUIRE(run_until(
        first.io,
        [&] {
            second.io.run_for(2ms);
            second.io.restart();
            return shared_evenly();
        },
        10s));

    leaving.close();
    REQUIRE(run_until(
        first.io,
        [&] {
            second.io.run_for(2ms);
            second.io.restart();
            return staying.partitions().size() == partition_count;
        },
        10s));
    // The first holds every lease (it reads every partition), so the second holds none.
    CHECK(first.membership->assigned("g") == partitions{0, 1, 2, 3, 4, 5});
    CHECK(second.membership->assigned("g").empty());
    CHECK(all_leases_held(folder.string()));
}

// The mmap topic unmaps its shared header - where the wake-up event lives - once its membership has
// closed, and consumers may still report their close (or a let-go) after that, from other threads.
// So a notification must finish before close() returns, and none may follow it. The event lives in
// memory of the test's here, so it can be read after close.
TEST_CASE("a closed process membership no longer notifies the wake-up event, whatever it hears after close",
          "[mmap][process_shared]")
{
    const temporary_directory folder;
    alignas(8) std::byte storage[detail::shared_wakeups::storage_size]{};
    detail::shared_wakeups::initialize(storage);
    const detail::shared_wakeups wakeups(storage);
    const detail::process_shared_event event = wakeups.event();
    accepting_target target;
    detail::process_group_membership membership(folder.string(), partition_count, wakeups);
    bind_to(membership, target);
    membership.consumers_created("g", 2);
    CHECK(wakeups.membership_sequence() == 1);  // the creation is a membership change
    membership.close();
    const std::uint32_t at_close = event.sequence();
    const std::uint32_t membership_at_close = wakeups.membership_sequence();

    membership.partitions_let_go("g");
    membership.consumer_closed("g", 0);
    membership.consumer_closed("g", 1);
    membership.rebalance_all();  // what the topic's watcher may still call
    CHECK(event.sequence() == at_close);
    CHECK(wakeups.membership_sequence() == membership_at_close);
    try {
        membership.consumers_created("g", 1);
        FAIL("consumers_created after close did not throw");
    } catch (const bq::error& failure) {
        CHECK(failure.code() == bq::errc::closed);
    }
    CHECK(event.sequence() == at_close);
}

TEST_CASE("concurrency: consumers closing on one thread while the process membership closes on another notify "
          "the wake-up event only before close returns",
          "[mmap][process_shared][concurrency]")
{
    const temporary_directory folder;
    constexpr std::size_t consumers = 8;
    for (int round = 0; round < 100; ++round) {
        alignas(8) std::byte storage[detail::shared_wakeups::storage_size]{};
        detail::shared_wakeups::initialize(storage);
        const detail::shared_wakeups wakeups(storage);
        const detail::process_shared_event event = wakeups.event();
        accepting_target target;
        detail::process_group_membership membership(folder.string(), partition_count, wakeups);
        bind_to(membership, target);
        membership.consumers_created("g", consumers);
        std::atomic<bool> go{false};
        std::thread closing_consumers([&] {
            while (!go.load()) {
                std::this_thread::yield();
            }
            for (std::size_t consumer = 0; consumer < consumers; ++consumer) {
                membership.partitions_let_go("g");
                membership.consumer_closed("g", consumer);
            }
        });
        go.store(true);
        membership.close();
        const std::uint32_t at_close = event.sequence();
        closing_consumers.join();
        INFO("round " << round);
        REQUIRE(event.sequence() == at_close);
    }
}

}  // namespace process_membership_test
