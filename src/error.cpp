#include "bufferqueue/error.hpp"

namespace bufferqueue {
namespace {

class category_impl final : public boost::system::error_category {
public:
    const char* name() const noexcept override { return "bufferqueue"; }

    std::string message(int value) const override
    {
        switch (static_cast<errc>(value)) {
        case errc::queue_full: return "the topic is full";
        case errc::no_such_topic: return "no such topic";
        case errc::topic_exists: return "the topic already exists";
        case errc::type_mismatch: return "the topic is registered for another item type";
        case errc::group_exists: return "the consumer group already exists";
        case errc::too_many_consumers: return "the consumer count must be between 1 and the partition count";
        case errc::auto_commit_enabled: return "commit() is not allowed on an auto-commit consumer";
        case errc::nothing_to_commit: return "nothing to commit";
        case errc::invalid_argument: return "invalid argument";
        case errc::closed: return "closed";
        case errc::operation_in_progress: return "another operation is already in progress on this consumer";
        case errc::corrupt_data: return "corrupt data";
        case errc::io_error: return "I/O error";
        case errc::group_in_use: return "a consumer of the group is still open";
        case errc::partition_revoked:
            return "the partition of the delivered batch was revoked from this consumer; nothing was committed";
        case errc::timed_out: return "timed out";
        case errc::nothing_to_skip:
            return "nothing to skip: the last consume did not fail on a record the storage can step past";
        case errc::offset_out_of_range:
            return "the group's committed offset is out of range of the partition; nothing was reset";
        }
        return "unknown bufferqueue error";
    }
};

}  // namespace

const boost::system::error_category& error_category() noexcept
{
    static const category_impl instance;
    return instance;
}

}  // namespace bufferqueue
