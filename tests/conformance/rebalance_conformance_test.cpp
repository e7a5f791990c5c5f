// Conformance, rebalances (backends whose group membership lives outside the topic): a group's
// consumers share the partitions; when one closes, its partitions move to the others, which resume
// after the group's last commit - what was committed is not delivered again, what the closed
// consumer held uncommitted is.
#include "conformance/conformance_support.hpp"

#include <bufferqueue/bufferqueue.hpp>

#include <algorithm>
#include <cstddef>
#include <map>
#include <set>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace rebalance_conformance_test {

using namespace conformance;

TEMPLATE_LIST_TEST_CASE("conformance: when a consumer closes, its partitions move to the others of its group, which "
                        "resume after the last commit",
                        "[conformance][groups][rebalance]", rebalancing_conformance_backends)
{
    BUFFERQUEUE_CONFORMANCE_BACKEND();
    TestType backend;
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    backend.add_topic(queue, conformance_topic<int>{.name = "shared", .partitions = 4});
    auto consumers = queue.create_pull_consumers<int>(manual("shared", "g", 5), 2);
    REQUIRE(queue.producer<int>("shared").try_produce(range(0, 40)));  // 10 per partition

    // The group protocol shares the partitions between the two.
    REQUIRE(settle_until(
        io, [&] { return consumers[0].partitions().size() == 2 && consumers[1].partitions().size() == 2; }));

    // Each commits one batch; consumer 1 then takes another and closes without committing it.
    std::multiset<int> committed;
    for (auto& consumer : consumers) {
        const std::vector<int> items = consumed_items(consumer, io);
        REQUIRE_FALSE(commit_now(consumer, io));
        committed.insert(items.begin(), items.end());
    }
    const std::vector<int> uncommitted = consumed_items(consumers[1], io);
    REQUIRE_FALSE(uncommitted.empty());
    consumers[1].close();

    // Consumer 0 gets all four partitions and reads the rest.
    REQUIRE(settle_until(io, [&] { return consumers[0].partitions().size() == 4; }));
    std::multiset<int> later;
    REQUIRE(settle_until(io, [&] {
        while (const auto delivered = consumers[0].try_consume()) {
            later.insert(delivered->begin(), delivered->end());
            REQUIRE_FALSE(commit_now(consumers[0], io));
        }
        return committed.size() + later.size() >= 40;
    }));

    for (const int item : committed) {
        INFO("committed item " << item);
        CHECK(later.count(item) == 0);  // never delivered again
    }
    for (const int item : uncommitted) {
        INFO("uncommitted item " << item);
        CHECK(later.count(item) == 1);  // delivered again, to the next owner
    }
    std::multiset<int> all = committed;
    all.insert(later.begin(), later.end());
    const std::vector<int> every(all.begin(), all.end());
    CHECK(every == range(0, 40));  // each item once in all
}

}  // namespace rebalance_conformance_test
