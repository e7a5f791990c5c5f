// The option checks every backend's make_topic shares (topic/option_checks.hpp), compiled once.
#include "bufferqueue/topic/option_checks.hpp"

#include "bufferqueue/detail/message.hpp"
#include "bufferqueue/error.hpp"

namespace bufferqueue {

void require_option(bool valid, std::string_view kind, const std::string& topic, std::string_view option,
                    const std::string& requirement)
{
    if (!valid) {
        throw error(errc::invalid_argument,
                    detail::format_message("{} topic '{}': option '{}' {}", kind, topic, option, requirement));
    }
}

void require_topic_name(std::string_view kind, const std::string& name)
{
    require_option(!name.empty() && !detail::only_whitespace(name), kind, name, "name",
                   "must not be empty or only whitespace");
}

void require_partition_count(std::string_view kind, const std::string& name, std::size_t partitions)
{
    if (partitions < 1 || partitions > max_partitions) {
        require_option(false, kind, name, "partitions",
                       detail::format_message("must be between 1 and {} (got {})", max_partitions, partitions));
    }
}

void require_bounds(std::string_view kind, const std::string& name, std::optional<std::size_t> bounded_capacity,
                    full_mode mode)
{
    require_option(!bounded_capacity || *bounded_capacity >= 1, kind, name, "bounded_capacity",
                   "must be at least 1 when set (got 0)");
    require_option(mode == full_mode::wait || mode == full_mode::fail, kind, name, "full_mode",
                   "must be full_mode::wait or full_mode::fail");
}

}  // namespace bufferqueue
