// Tests of the in-memory storage partition: offsets, segments, recycling, pins, and the lifetime of
// stored items.
#include "bufferqueue/detail/thread_number.hpp"
#include "bufferqueue/memory/detail/memory_partition.hpp"

#include "catch.hpp"
#include "test_support.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace memory_partition_test {

/// The item of the tests that count a partition's segments: an int of a type of its own, so that
/// its std::allocator - the one a memory segment takes its item slots from (memory_segment.hpp) -
/// can be the counting one below.
struct counted_item {
    int value;
};

/// Blocks of `counted_item` slots allocated and not yet freed: in these tests only segments
/// allocate them (the tests copy their input with `new[]`), one block a segment, so this is the
/// number of segments alive - held by a lane, kept for reuse, or leaked.
inline std::atomic<std::size_t> live_item_blocks{0};

}  // namespace memory_partition_test

namespace std {

/// `std::allocator` for the tests' own item type (a specialization for a program-defined type, as
/// [namespace.std] allows): allocates as the primary template does and counts live blocks.
template <>
class allocator<memory_partition_test::counted_item> {
public:
    using value_type = memory_partition_test::counted_item;
    using size_type = std::size_t;
    using difference_type = std::ptrdiff_t;
    using propagate_on_container_move_assignment = std::true_type;

    allocator() noexcept = default;
    template <class U>
    allocator(const allocator<U>&) noexcept
    {
    }

    value_type* allocate(std::size_t count)
    {
        auto* block = static_cast<value_type*>(::operator new(count * sizeof(value_type)));
        memory_partition_test::live_item_blocks.fetch_add(1);
        return block;
    }

    void deallocate(value_type* block, std::size_t) noexcept
    {
        memory_partition_test::live_item_blocks.fetch_sub(1);
        ::operator delete(block);
    }

    friend bool operator==(const allocator&, const allocator&) noexcept { return true; }
};

}  // namespace std

namespace memory_partition_test {

namespace {

namespace bq = bufferqueue;
using bq::detail::memory_partition;
using bq::test::range;

/// Remembers the address of every live `tracked` object, so a double destruction, a destruction of
/// a slot never constructed, and a leak are all detected, and live instances can be counted.
class instance_registry {
public:
    void constructed(const void* address)
    {
        std::lock_guard lock(mutex_);
        if (!live_.insert(address).second) {
            ++misuse_;
        }
    }

    void destroyed(const void* address)
    {
        std::lock_guard lock(mutex_);
        if (live_.erase(address) == 0) {
            ++misuse_;
        }
    }

    std::size_t live() const
    {
        std::lock_guard lock(mutex_);
        return live_.size();
    }

    std::size_t misuse() const
    {
        std::lock_guard lock(mutex_);
        return misuse_;
    }

private:
    mutable std::mutex mutex_;
    std::set<const void*> live_;
    std::size_t misuse_ = 0;
};

instance_registry& registry()
{
    static instance_registry instances;
    return instances;
}

/// A non-trivially-destructible item whose instances are registered; copying one marked
/// `throw_on_copy` throws before anything is constructed.
struct tracked {
    explicit tracked(int initial, bool throws = false) : value(initial), throw_on_copy(throws)
    {
        registry().constructed(this);
    }
    tracked(const tracked& other) : value(other.value), throw_on_copy(other.throw_on_copy)
    {
        if (throw_on_copy) {
            throw std::runtime_error("tracked: copy refused");
        }
        registry().constructed(this);
    }
    tracked& operator=(const tracked&) = delete;
    ~tracked() { registry().destroyed(this); }

    int value;
    bool throw_on_copy;
};

template <class T>
bq::item_source<T> all_of(const std::vector<T>& items)
{
    return {items.data(), items.size(), 1, nullptr};
}

/// Appends every item of `items` to the calling thread's lane, the one the topic's router would
/// hand down (`item_source::lane`); returns how many were appended.
template <class T>
std::size_t append(memory_partition<T>& partition, const std::vector<T>& items)
{
    std::size_t appended = 0;
    bq::item_source<T> source = all_of(items);
    source.lane = bq::detail::producer_lane(partition.lane_count());
    partition.append(source, appended);
    return appended;
}

/// Appends `values` as counted items, as `append` does.
std::size_t append(memory_partition<counted_item>& partition, const std::vector<int>& values)
{
    const auto items = std::make_unique<counted_item[]>(values.size());  // new[]: not counted
    std::transform(values.begin(), values.end(), items.get(), [](int value) { return counted_item{value}; });
    std::size_t appended = 0;
    bq::item_source<counted_item> source{items.get(), values.size(), 1, nullptr};
    source.lane = bq::detail::producer_lane(partition.lane_count());
    partition.append(source, appended);
    return appended;
}

/// Segments of counted-item partitions allocated since this count was made and not freed yet.
class segment_count {
public:
    std::size_t allocated() const noexcept { return live_item_blocks.load() - before_; }

private:
    std::size_t before_ = live_item_blocks.load();
};

/// The ranges one after another.
std::vector<int> joined(std::initializer_list<std::vector<int>> parts)
{
    std::vector<int> all;
    for (const std::vector<int>& part : parts) {
        all.insert(all.end(), part.begin(), part.end());
    }
    return all;
}

template <class T>
std::vector<T> values_of(const bq::pull_result<T>& pulled)
{
    return std::vector<T>(pulled.items.begin(), pulled.items.end());
}

std::vector<int> values_of(const bq::pull_result<counted_item>& pulled)
{
    std::vector<int> values;
    for (const counted_item& item : pulled.items) {
        values.push_back(item.value);
    }
    return values;
}

std::vector<int> values_of(const bq::pull_result<tracked>& pulled)
{
    std::vector<int> values;
    for (const tracked& item : pulled.items) {
        values.push_back(item.value);
    }
    return values;
}

/// Pulls and commits batches of up to `batch_size` until the cursor has nothing left; returns the
/// values read, in order. Bounded, so a cursor that stops advancing fails instead of looping.
template <class T>
auto drain(memory_partition<T>& partition, typename memory_partition<T>::cursor& reader, std::size_t batch_size)
{
    decltype(values_of(partition.pull(reader, 1))) read;
    for (int round = 0; round < 100000; ++round) {
        const bq::pull_result<T> pulled = partition.pull(reader, batch_size);
        if (pulled.items.empty()) {
            return read;
        }
        const auto values = values_of(pulled);
        read.insert(read.end(), values.begin(), values.end());
        partition.commit(reader, pulled.next_offset);
    }
    FAIL("the cursor never ran out of items");
    return read;
}

std::string long_string(int value)
{
    return "value-" + std::to_string(value) + "-padded-beyond-the-small-string-optimization";
}

}  // namespace

TEST_CASE("memory partition: append publishes items and pull reads them from the committed position",
          "[memory][storage]")
{
    memory_partition<int> partition(16, false);
    auto& reader = partition.open_cursor("g");
    CHECK_FALSE(partition.has_data(reader));
    CHECK(partition.end_items() == 0);
    CHECK(partition.pull(reader, 10).items.empty());

    REQUIRE(append(partition, range(0, 10)) == 10);
    CHECK(partition.end_items() == 10);
    CHECK(partition.has_data(reader));

    bq::pull_result<int> pulled = partition.pull(reader, 4);
    CHECK(values_of(pulled) == range(0, 4));
    CHECK(pulled.next_offset == 4);
    // Without a commit the same items are read again.
    pulled = partition.pull(reader, 4);
    CHECK(values_of(pulled) == range(0, 4));
    CHECK(pulled.next_offset == 4);

    partition.commit(reader, pulled.next_offset);
    pulled = partition.pull(reader, 4);
    CHECK(values_of(pulled) == range(4, 8));
    CHECK(pulled.next_offset == 8);
    partition.commit(reader, pulled.next_offset);

    pulled = partition.pull(reader, 100);
    CHECK(values_of(pulled) == range(8, 10));
    CHECK(pulled.next_offset == 10);
    partition.commit(reader, pulled.next_offset);
    CHECK_FALSE(partition.has_data(reader));
    pulled = partition.pull(reader, 100);
    CHECK(pulled.items.empty());
    CHECK(pulled.next_offset == 10);

    // Later appends continue at the next offset.
    REQUIRE(append(partition, range(10, 12)) == 2);
    CHECK(partition.end_items() == 12);
    CHECK(drain(partition, reader, 100) == range(10, 12));
}

TEST_CASE("memory partition: append takes every stride-th item or the indexed items in order", "[memory][storage]")
{
    memory_partition<int> partition(3, false);
    auto& reader = partition.open_cursor("g");
    const std::vector<int> input = range(0, 12);
    std::size_t appended = 0;

    SECTION("strided (round-robin slice)")
    {
        partition.append(bq::item_source<int>{input.data() + 1, 4, 3, nullptr}, appended);
        CHECK(appended == 4);
        CHECK(drain(partition, reader, 10) == std::vector<int>{1, 4, 7, 10});
    }
    SECTION("indexed (key-routed slice)")
    {
        const std::vector<std::uint32_t> indices{11, 2, 5, 0, 9};
        partition.append(bq::item_source<int>{input.data(), indices.size(), 1, indices.data()}, appended);
        CHECK(appended == 5);
        CHECK(drain(partition, reader, 10) == std::vector<int>{11, 2, 5, 0, 9});
    }
}

TEST_CASE("memory partition: a batch never spans segments", "[memory][storage]")
{
    memory_partition<int> partition(4, false);
    auto& reader = partition.open_cursor("g");
    REQUIRE(append(partition, range(0, 10)) == 10);

    bq::pull_result<int> pulled = partition.pull(reader, 100);
    CHECK(values_of(pulled) == range(0, 4));
    partition.commit(reader, 2);  // a partial commit inside the first segment
    pulled = partition.pull(reader, 100);
    CHECK(values_of(pulled) == range(2, 4));
    partition.commit(reader, pulled.next_offset);
    pulled = partition.pull(reader, 100);
    CHECK(values_of(pulled) == range(4, 8));
    partition.commit(reader, pulled.next_offset);
    pulled = partition.pull(reader, 100);
    CHECK(values_of(pulled) == range(8, 10));

    SECTION("also with non-trivially-copyable items")
    {
        memory_partition<std::string> strings(3, false);
        auto& string_reader = strings.open_cursor("g");
        std::vector<std::string> input;
        for (int i = 0; i < 7; ++i) {
            input.push_back(long_string(i));
        }
        REQUIRE(append(strings, input) == 7);
        std::vector<std::size_t> sizes;
        for (;;) {
            const auto batch = strings.pull(string_reader, 100);
            if (batch.items.empty()) {
                break;
            }
            sizes.push_back(batch.items.size());
            strings.commit(string_reader, batch.next_offset);
        }
        CHECK(sizes == std::vector<std::size_t>{3, 3, 1});
    }
}

TEST_CASE("memory partition: commit reports the items every group has committed past", "[memory][storage]")
{
    memory_partition<int> partition(4, false);
    auto& fast = partition.open_cursor("fast");
    auto& slow = partition.open_cursor("slow");
    REQUIRE(append(partition, range(0, 10)) == 10);

    CHECK(partition.commit(fast, 4) == 0);  // slow still holds everything
    CHECK(partition.commit(fast, 8) == 0);
    CHECK(partition.commit(slow, 3) == 3);  // within a segment
    CHECK(partition.commit(slow, 9) == 5);  // up to the fast group's position
    CHECK(partition.commit(fast, 10) == 1);
    CHECK(partition.commit(slow, 10) == 1);
}

// A commit of a group that does not hold the minimum skips the recount over every group
// (memory_lane_minimum); the released counts must still be exactly the minimum's rises, whatever
// the order of commits, ties at the minimum and groups opened and removed in between.
TEST_CASE("memory partition: with many groups, each commit reports exactly what the slowest group's move "
          "released, in any commit order",
          "[memory][storage]")
{
    constexpr std::uint64_t item_count = 400;
    const segment_count segments;
    memory_partition<counted_item> partition(8, false);
    std::vector<memory_partition<counted_item>::cursor*> groups;
    std::vector<std::uint64_t> positions;
    const auto open = [&](const std::string& name) {
        groups.push_back(&partition.open_cursor(name));
        positions.push_back(partition.committed_items(*groups.back()));  // the oldest item still held
    };
    for (int index = 0; index < 5; ++index) {
        open("group-" + std::to_string(index));
    }
    REQUIRE(append(partition, range(0, static_cast<int>(item_count))) == item_count);
    CHECK(segments.allocated() == item_count / 8);  // the count sees every segment

    std::uint64_t released_total = 0;
    std::uint64_t mismatches = 0;
    std::uint64_t state = 7;
    const auto next_random = [&state] {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        return state >> 33;
    };
    for (int step = 0; step < 4000; ++step) {
        if (step == 1500) {
            open("late");  // starts at the oldest item still held, below the others: the minimum drops
            REQUIRE(positions.back() < released_total);
        }
        const std::size_t which = step % 3 == 0 ? static_cast<std::size_t>(step / 3) % groups.size()  // lockstep
                                                : next_random() % groups.size();                      // random
        // As a consumer does: pull (0 to 2 items: an empty pull commits where the group is), commit,
        // release the batch.
        const bq::pull_result<counted_item> pulled = partition.pull(*groups[which], next_random() % 3);
        const std::uint64_t to = pulled.items.empty() ? positions[which] : pulled.next_offset;
        positions[which] = to;
        // What the lane gives back: the rise of the minimum over what it gave back so far.
        const std::uint64_t minimum = *std::min_element(positions.begin(), positions.end());
        const std::uint64_t expected = minimum > released_total ? minimum - released_total : 0;
        const std::uint64_t released = partition.commit(*groups[which], to);
        partition.release_batch(*groups[which]);
        mismatches += released == expected ? 0 : 1;
        released_total += released;
    }
    CHECK(mismatches == 0);
    for (auto* group : groups) {  // every group reads the rest
        for (bq::pull_result<counted_item> pulled = partition.pull(*group, 7); !pulled.items.empty();
             pulled = partition.pull(*group, 7)) {
            released_total += partition.commit(*group, pulled.next_offset);
            partition.release_batch(*group);
        }
    }
    CHECK(released_total == item_count);
    CHECK(segments.allocated() <= 4);  // every segment before the last recycled
}

TEST_CASE("memory partition: a slow group never loses unread data when a fast group commits", "[memory][storage]")
{
    const segment_count segments;
    memory_partition<counted_item> partition(4, false);
    auto& fast = partition.open_cursor("fast");
    auto& slow = partition.open_cursor("slow");

    // The fast group reads and commits every item as soon as it exists, so a segment recycled too
    // early would be reused (overwritten) by the next appends.
    std::vector<int> read_by_fast;
    for (int value = 0; value < 100; ++value) {
        REQUIRE(append(partition, std::vector<int>{value}) == 1);
        const auto read = drain(partition, fast, 3);
        read_by_fast.insert(read_by_fast.end(), read.begin(), read.end());
    }
    CHECK(read_by_fast == range(0, 100));
    CHECK(segments.allocated() >= 25);  // 100 unread items of the slow group

    CHECK(drain(partition, slow, 7) == range(0, 100));
    // Once the slow group is past them too, the segments are recycled.
    CHECK(segments.allocated() <= 4);
}

TEST_CASE("memory partition: allocated segments stay bounded in a long produce and consume loop", "[memory][storage]")
{
    const segment_count segments;
    memory_partition<counted_item> partition(8, false);
    auto& first = partition.open_cursor("first");
    auto& second = partition.open_cursor("second");
    std::size_t most_allocated = 0;
    int next_value = 0;
    int expected_first = 0;
    int expected_second = 0;
    bool in_order = true;
    for (int round = 0; round < 20000; ++round) {
        std::vector<int> chunk;
        for (int i = 0; i <= round % 5; ++i) {
            chunk.push_back(next_value++);
        }
        REQUIRE(append(partition, chunk) == chunk.size());
        for (int value : drain(partition, first, 3)) {
            in_order = in_order && value == expected_first++;
        }
        // The second group lags by up to a few rounds.
        if (round % 4 == 3) {
            for (int value : drain(partition, second, 5)) {
                in_order = in_order && value == expected_second++;
            }
        }
        most_allocated = std::max(most_allocated, segments.allocated());
    }
    CHECK(in_order);
    CHECK(expected_first == next_value);
    CHECK(expected_second == next_value);
    // 60000 items went through; without recycling that needs 7500 segments. A lag of four rounds
    // (at most 20 items) spans at most four segments, plus the spare ones; at times more than 8
    // items, so more than one.
    CHECK(most_allocated <= 8);
    CHECK(most_allocated >= 2);
}

TEST_CASE("memory partition: a pulled batch keeps its segment until release_batch", "[memory][storage]")
{
    const segment_count segments;
    memory_partition<counted_item> partition(4, false);
    auto& holder = partition.open_cursor("holder");
    auto& racer = partition.open_cursor("racer");
    REQUIRE(append(partition, range(0, 8)) == 8);

    // The holder commits past its batch (as auto-commit does) but still holds it.
    const bq::pull_result<counted_item> held = partition.pull(holder, 4);
    REQUIRE(values_of(held) == range(0, 4));
    partition.commit(holder, held.next_offset);

    // The racer reads everything while the producer keeps appending: a recycled segment would
    // be reused and overwritten here.
    for (int round = 0; round < 20; ++round) {
        REQUIRE(append(partition, range(8 + round * 4, 12 + round * 4)) == 4);
        drain(partition, racer, 4);
    }
    CHECK(values_of(held) == range(0, 4));

    // The holder moves on: its earlier segments can go now.
    const std::size_t before = segments.allocated();
    partition.release_batch(holder);
    const std::vector<int> rest = drain(partition, holder, 4);
    CHECK(rest == range(4, 88));
    CHECK(segments.allocated() < before);
    CHECK(segments.allocated() <= 4);
}

TEST_CASE("memory partition: a segment a cursor still points into is not recycled", "[memory][storage]")
{
    memory_partition<int> partition(4, false);
    auto& idle = partition.open_cursor("idle");
    auto& busy = partition.open_cursor("busy");

    // The idle group commits exactly to the end of the tail segment (no successor yet), releases
    // its batch and finds nothing more: its cursor still points at that segment.
    REQUIRE(append(partition, range(0, 4)) == 4);
    REQUIRE(drain(partition, idle, 4) == range(0, 4));
    partition.release_batch(idle);

    // The other group moves past the segment while the producer fills the next one and rolls
    // over again, which would reuse a recycled segment.
    REQUIRE(append(partition, range(4, 8)) == 4);
    REQUIRE(drain(partition, busy, 4) == range(0, 8));
    partition.release_batch(busy);
    REQUIRE(append(partition, range(8, 12)) == 4);

    // The idle group resumes from its segment to the next one.
    CHECK(drain(partition, idle, 100) == range(4, 12));
}

TEST_CASE("memory partition: items are destroyed exactly once", "[memory][storage]")
{
    const std::size_t live_before = registry().live();
    const std::size_t misuse_before = registry().misuse();

    SECTION("items never read are destroyed with the partition, including a partial tail")
    {
        {
            memory_partition<tracked> partition(4, false);
            partition.open_cursor("g");
            for (int i = 0; i < 10; ++i) {
                REQUIRE(append(partition, std::vector<tracked>{tracked(i)}) == 1);
            }
            CHECK(registry().live() == live_before + 10);
        }
        CHECK(registry().live() == live_before);
    }

    SECTION("recycled segments destroy their items, and recycling keeps the live count bounded")
    {
        {
            memory_partition<tracked> partition(4, false);
            auto& fast = partition.open_cursor("fast");
            auto& slow = partition.open_cursor("slow");
            std::size_t most_live = 0;
            int expected = 0;
            bool in_order = true;
            for (int round = 0; round < 500; ++round) {
                std::vector<tracked> chunk;
                for (int i = 0; i < 3; ++i) {
                    chunk.emplace_back(round * 3 + i);
                }
                REQUIRE(append(partition, chunk) == 3);
                chunk.clear();
                drain(partition, fast, 2);
                for (int value : drain(partition, slow, 5)) {
                    in_order = in_order && value == expected++;
                }
                most_live = std::max(most_live, registry().live() - live_before);
            }
            CHECK(in_order);
            CHECK(expected == 1500);
            // Only the unrecycled segments hold items: a few segments of 4, never the 1500 appended.
            CHECK(most_live <= 16);
        }
        CHECK(registry().live() == live_before);
    }

    SECTION("std::string items (ASan reports a double free or a leak)")
    {
        memory_partition<std::string> partition(3, false);
        auto& reader = partition.open_cursor("g");
        std::vector<std::string> expected;
        for (int i = 0; i < 50; ++i) {
            expected.push_back(long_string(i));
            std::size_t appended = 0;
            partition.append(bq::item_source<std::string>{&expected.back(), 1, 1, nullptr}, appended);
            REQUIRE(appended == 1);
            if (i % 4 == 0) {
                const auto read = drain(partition, reader, 2);
                CHECK(read == std::vector<std::string>(expected.end() - static_cast<std::ptrdiff_t>(read.size()),
                                                       expected.end()));
            }
        }
    }

    CHECK(registry().misuse() == misuse_before);
}

TEST_CASE("memory partition: a throwing copy constructor publishes only the constructed prefix", "[memory][storage]")
{
    const std::size_t live_before = registry().live();
    const std::size_t misuse_before = registry().misuse();
    const std::size_t segment_size = GENERATE(std::size_t{2}, std::size_t{4}, std::size_t{16});
    INFO("segment_size " << segment_size);
    {
        memory_partition<tracked> partition(segment_size, false);
        auto& reader = partition.open_cursor("g");
        std::vector<tracked> input;
        input.reserve(6);  // growing would copy the throwing item
        for (int i = 0; i < 6; ++i) {
            input.emplace_back(i, i == 3);
        }
        std::size_t appended = 0;
        CHECK_THROWS_AS(partition.append(all_of(input), appended), std::runtime_error);
        CHECK(appended == 3);
        CHECK(partition.end_items() == 3);
        CHECK(registry().live() == live_before + input.size() + 3);

        // The next append continues right after the constructed prefix.
        const std::vector<tracked> more{tracked(10), tracked(11)};
        REQUIRE(append(partition, more) == 2);
        CHECK(partition.end_items() == 5);
        CHECK(drain(partition, reader, 100) == std::vector<int>{0, 1, 2, 10, 11});
    }
    CHECK(registry().live() == live_before);
    CHECK(registry().misuse() == misuse_before);
}

TEST_CASE("memory partition: a new cursor starts at the oldest held item or where a bounded topic released",
          "[memory][storage]")
{
    const bool bounded = GENERATE(false, true);
    INFO("bounded " << bounded);
    memory_partition<int> partition(4, bounded);
    auto& first = partition.open_cursor("first");
    REQUIRE(append(partition, range(0, 10)) == 10);
    REQUIRE(drain(partition, first, 100) == range(0, 10));

    auto& late = partition.open_cursor("late");
    if (bounded) {
        // Capacity up to 10 was given back, so the new group starts there.
        CHECK_FALSE(partition.has_data(late));
        REQUIRE(append(partition, range(10, 12)) == 2);
        CHECK(drain(partition, late, 100) == range(10, 12));
    } else {
        // The oldest item still held is 8: segments [0,4) and [4,8) were recycled.
        CHECK(drain(partition, late, 100) == range(8, 10));
    }
}

TEST_CASE("memory partition: with lanes, every thread's items are read once and in that thread's order",
          "[memory][storage][concurrency]")
{
    const std::size_t lanes = GENERATE(1, 2, 3, 8);
    INFO("lanes " << lanes);
    constexpr int thread_count = 4;
    constexpr int per_thread = 1000;
    memory_partition<int> partition(16, false, lanes);
    CHECK(partition.lane_count() == lanes);
    auto& reader = partition.open_cursor("g");
    std::vector<std::thread> threads;
    for (int thread = 0; thread < thread_count; ++thread) {
        threads.emplace_back([&partition, thread] {
            for (int sequence = 0; sequence < per_thread; ++sequence) {
                const std::vector<int> one{thread * per_thread + sequence};
                append(partition, one);
            }
        });
    }
    for (std::thread& each : threads) {
        each.join();
    }
    CHECK(partition.end_items() == std::uint64_t{thread_count * per_thread});

    const std::vector<int> read = drain(partition, reader, 7);
    REQUIRE(read.size() == std::size_t{thread_count * per_thread});
    std::vector<int> next(thread_count, 0);
    for (const int value : read) {
        const int thread = value / per_thread;
        CHECK(value % per_thread == next[static_cast<std::size_t>(thread)]);
        ++next[static_cast<std::size_t>(thread)];
    }
    CHECK_FALSE(partition.has_data(reader));
}

TEST_CASE("memory partition: a batch holds one lane's items and an uncommitted batch is read again",
          "[memory][storage]")
{
    memory_partition<int> partition(64, false, 8);
    auto& reader = partition.open_cursor("g");
    REQUIRE(append(partition, range(0, 10)) == 10);
    // Threads alive at the same time hold different numbers, so these three appends use three lanes.
    std::thread([&partition] {
        REQUIRE(append(partition, range(100, 110)) == 10);
        std::thread([&partition] { REQUIRE(append(partition, range(200, 205)) == 5); }).join();
    }).join();

    std::vector<std::vector<int>> batches;
    for (int round = 0; round < 10; ++round) {
        const bq::pull_result<int> pulled = partition.pull(reader, 100);
        if (pulled.items.empty()) {
            break;
        }
        // Without a commit the same batch comes again.
        const bq::pull_result<int> again = partition.pull(reader, 100);
        CHECK(values_of(again) == values_of(pulled));
        CHECK(again.next_offset == pulled.next_offset);
        batches.push_back(values_of(pulled));
        partition.release_batch(reader);
        partition.commit(reader, pulled.next_offset);
    }
    std::vector<int> all;
    for (const std::vector<int>& batch : batches) {
        // A batch never mixes two threads' appends.
        CHECK(std::all_of(batch.begin(), batch.end(), [&batch](int value) { return value / 100 == batch[0] / 100; }));
        all.insert(all.end(), batch.begin(), batch.end());
    }
    std::sort(all.begin(), all.end());
    const std::vector<int> expected = joined({range(0, 10), range(100, 110), range(200, 205)});
    CHECK(all == expected);
    CHECK(batches.size() == 3);
}

TEST_CASE("memory partition: each lane recycles its own segments and a slow group keeps every lane's unread items",
          "[memory][storage]")
{
    const segment_count segments;
    memory_partition<counted_item> partition(4, false, 4);
    auto& fast = partition.open_cursor("fast");
    auto& slow = partition.open_cursor("slow");
    REQUIRE(append(partition, range(200, 240)) == 40);
    std::thread([&partition] {
        REQUIRE(append(partition, range(0, 40)) == 40);
        std::thread([&partition] { REQUIRE(append(partition, range(100, 140)) == 40); }).join();
    }).join();

    const std::vector<int> fast_read = drain(partition, fast, 3);
    CHECK(fast_read.size() == 120);
    CHECK(segments.allocated() >= 30);  // the slow group's 120 unread items

    std::vector<int> slow_read = drain(partition, slow, 5);
    std::sort(slow_read.begin(), slow_read.end());
    const std::vector<int> expected = joined({range(0, 40), range(100, 140), range(200, 240)});
    CHECK(slow_read == expected);
    // Each of the three lanes keeps its tail segment; at most two more wait on the free list.
    CHECK(segments.allocated() <= 5);
}

TEST_CASE("memory partition: a group opened before a lane's first append reads that lane from its start",
          "[memory][storage]")
{
    const bool bounded = GENERATE(false, true);
    INFO("bounded " << bounded);
    memory_partition<int> partition(4, bounded, 8);
    auto& early = partition.open_cursor("early");
    REQUIRE(append(partition, range(0, 6)) == 6);
    std::thread([&partition] {
        REQUIRE(append(partition, range(20, 26)) == 6);
        std::thread([&partition] { REQUIRE(append(partition, range(10, 16)) == 6); }).join();
    }).join();
    auto& late = partition.open_cursor("late");
    for (auto* reader : {&early, &late}) {
        std::vector<int> read = drain(partition, *reader, 100);
        std::sort(read.begin(), read.end());
        const std::vector<int> expected = joined({range(0, 6), range(10, 16), range(20, 26)});
        CHECK(read == expected);
    }
}

namespace {

/// Pulls (up to 100 items), releases and commits batches until `reader` has nothing left (at most
/// 10); returns them sorted, so a test compares the batches each lane made, not their order.
std::vector<std::vector<int>> sorted_batches(memory_partition<int>& partition, memory_partition<int>::cursor& reader)
{
    std::vector<std::vector<int>> batches;
    for (int round = 0; round < 10; ++round) {
        const bq::pull_result<int> pulled = partition.pull(reader, 100);
        if (pulled.items.empty()) {
            break;
        }
        batches.push_back(values_of(pulled));
        partition.release_batch(reader);
        partition.commit(reader, pulled.next_offset);
    }
    std::sort(batches.begin(), batches.end());
    return batches;
}

}  // namespace

TEST_CASE("memory partition: an append on behalf of another producing thread goes to the lane its source names",
          "[memory][storage]")
{
    memory_partition<int> partition(64, true, 8);
    auto& reader = partition.open_cursor("g");
    REQUIRE(append(partition, range(0, 3)) == 3);
    const std::size_t this_lane = bq::detail::producer_lane_of(bq::detail::producer_thread_number(), 8);
    // Another thread appends in this thread's lane (a waiting produce it completes), then in its own.
    std::thread([&partition, this_lane] {
        const std::vector<int> on_behalf = range(3, 6);
        std::size_t appended = 0;
        partition.append(bq::item_source<int>{on_behalf.data(), on_behalf.size(), 1, nullptr, this_lane}, appended);
        REQUIRE(appended == 3);
        REQUIRE(append(partition, range(100, 102)) == 2);
    }).join();

    const std::vector<std::vector<int>> batches = sorted_batches(partition, reader);
    // One batch per lane: this thread's items together and in order, the other thread's own apart.
    CHECK(batches == std::vector<std::vector<int>>{range(0, 6), range(100, 102)});
}

TEST_CASE("memory partition: an append whose source names no lane goes to the shared last lane", "[memory][storage]")
{
    static_assert(bq::laned_partition<memory_partition<int>>);
    memory_partition<int> partition(64, false, 4);
    auto& reader = partition.open_cursor("g");
    const auto append_to_lane = [&partition](const std::vector<int>& items, std::size_t lane) {
        std::size_t appended = 0;
        partition.append(bq::item_source<int>{items.data(), items.size(), 1, nullptr, lane}, appended);
        REQUIRE(appended == items.size());
    };
    append_to_lane(range(0, 2), 0);
    // From two threads: the default (`shared_lane`) and any value past the last lane mean the last lane.
    std::thread([&] {
        std::size_t appended = 0;
        partition.append(all_of(range(12, 14)), appended);
        REQUIRE(appended == 2);
        append_to_lane(range(14, 16), 99);
    }).join();
    append_to_lane(range(16, 18), bq::item_source<int>::shared_lane);
    const std::vector<std::vector<int>> batches = sorted_batches(partition, reader);
    CHECK(batches == std::vector<std::vector<int>>{range(0, 2), range(12, 18)});
}

namespace {

/// Pulls, releases and commits batches of up to `batch_size` until `reader` has nothing left;
/// returns how many items it read.
std::size_t drain_released(memory_partition<int>& partition, memory_partition<int>::cursor& reader,
                           std::size_t batch_size)
{
    std::size_t read = 0;
    for (int round = 0; round < 100000; ++round) {
        const bq::pull_result<int> pulled = partition.pull(reader, batch_size);
        if (pulled.items.empty()) {
            break;
        }
        read += pulled.items.size();
        partition.release_batch(reader);
        partition.commit(reader, pulled.next_offset);
    }
    return read;
}

}  // namespace

TEST_CASE("memory partition: statistics count the items appended, still held and committed by each group",
          "[memory][storage]")
{
    const bool bounded = GENERATE(false, true);
    INFO("bounded " << bounded);
    memory_partition<int> partition(4, bounded);
    auto& slow = partition.open_cursor("slow");
    auto& fast = partition.open_cursor("fast");
    CHECK(partition.end_items() == 0);
    CHECK(partition.earliest_items() == 0);
    CHECK(partition.committed_items(slow) == 0);

    REQUIRE(append(partition, range(0, 10)) == 10);
    CHECK(partition.end_items() == 10);
    CHECK(partition.earliest_items() == 0);
    CHECK(partition.committed_items(fast) == 0);

    REQUIRE(drain_released(partition, fast, 3) == 10);
    CHECK(partition.committed_items(fast) == 10);
    CHECK(partition.committed_items(slow) == 0);
    CHECK(partition.earliest_items() == 0);  // the slow group holds everything

    const bq::pull_result<int> pulled = partition.pull(slow, 3);
    REQUIRE(pulled.next_offset == 3);
    partition.release_batch(slow);
    partition.commit(slow, pulled.next_offset);
    CHECK(partition.committed_items(slow) == 3);
    // Bounded: capacity was given back up to 3. Unbounded: segment [0,4) is still held.
    CHECK(partition.earliest_items() == (bounded ? 3 : 0));

    REQUIRE(drain_released(partition, slow, 100) == 7);
    CHECK(partition.committed_items(slow) == 10);
    // Unbounded: segments [0,4) and [4,8) were recycled, the tail [8,12) is held.
    CHECK(partition.earliest_items() == (bounded ? 10 : 8));

    REQUIRE(append(partition, range(10, 12)) == 2);
    CHECK(partition.end_items() == 12);
    CHECK(partition.committed_items(slow) == 10);
    // A group opened now starts at earliest_items().
    auto& late = partition.open_cursor("late");
    CHECK(partition.committed_items(late) == partition.earliest_items());
}

TEST_CASE("memory partition: with lanes, the statistics are sums over the lanes", "[memory][storage]")
{
    memory_partition<int> partition(4, false, 8);
    auto& reader = partition.open_cursor("g");
    REQUIRE(append(partition, range(0, 6)) == 6);
    std::thread([&partition] { REQUIRE(append(partition, range(100, 105)) == 5); }).join();
    CHECK(partition.end_items() == 11);
    CHECK(partition.committed_items(reader) == 0);

    REQUIRE(drain_released(partition, reader, 100) == 11);
    CHECK(partition.committed_items(reader) == 11);
    // Each lane recycled its segment [0,4) and holds its tail [4,8).
    CHECK(partition.earliest_items() == 8);
}

TEST_CASE("memory partition: statistics read while producers and a consumer run are ordered and never go back",
          "[memory][storage][concurrency]")
{
    constexpr std::size_t producer_count = 2;
    constexpr int per_producer = 2000;
    memory_partition<int> partition(16, false, 3);
    auto& reader = partition.open_cursor("g");
    std::atomic<bool> consumed{false};
    std::vector<std::thread> threads;
    for (std::size_t producer = 0; producer < producer_count; ++producer) {
        threads.emplace_back([&partition] {
            for (int sequence = 0; sequence < per_producer; ++sequence) {
                append(partition, std::vector<int>{sequence});
            }
        });
    }
    threads.emplace_back([&partition, &reader, &consumed] {
        std::size_t read = 0;
        while (read < producer_count * per_producer) {
            read += drain_released(partition, reader, 7);
            std::this_thread::yield();
        }
        consumed.store(true);
    });

    std::size_t disordered = 0;
    std::size_t went_back = 0;
    std::uint64_t last_earliest = 0;
    std::uint64_t last_committed = 0;
    std::uint64_t last_end = 0;
    while (!consumed.load()) {
        // In this order each is at most the next: every lane's position only moves forward.
        const std::uint64_t earliest = partition.earliest_items();
        const std::uint64_t committed = partition.committed_items(reader);
        const std::uint64_t end = partition.end_items();
        disordered += earliest <= committed && committed <= end ? 0 : 1;
        went_back += earliest >= last_earliest && committed >= last_committed && end >= last_end ? 0 : 1;
        last_earliest = earliest;
        last_committed = committed;
        last_end = end;
    }
    for (std::thread& each : threads) {
        each.join();
    }
    CHECK(disordered == 0);
    CHECK(went_back == 0);
    CHECK(partition.end_items() == producer_count * per_producer);
    CHECK(partition.committed_items(reader) == producer_count * per_producer);
}

}  // namespace memory_partition_test
