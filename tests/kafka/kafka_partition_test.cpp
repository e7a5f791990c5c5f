// Kafka topics: the partition's cursor over a group member that a rebalance changes under it. The
// member here is scripted (no client, no broker), so each interleaving of a pull, a commit and a
// rebalance that a loaded machine produces only now and then happens here every time.
#include "bufferqueue/kafka/detail/kafka_partition.hpp"
#include "bufferqueue/serialization/serializer.hpp"

#include "catch.hpp"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace kafka_partition_test {

namespace {

namespace bq = bufferqueue;
using partition_type = bq::detail::kafka_partition<int>;

bq::detail::kafka_record record_of(std::int64_t offset, int value)
{
    bq::detail::kafka_record record{.offset = offset, .value = std::vector<std::byte>(sizeof value)};
    std::memcpy(record.value.data(), &value, sizeof value);
    return record;
}

/// A producer client for partitions whose appends these tests never call: it refuses everything.
class refusing_producer final : public bq::detail::kafka_producer {
public:
    enqueue_result produce(std::uint32_t, std::span<const std::byte>, bq::append_listener*, refusal&) override
    {
        return enqueue_result::closed;
    }
    void close() noexcept override {}
    std::size_t in_flight() const noexcept override { return 0; }
    std::uint64_t unawaited_failures() const noexcept override { return 0; }
    bq::detail::kafka_topic_offsets read_offsets(const std::vector<std::string>&, std::chrono::milliseconds) override
    {
        return {};
    }
};

/// A member of one partition whose fetches the test sets: `fetch_from` is what a new assignment's
/// client fetches (records from an offset on); `during_read` runs inside the next read, before it
/// returns, as a rebalance served on the executor while a consumer's pull runs on the I/O pool.
class scripted_member final : public bq::detail::kafka_group_member {
public:
    /// A new assignment: the client fetches `values` from `first_offset` on (an eager rebalance
    /// drops what the previous one had fetched).
    void fetch_from(std::int64_t first_offset, const std::vector<int>& values)
    {
        fetched_.clear();
        for (std::size_t index = 0; index < values.size(); ++index) {
            fetched_.push_back(record_of(first_offset + static_cast<std::int64_t>(index), values[index]));
        }
        assignment_ = ++assignments_made;  // unique in the process, as the client's are
    }

    std::function<void()> during_read;

    std::size_t read(std::int32_t, std::size_t max_records, std::vector<bq::detail::kafka_record>& out,
                     std::uint64_t& assignment) override
    {
        if (auto step = std::exchange(during_read, nullptr)) {
            step();
        }
        std::size_t taken = 0;
        while (taken < max_records && !fetched_.empty()) {
            out.push_back(std::move(fetched_.front()));
            fetched_.pop_front();
            ++taken;
        }
        assignment = assignment_;
        return taken;
    }

    std::uint64_t assignment_of(std::int32_t) const noexcept override { return assignment_; }
    bool has_records(std::int32_t) const noexcept override { return !fetched_.empty(); }
    void commit(std::int32_t, std::int64_t, std::function<void(boost::system::error_code)> done) override { done({}); }
    boost::system::error_code commit_and_wait(std::int32_t, std::int64_t next_offset) override
    {
        commits.push_back(next_offset);
        return {};
    }
    void close() noexcept override {}

    std::vector<std::int64_t> commits;

private:
    static inline std::uint64_t assignments_made = 0;
    std::deque<bq::detail::kafka_record> fetched_;
    std::uint64_t assignment_ = 0;
};

std::vector<std::uint64_t> offsets_of(const bq::pull_result<int>& pulled)
{
    return {pulled.offsets.begin(), pulled.offsets.end()};
}

}  // namespace

TEST_CASE("a kafka pull that reads the records of an assignment made while it ran delivers them from the new "
          "fetch on, and loses none",
          "[kafka][partition]")
{
    partition_type partition("orders", 0, bq::raw_serializer<int>{}, std::make_shared<refusing_producer>());
    partition_type::cursor& reader = partition.open_cursor("billing");
    auto member = std::make_shared<scripted_member>();
    member->fetch_from(0, {10, 11});
    reader.set_owner(member);
    const bq::pull_result<int> first = partition.pull(reader, 1);
    REQUIRE(offsets_of(first) == std::vector<std::uint64_t>{0});

    // An eager rebalance gives the partition back to the same member while the next pull reads:
    // the owner changes, and the new assignment fetches from the committed offset (0, nothing was
    // committed) - the pull reads those records, not the ones the cursor held before.
    member->during_read = [&] {
        reader.clear_owner(member.get());
        member->fetch_from(0, {10, 11, 12});
        reader.set_owner(member);
    };
    const bq::pull_result<int> during = partition.pull(reader, 3);
    CHECK(offsets_of(during) == std::vector<std::uint64_t>{0, 1});  // the two it asked the client for
    // Pulled again without a commit, the batch starts at the same record: nothing read is dropped.
    const bq::pull_result<int> again = partition.pull(reader, 3);
    CHECK(offsets_of(again) == std::vector<std::uint64_t>{0, 1, 2});
    CHECK(std::vector<int>(again.items.begin(), again.items.end()) == std::vector<int>{10, 11, 12});
    // They are the records of the member's assignment now, so the batch can be committed.
    partition.commit(reader, again.next_offset);
    CHECK(member->commits == std::vector<std::int64_t>{3});
    CHECK(partition.pull(reader, 3).items.empty());
}

TEST_CASE("a kafka assignment that fetches from below what its member committed does not deliver those "
          "records again",
          "[kafka][partition]")
{
    partition_type partition("orders", 0, bq::raw_serializer<int>{}, std::make_shared<refusing_producer>());
    partition_type::cursor& reader = partition.open_cursor("billing");
    auto member = std::make_shared<scripted_member>();
    member->fetch_from(40, {100});
    reader.set_owner(member);
    const bq::pull_result<int> first = partition.pull(reader, 10);
    REQUIRE(offsets_of(first) == std::vector<std::uint64_t>{40});
    partition.commit(reader, first.next_offset);
    REQUIRE(member->commits == std::vector<std::int64_t>{41});

    // A rebalance keeps the partition with the member, but its client fetched the committed offset
    // before that commit reached the broker: it fetches offset 40 again.
    reader.clear_owner(member.get());
    member->fetch_from(40, {100, 101});
    reader.set_owner(member);
    const bq::pull_result<int> next = partition.pull(reader, 10);
    CHECK(offsets_of(next) == std::vector<std::uint64_t>{41});
    CHECK(std::vector<int>(next.items.begin(), next.items.end()) == std::vector<int>{101});
}

TEST_CASE("a kafka assignment to another member of the process delivers the records its client fetches",
          "[kafka][partition]")
{
    partition_type partition("orders", 0, bq::raw_serializer<int>{}, std::make_shared<refusing_producer>());
    partition_type::cursor& reader = partition.open_cursor("billing");
    auto first_member = std::make_shared<scripted_member>();
    first_member->fetch_from(7, {70, 71});
    reader.set_owner(first_member);
    const bq::pull_result<int> held = partition.pull(reader, 10);
    REQUIRE(offsets_of(held) == std::vector<std::uint64_t>{7, 8});

    // Not committed: the next owner (another member) gets them from the committed offset again,
    // and the first member's fetch is dropped.
    reader.clear_owner(first_member.get());
    auto second_member = std::make_shared<scripted_member>();
    second_member->fetch_from(7, {70, 71, 72});
    reader.set_owner(second_member);
    CHECK_THROWS(partition.commit(reader, held.next_offset));
    const bq::pull_result<int> next = partition.pull(reader, 10);
    CHECK(offsets_of(next) == std::vector<std::uint64_t>{7, 8, 9});
    partition.commit(reader, next.next_offset);
    CHECK(second_member->commits == std::vector<std::int64_t>{10});
    CHECK(first_member->commits.empty());
}

}  // namespace kafka_partition_test
