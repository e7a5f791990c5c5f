// libFuzzer target: the reader of `topic.options` (topic_options_format.hpp), the file that keeps the
// options defining a persistent topic's stored data. A file with arbitrary contents reads as options
// or throws corrupt_data naming the file: options are accepted only from exactly the bytes that
// writing them produces (so a checksum that fails, or any other change, is caught), with at least one
// partition and a valid segment size.
#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/segment_format.hpp"
#include "bufferqueue/mmap/detail/topic_options_file.hpp"

#include "fuzz_support.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>

namespace {

std::string scratch_folder()
{
    const char* shm = "/dev/shm";
    const std::filesystem::path base =
        std::filesystem::is_directory(shm) ? std::filesystem::path(shm) : std::filesystem::temp_directory_path();
    const std::filesystem::path folder = base / ("bufferqueue-fuzz-topic-options-" + std::to_string(::getpid()));
    std::filesystem::create_directories(folder);
    return folder.string();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    namespace bq = bufferqueue;
    namespace detail = bufferqueue::detail;
    using bq::fuzz::require;
    static const std::string folder = scratch_folder();
    static const std::string path = folder + "/" + std::string(detail::topic_options_layout::file_name);
    {
        const detail::unique_fd file = detail::open_file(path, detail::open_mode::create_or_truncate);
        detail::write_at(file, 0, bq::fuzz::as_bytes(data, size));
    }
    try {
        const std::optional<detail::stored_topic_options> options = detail::read_topic_options(folder);
        require(options.has_value(), "an existing topic options file read as missing");
        const std::vector<std::byte> written = detail::encode_topic_options(*options);
        const auto* bytes = reinterpret_cast<const std::byte*>(data);
        require(size == written.size() && std::equal(written.begin(), written.end(), bytes),
                "topic options were accepted that are not what writing them produces");
        require(options->partitions >= 1, "a topic options file with no partitions was accepted");
        require(detail::is_valid_segment_size(options->segment_size), "an invalid segment size was accepted");
    } catch (const bq::error& failure) {
        bq::fuzz::require_corrupt_data(failure);
        require(std::string(failure.what()).find(path) != std::string::npos, "the error does not name the file");
    }
    return 0;
}
