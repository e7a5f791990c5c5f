// Kafka topics: the group member that pull consumers will be built on (docs/kafka.md, "Not yet"):
// joining a group, per-partition reads woken through the event descriptor, commit, resuming after
// the committed offset.
#include "bufferqueue/kafka/detail/kafka_group_member.hpp"

#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/kafka.hpp"

#include "catch.hpp"
#include "kafka_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace kafka_group_member_test {

namespace {

namespace bq = bufferqueue;
using bq::test::quiet_properties;
using bq::test::run_until;

struct recording_listener final : bq::detail::kafka_group_listener {
    void assigned(std::span<const std::int32_t> partitions) noexcept override
    {
        const std::lock_guard lock(mutex);
        owned.insert(partitions.begin(), partitions.end());
    }
    void revoked(std::span<const std::int32_t> partitions) noexcept override
    {
        const std::lock_guard lock(mutex);
        for (const std::int32_t partition : partitions) {
            owned.erase(partition);
        }
        ++revocations;
    }
    void records_available(std::int32_t partition) noexcept override
    {
        const std::lock_guard lock(mutex);
        woken.insert(partition);
    }
    void failed(boost::system::error_code, const std::string& detail) noexcept override
    {
        const std::lock_guard lock(mutex);
        failures.push_back(detail);
    }

    std::set<std::int32_t> owned_now()
    {
        const std::lock_guard lock(mutex);
        return owned;
    }

    std::mutex mutex;
    std::set<std::int32_t> owned;
    std::set<std::int32_t> woken;
    std::vector<std::string> failures;
    int revocations = 0;
};

// Reads every partition the member owns until `count` records arrived (REQUIREs it), keyed by partition.
std::map<std::int32_t, std::vector<bq::detail::kafka_record>> read_records(boost::asio::io_context& io,
                                                                           bq::detail::kafka_group_member& member,
                                                                           recording_listener& listener,
                                                                           std::size_t count)
{
    std::map<std::int32_t, std::vector<bq::detail::kafka_record>> read;
    std::size_t total = 0;
    REQUIRE(run_until(
        io,
        [&] {
            for (const std::int32_t partition : listener.owned_now()) {
                std::uint64_t assignment = 0;
                const std::size_t taken = member.read(partition, 100, read[partition], assignment);
                total += taken;
                if (taken != 0) {  // the records are of the assignment the member holds
                    CHECK(assignment != 0);
                    CHECK(assignment == member.assignment_of(partition));
                }
            }
            return total >= count;
        },
        std::chrono::seconds(20)));
    CHECK(total == count);
    return read;
}

std::string text_of(const bq::detail::kafka_record& record)
{
    return std::string(reinterpret_cast<const char*>(record.value.data()), record.value.size());
}

}  // namespace

TEST_CASE("a kafka group member reads each assigned partition, woken through its event descriptor, and a new "
          "member resumes after the committed offsets",
          "[kafka][slow]")
{
    bq::test::kafka_test_cluster& cluster = bq::test::shared_kafka_cluster();
    const std::string topic = bq::test::unique_topic("events");
    cluster.create_topic(topic, 2);
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(bq::kafka_topic_options<int>{.name = topic,
                                                 .partitions = 2,
                                                 .bootstrap_servers = cluster.bootstrap_servers(),
                                                 .partition_key = [](int value) { return value; },
                                                 .properties = quiet_properties()});
    auto producer = queue.producer<int>(topic);
    std::optional<boost::system::error_code> produced;
    producer.produce(bq::test::range(0, 10), [&](boost::system::error_code error) { produced = error; });
    REQUIRE(run_until(io, [&] { return produced.has_value(); }));
    REQUIRE(*produced == boost::system::error_code());
    std::map<std::int32_t, std::vector<std::string>> expected;
    for (int value = 0; value < 10; ++value) {
        expected[static_cast<std::int32_t>(bq::partition_for_key(value, 2))].push_back(std::to_string(value));
    }
    REQUIRE(expected[0].size() >= 3);

    const bq::detail::kafka_group_settings settings{
        .topic = topic,
        .group = "readers",
        .bootstrap_servers = cluster.bootstrap_servers(),
        .properties = quiet_properties({{"fetch.wait.max.ms", "5"}, {"session.timeout.ms", "6000"}}),
        .executor = io.get_executor()};
    {
        recording_listener listener;
        auto member = bq::detail::kafka_group_member::join(settings, listener);
        REQUIRE(run_until(
            io,
            [&] {
                return listener.owned_now() == std::set<std::int32_t>{0, 1};
            },
            std::chrono::seconds(20)));
        auto read = read_records(io, *member, listener, 10);
        for (std::int32_t partition = 0; partition < 2; ++partition) {
            std::vector<std::string> values;
            for (const auto& record : read[partition]) {
                values.push_back(text_of(record));
            }
            CHECK(values == expected[partition]);
        }
        {
            const std::lock_guard lock(listener.mutex);
            CHECK(listener.woken == std::set<std::int32_t>{0, 1});  // the descriptor path told about both
            CHECK(listener.failures.empty());
        }
        // Partition 1 fully processed; partition 0 only up to its third record.
        std::optional<boost::system::error_code> committed[2];
        member->commit(1, read[1].back().offset + 1, [&](boost::system::error_code error) { committed[1] = error; });
        member->commit(0, read[0][2].offset + 1, [&](boost::system::error_code error) { committed[0] = error; });
        REQUIRE(run_until(io, [&] { return committed[0].has_value() && committed[1].has_value(); }));
        CHECK(*committed[0] == boost::system::error_code());
        CHECK(*committed[1] == boost::system::error_code());
        member->close();
        CHECK(listener.revocations == 1);
        CHECK(listener.owned_now().empty());
        std::uint64_t assignment = 0;
        CHECK(member->read(0, 10, read[0], assignment) == 0);  // nothing is read from a partition it no longer owns
        CHECK(member->assignment_of(0) == 0);
    }
    recording_listener listener;
    auto member = bq::detail::kafka_group_member::join(settings, listener);
    REQUIRE(run_until(
        io,
        [&] {
            return listener.owned_now() == std::set<std::int32_t>{0, 1};
        },
        std::chrono::seconds(20)));
    auto read = read_records(io, *member, listener, expected[0].size() - 3);
    CHECK(read[1].empty());
    std::vector<std::string> values;
    for (const auto& record : read[0]) {
        values.push_back(text_of(record));
    }
    CHECK(values == std::vector<std::string>(expected[0].begin() + 3, expected[0].end()));
    member->close();
}

}  // namespace kafka_group_member_test
