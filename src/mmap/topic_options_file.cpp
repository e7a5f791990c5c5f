#include "bufferqueue/mmap/detail/topic_options_file.hpp"

#include "bufferqueue/mmap/detail/file_checkpoint.hpp"
#include "bufferqueue/mmap/detail/file_directory.hpp"
#include "bufferqueue/mmap/detail/file_handle.hpp"
#include "bufferqueue/mmap/detail/segment_format.hpp"

#include "bufferqueue/detail/message.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <variant>
#include <vector>

namespace bufferqueue::detail {

namespace {

std::string options_path(const std::string& topic_folder)
{
    return topic_folder + "/" + std::string(topic_options_layout::file_name);
}

// The number in a partition folder's name (`partition-` and up to 9 digits), as make_mmap_topic reads
// them; nothing for any other name.
std::optional<std::uint64_t> partition_number(const directory_entry& entry)
{
    constexpr std::string_view prefix = "partition-";
    if (entry.kind != entry_kind::directory || !entry.name.starts_with(prefix)) {
        return std::nullopt;
    }
    const std::string number = entry.name.substr(prefix.size());
    if (number.empty() || number.size() > 9 || number.find_first_not_of("0123456789") != std::string::npos) {
        return std::nullopt;
    }
    return std::stoull(number);
}

// The segment size in the header of the segment file `name` of `folder`, when that header is valid.
std::optional<std::uint64_t> segment_size_in(const std::string& folder, const std::string& name)
{
    const std::optional<std::uint64_t> index = parse_segment_file_name(name);
    if (!index) {
        return std::nullopt;
    }
    std::optional<unique_fd> file = try_open_file(folder + "/" + name, open_mode::read_only);
    if (!file) {
        return std::nullopt;  // deleted meanwhile by another process's retention
    }
    std::array<std::byte, segment_header_size> header{};
    if (read_at(*file, 0, header) != header.size()) {
        return std::nullopt;
    }
    const std::uint64_t size = load_u64_little_endian(header.data() + 24);
    if (!is_valid_segment_size(size) || validate_segment_header(header, *index, size)) {
        return std::nullopt;
    }
    return size;
}

// What the files of a folder without topic.options tell of its options; `given` for what they do not.
stored_topic_options options_of_files(const std::string& topic_folder, const stored_topic_options& given)
{
    stored_topic_options found = given;
    std::optional<std::uint64_t> highest;
    std::optional<std::uint64_t> segment_size;
    for (const directory_entry& entry : list_directory(topic_folder)) {
        const std::optional<std::uint64_t> partition = partition_number(entry);
        if (!partition) {
            continue;
        }
        highest = std::max(highest.value_or(0), *partition);
        const std::string folder = topic_folder + "/" + entry.name;
        for (const directory_entry& file : list_directory(folder)) {
            if (segment_size) {
                break;
            }
            if (file.kind == entry_kind::file) {
                segment_size = segment_size_in(folder, file.name);
            }
        }
    }
    if (highest) {
        found.partitions = *highest + 1;
    }
    found.segment_size = segment_size.value_or(given.segment_size);
    return found;
}

// `name` without the differences of spelling between compilers (`detail::type_name`): spaces, GCC's
// `std::__cxx11::` for clang's `std::`, and the names of anonymous namespaces.
std::string comparable_type_name(std::string_view name)
{
    std::string text;
    for (const char each : name) {
        if (each != ' ') {
            text.push_back(each);
        }
    }
    const auto replace_all = [&](std::string_view from, std::string_view to) {
        for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
            text.replace(at, from.size(), to);
        }
    };
    replace_all("std::__cxx11::", "std::");
    replace_all("(anonymousnamespace)::", "{anonymous}::");
    return text;
}

}  // namespace

error option_mismatch(std::string_view topic, const std::string& topic_folder, options_origin origin,
                      std::string_view option, const std::string& here, const std::string& there)
{
    std::string_view where;
    std::string_view rule;
    switch (origin) {
    case options_origin::open_elsewhere:
        where = "is open process-shared with";
        rule = "partitions, segment_size, max_retained_consumed_segments and the serializer must agree in every "
               "process that has it open";
        break;
    case options_origin::options_file:
        where = "holds data written with";
        rule = "partitions (which may grow), segment_size and the serializer define the stored data (its "
               "topic.options) and cannot change";
        break;
    case options_origin::folder_files:
        where = "holds data written with";
        rule = "partitions (which may grow), segment_size and the serializer define the stored data (read from its "
               "partition folders and segment headers) and cannot change";
        break;
    }
    return error(errc::invalid_argument,
                 detail::format_message("mmap topic '{}': option '{}' is {} here, but {} {} {}; {}", topic, option,
                                        here, topic_folder, where, there, rule));
}

void require_same_options(std::string_view topic, const std::string& topic_folder, options_origin origin,
                          const stored_topic_options& given, const stored_topic_options& found)
{
    const bool may_grow = origin != options_origin::open_elsewhere;
    if (given.partitions != found.partitions && !(may_grow && given.partitions > found.partitions)) {
        throw option_mismatch(topic, topic_folder, origin, "partitions", std::to_string(given.partitions),
                              std::to_string(found.partitions));
    }
    if (given.segment_size != found.segment_size) {
        throw option_mismatch(topic, topic_folder, origin, "segment_size", std::to_string(given.segment_size),
                              std::to_string(found.segment_size));
    }
    if (comparable_type_name(given.serializer_name) != comparable_type_name(found.serializer_name)) {
        throw option_mismatch(topic, topic_folder, origin, "serializer", given.serializer_name, found.serializer_name);
    }
}

std::optional<stored_topic_options> read_topic_options(const std::string& topic_folder)
{
    const std::string path = options_path(topic_folder);
    const std::optional<std::vector<std::byte>> bytes = read_small_file(path, "topic options");
    if (!bytes) {
        return std::nullopt;
    }
    topic_options_decoding decoded = decode_topic_options(*bytes);
    if (auto* problem = std::get_if<std::string>(&decoded)) {
        throw error(errc::corrupt_data, detail::format_message("topic options file {} {}", path, *problem));
    }
    return std::get<stored_topic_options>(std::move(decoded));
}

void write_topic_options(const std::string& topic_folder, const stored_topic_options& options, file_access access)
{
    write_file_atomically(options_path(topic_folder), encode_topic_options(options), access);
}

std::optional<stored_topic_options> check_topic_options(std::string_view topic, const std::string& topic_folder,
                                                        const stored_topic_options& options)
{
    stored_topic_options given = options;
    given.serializer_name = stored_serializer_name(options.serializer_name);
    if (const std::optional<stored_topic_options> stored = read_topic_options(topic_folder)) {
        require_same_options(topic, topic_folder, options_origin::options_file, given, *stored);
        return given.partitions > stored->partitions ? std::optional(given) : std::nullopt;
    }
    require_same_options(topic, topic_folder, options_origin::folder_files, given,
                         options_of_files(topic_folder, given));
    return given;
}

void remove_topic_options_leftover(const std::string& topic_folder)
{
    remove_file(options_path(topic_folder) + std::string(temporary_suffix));
}

}  // namespace bufferqueue::detail
