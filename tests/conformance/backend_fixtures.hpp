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
/// flushes cost little), removed with the fixture. Persistent, not bounded: mmap topics have no
/// bounded_capacity.
struct mmap_backend {
    static constexpr std::string_view name = "mmap";
    static constexpr bool persistent = true;
    static constexpr bool bounded = false;

    /// Small segments, so tests also roll over segment files; large enough for every record the suite
    /// writes (ints and short strings, JSON-encoded).
    static constexpr std::uint64_t segment_size = 64 * 1024;

    mmap_backend() : directory_("bufferqueue-conformance", bufferqueue::test::memory_backed_temporary_path()) {}

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
                                                           .partition_key = spec.partition_key});
    }

private:
    bufferqueue::test::temporary_directory directory_;
};

/// Every backend the conformance suite runs over. Add a backend's fixture here (e.g. the test backend
/// of tests/storage/test_backend/, later Kafka); the filtered lists below follow.
using conformance_backends = std::tuple<memory_backend, mmap_backend, bufferqueue_test_backend::test_backend_fixture>;

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
