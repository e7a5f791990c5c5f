// Internal: the storage-independent face of the shared pull consumer, which the pull_consumer handle,
// the push loops and the topic (that creates consumers) use. The consumer layer's own type: the topic
// layer above includes it, never the other way round.
#pragma once

#include "bufferqueue/consumer/detail/partition_reader.hpp"
#include "bufferqueue/detail/completion.hpp"
#include "bufferqueue/detail/storage_runner.hpp"
#include "bufferqueue/skipped_record.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace bufferqueue::detail {

/// What `consume()` found without waiting: an error, a delivered batch, or neither (the consume
/// waits). A value; not thread-safe, owned by the operation that started the consume.
struct consume_attempt {
    boost::system::error_code error{};
    untyped_batch delivered{};   // a batch when `has_batch()`: the scan writes it here, in place
    std::string error_detail{};  // what the storage reported with `error`, when it said more than the code

    /// A batch was delivered (a delivered batch is never empty).
    bool has_batch() const noexcept { return delivered.count != 0; }
};

/// The shared pull consumer, seen through its storage-independent face (implemented by
/// `shared_consumer`). Thread-safety as `pull_consumer`'s: one operation (a consume from
/// `begin_consume` to its completion, `commit`, `skip`, `unreadable`) at a time, and one started
/// while another is pending fails with `errc::operation_in_progress`; `close`, `cancel` and the
/// const members may be called from any thread. Operations report errors as `bufferqueue::errc`
/// codes (see `pull_consumer`); the members that allocate may throw `std::bad_alloc`. Item-type
/// free: batches are `untyped_batch`es, which the typed handles turn into `batch<T>`.
class consumer_base {
public:
    consumer_base(const consumer_base&) = delete;
    consumer_base& operator=(const consumer_base&) = delete;
    virtual ~consumer_base() = default;

    /// Starts a consume: fails, delivers a batch, or (when `will_wait`) leaves the consumer busy
    /// for `wait`.
    virtual consume_attempt begin_consume(bool will_wait) = 0;
    /// Suspends the started consume until data arrives or the consumer closes.
    virtual void wait(std::unique_ptr<pending_completion<boost::system::error_code, untyped_batch>> completion) = 0;
    virtual boost::system::error_code commit() = 0;
    /// Commits past the record the last consume failed on, filling `skipped` (see `pull_consumer::skip`).
    virtual boost::system::error_code skip(skipped_record& skipped) = 0;
    /// Describes that record without committing (see `pull_consumer::unreadable_record`).
    virtual boost::system::error_code unreadable(skipped_record& record) = 0;
    virtual void close() noexcept = 0;
    /// Aborts the consume in progress, if any; see `pull_consumer::cancel`.
    virtual void cancel() noexcept = 0;
    /// Any thread: the last consume delivered from a partition that held more, so the next one will
    /// probably complete without waiting (a hint; see `pull_result::more_ready`).
    virtual bool likely_ready() const noexcept = 0;
    virtual const std::string& topic_name() const noexcept = 0;
    virtual const std::string& group_name() const noexcept = 0;
    /// The partitions assigned now, ascending: a snapshot (see `pull_consumer::partitions`). Allocates.
    virtual std::vector<std::size_t> partitions() const = 0;
    /// Items the consumer's partitions hold that its group has not committed (see `pull_consumer::lag`).
    virtual std::uint64_t lag() const = 0;
    /// How the latest operation failed (see `pull_consumer::last_error`); empty after a success.
    virtual std::string last_error() const = 0;
    virtual const boost::asio::any_io_executor& default_executor() const noexcept = 0;
    /// Where the consumer's storage calls run: its topic's runner (see `storage_runner`).
    virtual const storage_runner& runner() const noexcept = 0;

protected:
    consumer_base() = default;
};

}  // namespace bufferqueue::detail
