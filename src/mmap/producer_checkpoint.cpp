// A persistent partition's producer.offset and when the produce path writes it
// (producer_checkpoint.hpp).
#include "bufferqueue/mmap/detail/producer_checkpoint.hpp"

#include "bufferqueue/mmap/detail/file.hpp"

namespace bufferqueue::detail {

bool producer_checkpoint::hint_due() const noexcept
{
    if (hint_failed_) {
        return true;
    }
    if (records_since_checkpoint_ < flush_batch_size_) {
        return false;
    }
    return records_since_checkpoint_ >= producer_hint_records ||
           std::chrono::steady_clock::now() - checkpoint_time_ >= producer_hint_period;
}

void producer_checkpoint::write(std::uint64_t offset, std::uint64_t unflushed_items)
{
    if (offset != checkpointed_offset_) {
        write_checkpoint(path_, offset, files_.access);
        checkpointed_offset_ = offset;
    }
    records_since_checkpoint_ = static_cast<std::size_t>(unflushed_items);
    checkpoint_time_ = std::chrono::steady_clock::now();
    hint_failed_ = false;
}

void producer_checkpoint::write_hint(std::uint64_t offset, std::uint64_t unflushed_items) noexcept
{
    try {
        write(offset, unflushed_items);
    } catch (...) {
        hint_failed_ = true;  // retried at the next flush, commit or close
    }
}

}  // namespace bufferqueue::detail
