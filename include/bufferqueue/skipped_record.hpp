// bufferqueue: what `pull_consumer::skip()` stepped past.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace bufferqueue {

/// The record a `pull_consumer::skip()` committed past (or `unreadable_record()` describes): the
/// partition, the record's offset and the offset after it, in the partition's own log positions
/// (bytes for mmap topics, as in their error messages and `bufferqueue-inspect`), and a copy of its
/// stored bytes. A plain value.
struct skipped_record {
    /// The partition the record is stored in.
    std::size_t partition = 0;
    /// The record's own position in the partition's log.
    std::uint64_t offset = 0;
    /// The position after the record: what `skip()` committed, where the group reads on.
    std::uint64_t next_offset = 0;
    /// A copy of the record's stored bytes, as the serializer was given them (owned: valid after
    /// the consumer moves on).
    std::vector<std::byte> payload{};
};

}  // namespace bufferqueue
