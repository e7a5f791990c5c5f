// Internal: how a consumer's latest operation failed, as text for `pull_consumer::last_error`.
#pragma once

#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/detail/spin_mutex.hpp"

#include <boost/system/error_code.hpp>

#include <mutex>
#include <string>

namespace bufferqueue::detail {

/// The text of the latest failure of a consumer's operations. `record` is called by the thread
/// owning the consumer's operation; `text` from any thread. A run of successes takes no lock.
class last_error_record {
public:
    /// Records how an operation ended: `error` described as `description: detail` (`detail` empty:
    /// the code's message), or nothing after a success. Never throws: without memory for the text,
    /// the code alone reaches the caller.
    template <class Describe>
    void record(const boost::system::error_code& error, const std::string& detail, Describe&& describe) noexcept
    {
        if (!error && !has_text_) {
            return;  // the common case, inline: a run of successes
        }
        record_change(error, detail, describe);
    }

    /// A copy of the recorded text; empty after a success. Allocates the copy.
    std::string text() const
    {
        std::lock_guard lock(mutex_);
        return text_;
    }

private:
    template <class Describe>
    void record_change(const boost::system::error_code& error, const std::string& detail, Describe& describe) noexcept
    {
        std::string text;
        if (error) {
            try {
                text = format_message("{}: {}", describe(), detail.empty() ? error.message() : detail);
            } catch (...) {
                text.clear();
            }
        }
        {
            std::lock_guard lock(mutex_);
            text_.swap(text);
        }
        has_text_ = static_cast<bool>(error);
    }

    bool has_text_ = false;  // owned by the recording thread: text_ is not empty
    mutable spin_mutex mutex_;
    std::string text_;  // guarded by mutex_
};

}  // namespace bufferqueue::detail
