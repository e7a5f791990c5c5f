// Persistent (mmap) topics: produce throughput for 64-byte records under each flush strategy beside
// the raw floor of the same disk (memcpy into a mapping, msync of one dirty page), and the cost per
// record of each serializer. Files go under $BUFFERQUEUE_BENCH_DIR (default: the working directory),
// which should be on the disk being measured, not a tmpfs.
#include "bufferqueue/bufferqueue.hpp"

#include "bench_support.hpp"

#include <boost/asio/io_context.hpp>
#include <fcntl.h>
#include <msgpack.hpp>
#include <nlohmann/json.hpp>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace bq = bufferqueue;

/// A 64-byte record.
struct record {
    std::int64_t id = 0;
    std::int64_t timestamp = 0;
    std::array<double, 6> values{};

    MSGPACK_DEFINE(id, timestamp, values)
};
static_assert(sizeof(record) == 64);
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(record, id, timestamp, values)

namespace {

record make_record(std::int64_t id)
{
    return record{.id = id, .timestamp = id * 1000 + 7, .values = {0.5, 1.25, 2.0, -3.5, 1e-3, 12345.678}};
}

/// A scratch directory under $BUFFERQUEUE_BENCH_DIR, removed afterwards.
class scratch_directory {
public:
    scratch_directory()
    {
        const char* base = std::getenv("BUFFERQUEUE_BENCH_DIR");
        std::string pattern =
            (std::filesystem::path(base != nullptr && *base != '\0' ? base : ".") / "bench-data-XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) {
            throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
        }
        path_ = pattern;
    }
    scratch_directory(const scratch_directory&) = delete;
    scratch_directory& operator=(const scratch_directory&) = delete;
    ~scratch_directory()
    {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    const std::filesystem::path& path() const noexcept { return path_; }

private:
    std::filesystem::path path_;
};

/// One 64-byte record per try_produce into a one-partition mmap topic with the raw serializer.
void mmap_produce(benchmark::State& state, bq::flush_strategy flush, std::size_t flush_batch_size)
{
    scratch_directory directory;
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(bq::mmap_topic_options<record>{.name = "records",
                                                   .partitions = 1,
                                                   .data_directory = directory.path(),
                                                   .segment_size = 64ULL * 1024 * 1024,
                                                   .flush = flush,
                                                   .flush_batch_size = flush_batch_size,
                                                   .serializer = bq::raw_serializer<record>{}});
    bq::producer<record> producer = queue.producer<record>("records");
    std::int64_t id = 0;
    for (auto _ : state) {
        if (!producer.try_produce(make_record(id++))) {
            state.SkipWithError("the mmap topic refused a record");
            break;
        }
    }
    state.SetItemsProcessed(state.iterations());
}

/// A mapping of a preallocated file in the scratch directory.
class mapped_file {
public:
    mapped_file(const std::filesystem::path& path, std::size_t size) : size_(size)
    {
        descriptor_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (descriptor_ < 0 || ::posix_fallocate(descriptor_, 0, static_cast<off_t>(size)) != 0) {
            throw std::system_error(errno, std::generic_category(), "open/posix_fallocate " + path.string());
        }
        void* address = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor_, 0);
        if (address == MAP_FAILED) {
            throw std::system_error(errno, std::generic_category(), "mmap " + path.string());
        }
        data_ = static_cast<std::byte*>(address);
    }
    mapped_file(const mapped_file&) = delete;
    mapped_file& operator=(const mapped_file&) = delete;
    ~mapped_file()
    {
        ::munmap(data_, size_);
        ::close(descriptor_);
    }
    std::byte* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }

private:
    int descriptor_ = -1;
    std::byte* data_ = nullptr;
    std::size_t size_;
};

/// Floor 1: memcpy of one 64-byte record into a fresh mapping (the page faults included).
void floor_memcpy(benchmark::State& state)
{
    scratch_directory directory;
    mapped_file file(directory.path() / "floor", 256ULL * 1024 * 1024);
    const record item = make_record(1);
    std::size_t offset = 0;
    for (auto _ : state) {
        std::memcpy(file.data() + offset, &item, sizeof item);
        offset += sizeof item;
        if (offset == file.size()) {
            offset = 0;
        }
    }
    benchmark::ClobberMemory();
    state.SetItemsProcessed(state.iterations());
}

/// Floor 2: dirtying one 4 KiB page of the mapping and msync(MS_SYNC) of that page.
void floor_msync_page(benchmark::State& state)
{
    scratch_directory directory;
    mapped_file file(directory.path() / "floor", 64ULL * 1024 * 1024);
    constexpr std::size_t page = 4096;
    std::size_t offset = 0;
    for (auto _ : state) {
        file.data()[offset] = std::byte{1};
        if (::msync(file.data() + offset, page, MS_SYNC) != 0) {
            state.SkipWithError("msync failed");
            break;
        }
        offset = (offset + page) % file.size();
    }
    state.SetItemsProcessed(state.iterations());
}

/// Serializer cost per record: encode into a reused buffer, then decode.
template <class Serializer>
void serializer_round_trip(benchmark::State& state)
{
    const Serializer serializer;
    const record item = make_record(42);
    std::vector<std::byte> buffer;
    for (auto _ : state) {
        buffer.clear();
        serializer.serialize(item, buffer);
        record decoded = serializer.deserialize(buffer);
        benchmark::DoNotOptimize(decoded);
    }
    state.counters["bytes_per_record"] = static_cast<double>(buffer.size());
    state.SetItemsProcessed(state.iterations());
}

const bool registered = [] {
    auto configure = [](benchmark::internal::Benchmark* benchmark) {
        benchmark->Unit(benchmark::kMicrosecond)->UseRealTime();
    };
    configure(benchmark::RegisterBenchmark("mmap/produce/immediate", mmap_produce, bq::flush_strategy::immediate, 100));
    configure(benchmark::RegisterBenchmark("mmap/produce/batch_100", mmap_produce, bq::flush_strategy::batch, 100));
    configure(benchmark::RegisterBenchmark("mmap/produce/batch_1000", mmap_produce, bq::flush_strategy::batch, 1000));
    configure(benchmark::RegisterBenchmark("mmap/floor/memcpy_64B_into_mapping", floor_memcpy));
    configure(benchmark::RegisterBenchmark("mmap/floor/msync_one_page", floor_msync_page));
    configure(benchmark::RegisterBenchmark("serializer/json", serializer_round_trip<bq::json_serializer<record>>));
    configure(
        benchmark::RegisterBenchmark("serializer/msgpack", serializer_round_trip<bq::msgpack_serializer<record>>));
    configure(benchmark::RegisterBenchmark("serializer/raw", serializer_round_trip<bq::raw_serializer<record>>));
    return true;
}();

}  // namespace
