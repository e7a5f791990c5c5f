// The leases through which processes sharing a persistent topic share a consumer group's
// partitions (issue 27), with real processes: the kernel releases a killed member's leases.
#include "bufferqueue/mmap/detail/group_leases.hpp"

#include "catch.hpp"
#include "child_process.hpp"
#include "test_support.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace group_leases_test {

namespace {

using bufferqueue::test::child_process;
using bufferqueue::test::signal_pipe;
using bufferqueue::test::temporary_directory;
namespace detail = bufferqueue::detail;

using slots = std::vector<std::size_t>;

// Runs in a child: joins the group (and takes `partition`'s lease), says so, then waits to be killed.
int hold_until_killed(const detail::group_leases& leases, const signal_pipe& joined,
                      std::optional<std::size_t> partition)
{
    const detail::member_lease member = leases.join();
    std::optional<bufferqueue::detail::unique_fd> lease;
    if (partition) {
        lease = leases.try_take_partition(*partition);
        if (!lease) {
            return 1;
        }
    }
    joined.send(static_cast<char>('0' + member.slot));
    while (true) {
        ::pause();
    }
}

}  // namespace

TEST_CASE("members of a group take the lowest free slots, and a killed process's slot is free again", "[mmap][shared]")
{
    const temporary_directory folder;
    const detail::group_leases leases("billing/eu", folder.string());
    const detail::member_lease first = leases.join();
    CHECK(first.slot == 0);

    const signal_pipe joined;
    child_process other([&] { return hold_until_killed(leases, joined, std::nullopt); });
    REQUIRE(joined.receive());
    const detail::member_lease third = leases.join();
    CHECK(third.slot == 2);
    CHECK(leases.live_members() == slots{0, 1, 2});

    other.kill(SIGKILL);
    CHECK(other.wait() == 128 + SIGKILL);
    CHECK(leases.live_members() == slots{0, 2});
    const detail::member_lease again = leases.join();
    CHECK(again.slot == 1);
    CHECK(leases.live_members() == slots{0, 1, 2});
}

TEST_CASE("a slot a member left is free, and other groups' slots are their own", "[mmap][shared]")
{
    const temporary_directory folder;
    const detail::group_leases billing("billing", folder.string());
    const detail::group_leases audit("audit", folder.string());
    {
        const detail::member_lease left = billing.join();
        CHECK(billing.live_members() == slots{0});
    }
    CHECK(billing.live_members().empty());
    const detail::member_lease audit_member = audit.join();
    CHECK(audit_member.slot == 0);
    CHECK(billing.live_members().empty());
    CHECK(audit.live_members() == slots{0});
}

TEST_CASE("counting live members probes the lock files as they are named and creates none", "[mmap][shared]")
{
    const temporary_directory folder;
    const detail::group_leases leases("billing", folder.string());
    const std::string unpadded = folder.file("groups/billing/member-7.lock");
    std::ofstream(unpadded).flush();  // written by hand, or by another build: nobody holds it
    CHECK(leases.live_members().empty());
    CHECK_FALSE(std::filesystem::exists(folder.file("groups/billing/member-00007.lock")));
}

TEST_CASE("a partition's lease is held by one process at a time and freed when its holder is killed", "[mmap][shared]")
{
    const temporary_directory folder;
    const detail::group_leases leases("billing", folder.string());
    const signal_pipe joined;
    child_process holder([&] { return hold_until_killed(leases, joined, std::size_t{3}); });
    REQUIRE(joined.receive());
    CHECK_FALSE(leases.try_take_partition(3));
    CHECK(leases.try_take_partition(2));  // another partition is free

    holder.kill(SIGKILL);
    CHECK(holder.wait() == 128 + SIGKILL);
    const auto taken = leases.try_take_partition(3);
    CHECK(taken);
    CHECK_FALSE(leases.try_take_partition(3));  // held by this process's descriptor now
}

TEST_CASE("the members' shares of a group's partitions cover every partition once and differ by at most one",
          "[mmap][shared]")
{
    for (std::size_t partitions : {1U, 4U, 7U, 64U}) {
        for (std::size_t members = 1; members <= 9; ++members) {
            std::vector<int> owners(partitions, 0);
            std::size_t smallest = partitions;
            std::size_t largest = 0;
            for (std::size_t rank = 0; rank < members; ++rank) {
                const auto share = detail::member_partitions(partitions, members, rank);
                smallest = std::min(smallest, share.size());
                largest = std::max(largest, share.size());
                for (const std::size_t partition : share) {
                    ++owners.at(partition);
                }
            }
            INFO(partitions << " partitions, " << members << " members");
            CHECK(std::count(owners.begin(), owners.end(), 1) == static_cast<std::ptrdiff_t>(partitions));
            CHECK(largest - smallest <= 1);
        }
    }
    CHECK(detail::member_partitions(4, 0, 0).empty());
    CHECK(detail::member_partitions(4, 2, 2).empty());
}

}  // namespace group_leases_test
