// bufferqueue: error codes, their category, and the exception thrown for configuration mistakes.
#pragma once

#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

#include <exception>
#include <string>
#include <system_error>
#include <type_traits>

namespace bufferqueue {

/// Every failure bufferqueue reports. Async completions carry one of these as a
/// `boost::system::error_code`; configuration mistakes throw `bufferqueue::error`.
/// Both codes compare equal to the enumerator: `ec == bufferqueue::errc::queue_full`.
enum class errc : int {
    queue_full = 1,         ///< a bounded topic in `full_mode::fail` has no room for the input
    no_such_topic,          ///< no topic of that name is registered for the item type
    topic_exists,           ///< the (item type, topic name) pair is already registered
    type_mismatch,          ///< the topic name is registered, but for other item types
    group_exists,           ///< the consumer group already exists on that topic
    too_many_consumers,     ///< more consumers requested than the topic has partitions (or zero)
    auto_commit_enabled,    ///< `commit()` called on an auto-commit consumer
    nothing_to_commit,      ///< `commit()` called before any batch was delivered
    invalid_argument,       ///< an option or an argument is out of range
    closed,                 ///< the queue, topic or consumer is closed
    operation_in_progress,  ///< a second `consume()`/`commit()` while one is still pending on the consumer
    corrupt_data,           ///< persisted data or a checkpoint failed validation
    io_error,               ///< the operating system reported an I/O failure (disk full, EIO, ...)
    group_in_use,           ///< `remove_group` while a consumer of the group is still open
    partition_revoked,      ///< `commit()` of a batch whose partition was revoked from the consumer since
                            ///< it was delivered (nothing is committed; the next owner gets the records)
    timed_out,              ///< a networked storage gave up within its timeout (Kafka: `message.timeout.ms`
                            ///< passed before the broker acknowledged a record; `connect_timeout` for metadata),
                            ///< or another process held a process-shared topic's append lock past its bound
    nothing_to_skip,        ///< `skip()` while the last consume did not fail on a record the storage can step
                            ///< past (it succeeded, failed otherwise, or the record's frame is damaged)
    offset_out_of_range,    ///< a group's committed offset names no record of the partition (Kafka: deleted by
                            ///< retention or truncation, or never written); reported, never reset silently
};

/// The category of `bufferqueue::errc`. Thread-safe; never allocates.
const boost::system::error_category& error_category() noexcept;

/// Makes a `boost::system::error_code` (convertible to `std::error_code`) from `e`.
inline boost::system::error_code make_error_code(errc e) noexcept
{
    return {static_cast<int>(e), error_category()};
}

/// Thrown for configuration mistakes and by synchronous calls that cannot complete.
/// `code()` compares equal to the `errc` enumerator; `what()` names the topic, group,
/// file or option at fault. Awaited operations report failures as
/// `boost::system::system_error` instead (that is what `use_awaitable` throws); its
/// `code()` compares equal to the same enumerators.
class error : public std::system_error {
public:
    /// Builds the exception; `message` should name what is at fault. Allocates.
    error(errc code, const std::string& message) : std::system_error(std::error_code(make_error_code(code)), message) {}
};

namespace detail {

/// The code of the exception being handled, for an asynchronous completion: a
/// `bufferqueue::error`'s own code, `fallback` for anything else. Call inside a catch block.
inline boost::system::error_code current_exception_code(errc fallback) noexcept
{
    try {
        throw;
    } catch (const error& failure) {
        return {failure.code().value(), error_category()};
    } catch (...) {
        return make_error_code(fallback);
    }
}

/// The `what()` of the exception being handled, or "unknown exception" for a type not derived
/// from `std::exception`. Call inside a catch block. Allocates.
inline std::string exception_message()
{
    try {
        throw;
    } catch (const std::exception& failure) {
        return failure.what();
    } catch (...) {
        return "unknown exception";
    }
}

/// The message of `failure` (as `exception_message`); empty when out of memory. Never throws.
inline std::string exception_text(const std::exception_ptr& failure) noexcept
{
    try {
        try {
            std::rethrow_exception(failure);
        } catch (...) {
            return exception_message();
        }
    } catch (...) {
        return {};
    }
}

}  // namespace detail

}  // namespace bufferqueue

namespace boost::system {
/// Makes `bufferqueue::errc` an error code enum: a value converts to `boost::system::error_code`
/// in `bufferqueue::error_category()`, and compares equal to such codes.
template <>
struct is_error_code_enum<bufferqueue::errc> : std::true_type {
};
}  // namespace boost::system

namespace std {
/// The same for `std::error_code`: a `bufferqueue::errc` value converts to one through
/// `make_error_code` (Boost's standard-library view of `error_category()`), as `error::code()` holds it.
template <>
struct is_error_code_enum<bufferqueue::errc> : true_type {
};
}  // namespace std
