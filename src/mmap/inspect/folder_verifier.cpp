#include "bufferqueue/mmap/inspect/folder_verifier.hpp"

#include "bufferqueue/error.hpp"
#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/group_path.hpp"
#include "bufferqueue/mmap/detail/segment_format.hpp"
#include "bufferqueue/mmap/detail/shared_topic_header.hpp"
#include "bufferqueue/mmap/detail/topic_options_file.hpp"
#include "bufferqueue/mmap/inspect/folder_reader.hpp"

#include "bufferqueue/detail/message.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <vector>

namespace bufferqueue::inspect {

namespace detail = bufferqueue::detail;

namespace {

// The checks of one partition.
class partition_verifier {
public:
    partition_verifier(verify_report& report, const partition_reader& reader)
        : report_(report), reader_(reader), files_(reader.files())
    {
    }

    void run()
    {
        const std::size_t problems_before = report_.problems.size();
        check_checkpoints();
        check_groups();
        check_segments();
        if (report_.problems.size() == problems_before && reader_.summary().problem) {
            // Nothing the sweep sees by itself (a checkpoint ahead of the log, a missing segment, ...).
            problem(files_.folder, std::nullopt,
                    detail::format_message("the recovery check fails: {}", *reader_.summary().problem));
        }
    }

private:
    void problem(const std::string& file, std::optional<std::uint64_t> byte, std::string text)
    {
        report_.problems.push_back({file, byte, std::move(text)});
    }
    void note(const std::string& file, std::optional<std::uint64_t> byte, std::string text)
    {
        report_.notes.push_back({file, byte, std::move(text)});
    }

    template <class Read>
    void check_file(const std::string& path, Read read)
    {
        try {
            if (read(path)) {
                ++report_.checkpoints;
            }
        } catch (const error& failure) {
            ++report_.checkpoints;
            problem(path, 0, failure.what());
        }
    }

    void check_checkpoints()
    {
        check_file(files_.producer_path(),
                   [](const std::string& path) { return detail::read_checkpoint(path).has_value(); });
        check_file(files_.earliest_path(),
                   [](const std::string& path) { return detail::read_checkpoint(path).has_value(); });
        check_file(files_.earliest_items_path(),
                   [](const std::string& path) { return detail::read_item_position(path).has_value(); });
        if (std::optional<detail::unique_fd> mark =
                detail::try_open_file(files_.flush_mark_path(), detail::open_mode::read_only)) {
            std::array<std::byte, detail::flush_mark_size> bytes{};
            const std::size_t read = detail::read_at(*mark, 0, bytes);
            if (read != bytes.size() || !detail::read_flush_mark(bytes)) {
                note(files_.flush_mark_path(), 0, "is not a valid flush mark; recovery ignores it");
            }
        }
        for (const detail::directory_entry& entry : detail::list_directory(files_.folder)) {
            if (entry.name.ends_with(detail::temporary_suffix)) {
                note(files_.folder + "/" + entry.name, std::nullopt,
                     "is the leftover of an interrupted atomic write; the next open removes it");
            }
        }
    }

    void check_groups()
    {
        const std::string offsets = files_.offsets_folder();
        if (!detail::path_exists(offsets)) {
            return;
        }
        for (const detail::directory_entry& entry : detail::list_directory(offsets)) {
            const std::string folder = offsets + "/" + entry.name;
            if (entry.name.ends_with(detail::temporary_suffix)) {
                note(folder, std::nullopt,
                     "is the leftover of an interrupted group creation or deletion; the next open removes it");
                continue;
            }
            if (entry.kind != detail::entry_kind::directory) {
                continue;
            }
            try {
                detail::unescape_group_name(entry.name);
            } catch (const error& failure) {
                problem(folder, std::nullopt, failure.what());
                continue;
            }
            const std::string path = folder + "/consumer.offset";
            if (!detail::path_exists(path)) {
                problem(folder, std::nullopt, "has no consumer.offset");
                continue;
            }
            check_file(path, [](const std::string& each) { return detail::read_checkpoint(each).has_value(); });
        }
    }

    void check_segments()
    {
        std::vector<std::uint64_t> indices;
        for (const detail::directory_entry& entry : detail::list_directory(files_.folder)) {
            if (const auto index = detail::parse_segment_file_name(entry.name)) {
                indices.push_back(*index);
            }
        }
        std::sort(indices.begin(), indices.end());
        const detail::mmap_recovered_state* state = reader_.recovered();
        for (std::size_t slot = 0; slot < indices.size(); ++slot) {
            const std::uint64_t index = indices[slot];
            const std::string path = files_.segment_path(index);
            if (state && index < state->first_segment_index) {
                note(path, std::nullopt,
                     "lies below earliest.offset (an interrupted deletion); the next open removes it");
                continue;
            }
            try {
                check_segment(path, index, slot + 1 == indices.size(), state != nullptr);
            } catch (const error& failure) {
                problem(path, std::nullopt, failure.what());
            }
        }
    }

    void check_segment(const std::string& path, std::uint64_t index, bool last, bool recovered)
    {
        ++report_.segments;
        const detail::unique_fd file = detail::open_file(path, detail::open_mode::read_only);
        const std::uint64_t size = detail::file_size(file);
        if (size != files_.segment_size) {
            problem(path, std::nullopt,
                    detail::format_message("has {} bytes, but the segment size is {}", size, files_.segment_size));
            return;
        }
        const detail::mapped_region region = detail::map_file(file, size, detail::map_access::read_only);
        const std::span<const std::byte> bytes = region.bytes();
        if (const auto header = detail::validate_segment_header(bytes, index, files_.segment_size)) {
            problem(path, 0, detail::format_message("the segment header is damaged: {}", *header));
            return;
        }
        const detail::scan_result scanned = detail::scan_segment(bytes, detail::segment_header_size);
        report_.records += scanned.record_count;
        if (scanned.segment_complete()) {
            return;
        }
        const std::string at = std::string(detail::describe(scanned.reason));
        if (!last) {
            problem(path, scanned.end_position, detail::format_message("{}, but a later segment exists", at));
        } else if (recovered && reader_.summary().tail_bytes > 0) {
            note(path, scanned.end_position,
                 detail::format_message(
                     "{} bytes after the last complete record: a tail being written, or torn by a crash "
                     "(past what was flushed; the next open cuts it off)",
                     reader_.summary().tail_bytes));
        } else if (!recovered && scanned.reason != detail::scan_stop::zero_header) {
            problem(path, scanned.end_position, at);
        }
    }

    verify_report& report_;
    const partition_reader& reader_;
    const detail::mmap_partition_files& files_;
};

// Checks `topic`'s topic.options and that its partitions agree with it: the options, when it holds
// valid ones.
std::optional<detail::stored_topic_options>
check_topic_options(verify_report& report, const std::string& data_directory, const std::string& topic)
{
    const std::string folder = topic_folder(data_directory, topic);
    const std::string path = folder + "/" + std::string(detail::topic_options_layout::file_name);
    if (detail::path_exists(path + std::string(detail::temporary_suffix))) {
        report.notes.push_back({path + std::string(detail::temporary_suffix), std::nullopt,
                                "is the leftover of an interrupted atomic write; the next open removes it"});
    }
    std::optional<detail::stored_topic_options> stored;
    try {
        stored = read_topic_options(data_directory, topic);
    } catch (const error& failure) {
        report.problems.push_back({path, 0, failure.what()});
        return std::nullopt;
    }
    if (!stored) {
        report.notes.push_back(
            {path, std::nullopt,
             "does not exist (the folder was last opened by an earlier release); the next open reads partitions "
             "and segment_size from the files and writes it"});
        return std::nullopt;
    }
    for (const std::size_t partition : list_partitions(data_directory, topic)) {
        if (partition >= stored->partitions) {
            report.problems.push_back({partition_folder(data_directory, topic, partition), std::nullopt,
                                       detail::format_message("lies beyond the {} partitions of {}; an open with "
                                                              "that many partitions fails",
                                                              stored->partitions, path)});
        }
    }
    return stored;
}

// A process-shared topic's shared header, checked as a queue that opens the folder while another
// process holds it checks it (a queue that finds the folder held by nobody makes it anew).
void check_shared_header_file(verify_report& report, const std::string& folder)
{
    using layout = detail::shared_header_layout;
    const std::string path = folder + "/" + std::string(layout::file_name);
    try {
        const std::optional<detail::unique_fd> file = detail::try_open_file(path, detail::open_mode::read_only);
        if (!file) {
            return;
        }
        const std::uint64_t size = detail::file_size(*file);
        std::vector<std::byte> bytes(static_cast<std::size_t>(std::min<std::uint64_t>(size, layout::header_size)));
        bytes.resize(detail::read_at(*file, 0, bytes));
        const detail::shared_header_fields fields = detail::check_shared_header(bytes, size, path);
        bytes.resize(static_cast<std::size_t>(layout::file_size(fields.partitions)));  // within the file's size
        bytes.resize(detail::read_at(*file, 0, bytes));
        detail::check_shared_slots(bytes, fields.partitions, path);
    } catch (const error& failure) {
        report.problems.push_back(
            {path, std::nullopt,
             detail::format_message("{}; a queue opening the topic while another process has it open is refused "
                                    "(the first queue to open it when none has makes it anew)",
                                    failure.what())});
    }
}

}  // namespace

verify_report verify_data_folder(const std::string& data_directory)
{
    verify_report report;
    for (const unexpected_entry& entry : list_unexpected_entries(data_directory)) {
        report.problems.push_back({entry.path, std::nullopt, entry.text});
    }
    for (const std::string& topic : list_topics(data_directory)) {
        ++report.topics;
        const std::optional<detail::stored_topic_options> stored = check_topic_options(report, data_directory, topic);
        check_shared_header_file(report, topic_folder(data_directory, topic));
        for (const std::size_t partition : list_partitions(data_directory, topic)) {
            ++report.partitions;
            try {
                const partition_reader reader(data_directory, topic, partition);
                const std::uint64_t segment_size = reader.summary().segment_size;
                if (stored && segment_size != 0 && segment_size != stored->segment_size) {
                    report.problems.push_back(
                        {reader.files().folder, std::nullopt,
                         detail::format_message("its segments are {} bytes, but topic.options holds a segment_size "
                                                "of {}",
                                                segment_size, stored->segment_size)});
                }
                partition_verifier(report, reader).run();
            } catch (const error& failure) {
                report.problems.push_back(
                    {partition_folder(data_directory, topic, partition), std::nullopt, failure.what()});
            }
        }
    }
    return report;
}

}  // namespace bufferqueue::inspect
