// The backends the conformance suite runs over, one fixture each, and the type list the templated
// tests iterate. A backend joins the suite by writing a fixture of this shape and adding it to
// `conformance_backends` below (the only place to edit).
//
// Fixture shape:
//   static constexpr std::string_view name;   shown in failure messages
//   static constexpr bool persistent;          data and committed positions survive a new
//                                              buffer_queue over the same fixture object
//   static constexpr bool bounded;             supports bounded_capacity and full_mode
//   fixture();                                 prepares what the backend needs (a data folder, ...);
//                                              the destructor removes it
//   template <class T> void add_topic(bufferqueue::buffer_queue&, const conformance_topic<T>&);
//                                              registers the topic through buffer_queue::add_topic
// and optionally (true when absent; see immediate_conformance_backends,
// statistics_conformance_backends and stored_group_statistics_conformance_backends below):
//   static constexpr bool immediate;           consumers own their split when created, and
//                                              try_consume reads a produced item at once
//   static constexpr bool statistics;          queue.stats<T>() counts positions
//   static constexpr bool lists_stored_groups; ...and lists the stored groups this process did not open
// and optionally (false when absent; see rebalancing_conformance_backends):
//   static constexpr bool rebalances;          a group protocol outside the topic moves partitions
//                                              between consumers when one joins or closes
#pragma once

#include "conformance/conformance_topic.hpp"
#include "storage/test_backend/test_backend_fixture.hpp"
#include "test_support.hpp"

#include <bufferqueue/bufferqueue.hpp>

#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

// Kafka topics join the suite when the component is built (tests/CMakeLists.txt defines
// BUFFERQUEUE_TEST_HAS_KAFKA), except under ThreadSanitizer: Debian's librdkafka starts its threads
// with glibc's thrd_create, which clang 14's TSan does not intercept, so TSan aborts as soon as a
// librdkafka thread calls in (docs/kafka.md, "Tests"); CI's TSan stage runs the [concurrency] cases.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BUFFERQUEUE_TEST_UNDER_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define BUFFERQUEUE_TEST_UNDER_TSAN 1
#endif
#if defined(BUFFERQUEUE_TEST_HAS_KAFKA) && !defined(BUFFERQUEUE_TEST_UNDER_TSAN)
#define BUFFERQUEUE_TEST_CONFORMANCE_KAFKA 1
#include "conformance/kafka_backend_fixture.hpp"
#endif

/// In-memory topics: bounded, not persistent.
struct memory_backend {
    static constexpr std::string_view name = "memory";
    static constexpr bool persistent = false;
    static constexpr bool bounded = true;

    template <class T>
    void add_topic(bufferqueue::buffer_queue& queue, const conformance_topic<T>& spec) const
    {
        queue.add_topic(bufferqueue::memory_topic_options<T>{.name = spec.name,
                                                             .partitions = spec.partitions,
                                                             .bounded_capacity = spec.bounded_capacity,
                                                             .full_mode = spec.full_mode,
                                                             .partition_key = spec.partition_key});
    }
};

/// Persistent (mmap) topics in a temporary data folder of their own (on a tmpfs when there is one, so
/// flushes cost little), removed with the fixture; `ProcessShared` sets `process_shared`. Persistent,
/// not bounded: mmap topics have no bounded_capacity.
template <bool ProcessShared>
struct basic_mmap_backend {
    static constexpr bool persistent = true;
    static constexpr bool bounded = false;

    /// Small segments, so tests also roll over segment files; large enough for every record the suite
    /// writes (ints and short strings, JSON-encoded).
    static constexpr std::uint64_t segment_size = 64 * 1024;

    basic_mmap_backend() : directory_("bufferqueue-conformance", bufferqueue::test::memory_backed_temporary_path()) {}

    template <class T>
    void add_topic(bufferqueue::buffer_queue& queue, const conformance_topic<T>& spec) const
    {
        if (spec.bounded_capacity) {
            throw std::invalid_argument("the mmap conformance fixture cannot bound topic '" + spec.name + "'");
        }
        queue.add_topic(bufferqueue::mmap_topic_options<T>{.name = spec.name,
                                                           .partitions = spec.partitions,
                                                           .data_directory = directory_.path(),
                                                           .segment_size = segment_size,
                                                           .partition_key = spec.partition_key,
                                                           .process_shared = ProcessShared});
    }

private:
    bufferqueue::test::temporary_directory directory_;
};

/// mmap topics, the folder a queue's own.
struct mmap_backend : basic_mmap_backend<false> {
    static constexpr std::string_view name = "mmap";
};

/// Process-shared mmap topics (`process_shared = true`): the shared append lock, the shared header's
/// log state, the watcher's wake-ups and the group leases run, with every queue of the case in this
/// process. Group membership goes through the lease files: a consumer starts with no partitions and
/// gets its share once it leased them, and the group's consumers share them again after each join
/// or leave (not `immediate`; `rebalances`).
struct mmap_shared_backend : basic_mmap_backend<true> {
    static constexpr std::string_view name = "mmap (process-shared)";
    static constexpr bool immediate = false;
    static constexpr bool rebalances = true;
};

/// Every backend the conformance suite runs over. Add a backend's fixture here (e.g. the test backend
/// of tests/storage/test_backend/); the filtered lists below follow.
using conformance_backends =
    std::tuple<memory_backend, mmap_backend, mmap_shared_backend, bufferqueue_test_backend::test_backend_fixture,
               bufferqueue_test_backend::test_backend_acknowledging_fixture,
               bufferqueue_test_backend::test_backend_outside_fixture
#if defined(BUFFERQUEUE_TEST_CONFORMANCE_KAFKA)
               ,
               kafka_backend
#endif
               >;

namespace conformance_detail {

template <template <class> class Keep, class List>
struct filter_backends;

template <template <class> class Keep, class... Backends>
struct filter_backends<Keep, std::tuple<Backends...>> {
    using type = decltype(std::tuple_cat(
        std::declval<std::conditional_t<Keep<Backends>::value, std::tuple<Backends>, std::tuple<>>>()...));
};

template <class Backend>
struct is_bounded : std::bool_constant<Backend::bounded> {
};

template <class Backend>
struct is_persistent : std::bool_constant<Backend::persistent> {
};

template <class Backend>
struct is_volatile : std::bool_constant<!Backend::persistent> {
};

/// A fixture without the constant has the property (memory, mmap and the test backend do).
template <class Backend>
constexpr bool is_immediate_v = [] {
    if constexpr (requires { Backend::immediate; }) {
        return Backend::immediate;
    } else {
        return true;
    }
}();

template <class Backend>
struct is_immediate : std::bool_constant<is_immediate_v<Backend>> {
};

template <class Backend>
constexpr bool has_statistics_v = [] {
    if constexpr (requires { Backend::statistics; }) {
        return Backend::statistics;
    } else {
        return true;
    }
}();

template <class Backend>
struct has_statistics : std::bool_constant<has_statistics_v<Backend>> {
};

template <class Backend>
constexpr bool lists_stored_groups_v = [] {
    if constexpr (requires { Backend::lists_stored_groups; }) {
        return Backend::lists_stored_groups;
    } else {
        return true;
    }
}();

template <class Backend>
struct lists_stored_groups : std::bool_constant<has_statistics_v<Backend> && lists_stored_groups_v<Backend>> {
};

template <class Backend>
constexpr bool rebalances_v = [] {
    if constexpr (requires { Backend::rebalances; }) {
        return Backend::rebalances;
    } else {
        return false;
    }
}();

template <class Backend>
struct rebalances : std::bool_constant<rebalances_v<Backend>> {
};

}  // namespace conformance_detail

/// The backends that support bounded_capacity and full_mode.
using bounded_conformance_backends =
    conformance_detail::filter_backends<conformance_detail::is_bounded, conformance_backends>::type;

/// The backends whose data and committed positions survive a new buffer_queue.
using persistent_conformance_backends =
    conformance_detail::filter_backends<conformance_detail::is_persistent, conformance_backends>::type;

/// The backends whose data lives only as long as the buffer_queue.
using volatile_conformance_backends =
    conformance_detail::filter_backends<conformance_detail::is_volatile, conformance_backends>::type;

/// The backends whose consumers own their partitions as soon as they are created (the documented
/// contiguous split) and whose produced items `try_consume` reads at once. Not Kafka: its group
/// protocol assigns the partitions seconds later, and records are readable once fetched
/// (docs/kafka.md, "Pull consumers"). The cases over this list read with `try_consume` / `drain`
/// right after creating consumers or producing.
using immediate_conformance_backends =
    conformance_detail::filter_backends<conformance_detail::is_immediate, conformance_backends>::type;

/// The persistent backends among the immediate ones (see both lists).
using immediate_persistent_conformance_backends =
    conformance_detail::filter_backends<conformance_detail::is_immediate, persistent_conformance_backends>::type;

/// The backends whose `queue.stats<T>()` counts end, earliest and committed positions.
using statistics_conformance_backends =
    conformance_detail::filter_backends<conformance_detail::has_statistics, conformance_backends>::type;

/// The persistent backends among those with statistics.
using statistics_persistent_conformance_backends =
    conformance_detail::filter_backends<conformance_detail::has_statistics, persistent_conformance_backends>::type;

/// The persistent backends with statistics whose snapshots also list the groups they store that no
/// consumer of this process opened. Not Kafka: the 2.0.2 mock has no ListGroups, so a Kafka topic
/// lists the groups opened in this process (docs/kafka.md, "Statistics").
using stored_group_statistics_conformance_backends =
    conformance_detail::filter_backends<conformance_detail::lists_stored_groups, persistent_conformance_backends>::type;

/// The backends whose group membership lives outside the topic and rebalances a group when one of
/// its consumers joins or closes (the test backend's stand-in group protocol). Not Kafka yet: its
/// topics still build their own consumers (docs/kafka.md), and a rebalance on the mock takes seconds.
using rebalancing_conformance_backends =
    conformance_detail::filter_backends<conformance_detail::rebalances, conformance_backends>::type;
