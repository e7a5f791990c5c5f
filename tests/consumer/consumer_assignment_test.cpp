// Unit tests of a consumer's view of its partitions (consumer/detail/assignment_set.hpp): which
// partitions an adoption lets go, and when the held batch's partition goes.
#include "bufferqueue/consumer/detail/assignment_set.hpp"

#include "catch.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace consumer_assignment_test {

namespace {

namespace bq = bufferqueue;

/// A partition that counts the batches released on each cursor; its other calls are never made here.
struct counting_partition final : bq::detail::partition_reader {
    struct cursor {
        int releases = 0;
    };
    void release_batch(void* each) noexcept override { ++static_cast<cursor*>(each)->releases; }

    void pull(void*, std::size_t, bq::detail::untyped_batch& pulled) override { pulled.count = 0; }
    std::size_t pull_first(std::span<const bq::detail::partition_assignment> entries, std::size_t, std::size_t,
                           bq::detail::untyped_batch&, std::size_t&) override
    {
        return entries.size();
    }
    std::uint64_t commit(void*, std::uint64_t) override { return 0; }
    bool prepare_wait(const void*) noexcept override { return false; }
    std::optional<bq::unreadable_record> unreadable(const void*) const noexcept override { return {}; }
    std::uint64_t committed_items(const void*) const noexcept override { return 0; }
    std::uint64_t lag(const void*) const noexcept override { return 0; }
};

using assignment = bq::detail::consumer_assignment;
using entry = assignment::entry;
using set = bq::detail::assignment_set;

struct fixture {
    counting_partition storage;
    std::vector<counting_partition::cursor> cursors = std::vector<counting_partition::cursor>(4);

    entry entry_of(std::size_t partition) { return entry{partition, &storage, nullptr, &cursors[partition]}; }
    std::shared_ptr<const set> set_of(std::vector<std::size_t> partitions)
    {
        std::vector<entry> entries;
        for (const std::size_t partition : partitions) {
            entries.push_back(entry_of(partition));
        }
        return std::make_shared<const set>(std::move(entries));
    }
};

std::vector<std::size_t> adopt(assignment& view)
{
    std::vector<std::size_t> released;
    view.adopt([&released](std::size_t partition) { released.push_back(partition); });
    return released;
}

}  // namespace

TEST_CASE("consumer assignment: a revoked partition is let go at adoption unless a batch of it is held",
          "[consumer][assignment]")
{
    fixture parts;
    assignment view(parts.set_of({0, 1}));
    view.delivered(parts.entry_of(0), 10);

    view.publish(parts.set_of({}));
    CHECK(adopt(view) == std::vector<std::size_t>{1});  // 0 is held
    CHECK(view.last_revoked());
    CHECK(view.release_held() == std::optional<std::size_t>{0});
    CHECK(parts.cursors[0].releases == 1);
    CHECK(view.release_held() == std::nullopt);  // nothing held any more
}

TEST_CASE("consumer assignment: the held batch's partition published and dropped again before adoption stays "
          "until the batch is released",
          "[consumer][assignment]")
{
    // Seen failing before the fix: the adoption let partition 0 go while its batch was still held,
    // so its next owner could use the cursor before this consumer released the batch.
    fixture parts;
    assignment view(parts.set_of({0}));
    view.delivered(parts.entry_of(0), 10);
    view.publish(parts.set_of({}));
    CHECK(adopt(view).empty());  // held

    view.publish(parts.set_of({0}));  // assigned back ...
    view.publish(parts.set_of({}));   // ... and revoked again, before the consumer adopted either
    CHECK(adopt(view).empty());
    CHECK(parts.cursors[0].releases == 0);
    CHECK(view.release_held() == std::optional<std::size_t>{0});
}

TEST_CASE("consumer assignment: a held batch's partition assigned back before its release stays with the consumer",
          "[consumer][assignment]")
{
    fixture parts;
    assignment view(parts.set_of({0}));
    view.delivered(parts.entry_of(0), 10);
    view.publish(parts.set_of({}));
    CHECK(adopt(view).empty());
    view.publish(parts.set_of({0}));
    CHECK(adopt(view).empty());
    CHECK(view.last_revoked());  // the batch delivered before the revoke still cannot be committed
    CHECK(view.release_held() == std::nullopt);
    CHECK(parts.cursors[0].releases == 1);
}

TEST_CASE("consumer assignment: a partition published and dropped before adoption is let go once adopted",
          "[consumer][assignment]")
{
    fixture parts;
    assignment view(parts.set_of({0}));
    view.publish(parts.set_of({0, 1}));
    view.publish(parts.set_of({0}));
    CHECK(view.reassigned());
    CHECK(adopt(view) == std::vector<std::size_t>{1});
    CHECK_FALSE(view.reassigned());
    CHECK(view.current().partitions() == std::vector<std::size_t>{0});
}

}  // namespace consumer_assignment_test
