// The conformance fixture of the test backend (tests/storage/test_backend/test_backend.hpp), in the
// shape every backend's fixture has (tests/conformance/): the suite registers its topics through
// `add_topic` and reads the backend's properties from the constants.
#pragma once

#include "bufferqueue/buffer_queue.hpp"
#include "storage/test_backend/test_backend.hpp"

#include <memory>
#include <string_view>
#include <utility>

namespace bufferqueue_test_backend {

/// The options of the suite's topic `spec` (a `conformance_topic<T>`, or anything with its fields:
/// name, partitions, partition_key, bounded_capacity, full_mode); the fixtures add their own.
template <class T, template <class> class Spec>
test_backend_topic_options<T> options_from(const Spec<T>& spec)
{
    return {.name = spec.name,
            .partitions = spec.partitions,
            .bounded_capacity = spec.bounded_capacity,
            .full_mode = spec.full_mode,
            .partition_key = spec.partition_key};
}

struct test_backend_fixture {
    static constexpr std::string_view name = "test_backend";
    /// Records live in the partitions, which a new buffer_queue does not reopen.
    static constexpr bool persistent = false;
    /// Supports bounded_capacity and full_mode.
    static constexpr bool bounded = true;

    test_backend_fixture() = default;

    /// Registers the suite's topic `spec` (see `options_from`) on `queue`.
    template <class T, template <class> class Spec>
    void add_topic(bufferqueue::buffer_queue& queue, const Spec<T>& spec)
    {
        queue.add_topic(options_from(spec));
    }
};

/// The test backend behind a broker that acknowledges appends later, from a thread of its own
/// (`test_backend_acknowledger`, a new one per topic, 200 us after each append): awaited produces
/// complete on the acknowledgement; everything else as `test_backend_fixture`.
struct test_backend_acknowledging_fixture {
    static constexpr std::string_view name = "test_backend_acknowledging";
    static constexpr bool persistent = false;
    static constexpr bool bounded = true;

    template <class T, template <class> class Spec>
    void add_topic(bufferqueue::buffer_queue& queue, const Spec<T>& spec)
    {
        test_backend_topic_options<T> options = options_from(spec);
        options.acknowledger = std::make_shared<test_backend_acknowledger>();
        queue.add_topic(std::move(options));
    }
};

/// The test backend with both capabilities of a broker: appends acknowledged later from a thread of
/// its own (`test_backend_acknowledger`) and group membership owned outside the topic
/// (`test_backend_membership`, a new one of each per topic): consumers start with no partitions and
/// get contiguous shares 2 ms after each join or leave, from the membership's thread, as a broker's
/// rebalance gives them. Not immediate; rebalances.
struct test_backend_outside_fixture {
    static constexpr std::string_view name = "test_backend_outside";
    static constexpr bool persistent = false;
    static constexpr bool bounded = true;
    static constexpr bool immediate = false;
    static constexpr bool rebalances = true;

    template <class T, template <class> class Spec>
    void add_topic(bufferqueue::buffer_queue& queue, const Spec<T>& spec)
    {
        test_backend_topic_options<T> options = options_from(spec);
        options.acknowledger = std::make_shared<test_backend_acknowledger>();
        options.membership = std::make_shared<test_backend_membership>(spec.partitions);
        queue.add_topic(std::move(options));
    }
};

}  // namespace bufferqueue_test_backend
