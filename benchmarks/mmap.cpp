// Persistent (mmap) topics: produce throughput for 64-byte records under each flush strategy beside
// the raw floor of the same disk (memcpy into a mapping, msync of one dirty page, one write + msync
// per record through the library's file layer), durable produce from 1 and 4 threads (group
// commit), the durable stores a user would pick instead (SQLite in WAL mode with synchronous=FULL,
// RocksDB with synced write batches; when found at configure time) and the cost per record of each
// serializer. Files go under $BUFFERQUEUE_BENCH_DIR (default: the working directory), which should
// be on the disk being measured, not a tmpfs.
#include "bufferqueue/bufferqueue.hpp"
#include "bufferqueue/mmap/detail/file.hpp"

#include "bench_support.hpp"
#include "mmap_support.hpp"

#if BUFFERQUEUE_BENCH_SQLITE
#include <sqlite3.h>
#endif
#if BUFFERQUEUE_BENCH_ROCKSDB
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#endif

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
#include <memory>
#include <span>
#include <string>
#include <system_error>
#include <vector>

namespace bq = bufferqueue;

namespace {

using bq::bench::make_record;
using bq::bench::record;
using bq::bench::scratch_directory;

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

/// A one-partition mmap topic of 64-byte records with the raw serializer.
struct record_topic {
    explicit record_topic(const std::filesystem::path& folder, bq::flush_strategy flush, std::size_t flush_batch_size)
        : queue(io.get_executor())
    {
        queue.add_topic(bq::mmap_topic_options<record>{.name = "records",
                                                       .partitions = 1,
                                                       .data_directory = folder,
                                                       .segment_size = 64ULL * 1024 * 1024,
                                                       .flush = flush,
                                                       .flush_batch_size = flush_batch_size,
                                                       .serializer = bq::raw_serializer<record>{}});
    }
    boost::asio::io_context io;
    bq::buffer_queue queue;
};

/// Durable produce under concurrency: `threads` threads each try_produce `per_thread` records, one
/// per call, into one `immediate` partition; a round ends when every produce returned (each only
/// once its record is durable). Concurrent produces share msyncs (group commit).
void mmap_produce_concurrent(benchmark::State& state, std::size_t threads)
{
    constexpr std::size_t per_thread = 64;
    scratch_directory directory;
    record_topic topic(directory.path(), bq::flush_strategy::immediate, 100);
    bq::producer<record> producer = topic.queue.producer<record>("records");
    bq::bench::team team(threads);
    std::atomic<bool> failed{false};
    std::int64_t round_number = 0;
    auto round = [&](std::size_t index) {
        const std::int64_t first =
            (round_number * static_cast<std::int64_t>(threads) + static_cast<std::int64_t>(index)) *
            static_cast<std::int64_t>(per_thread);
        for (std::size_t item = 0; item < per_thread; ++item) {
            if (!producer.try_produce(make_record(first + static_cast<std::int64_t>(item)))) {
                failed.store(true, std::memory_order_relaxed);
            }
        }
    };
    for (auto _ : state) {
        state.SetIterationTime(team.run(round));
        ++round_number;
    }
    if (failed.load()) {
        state.SkipWithError("the mmap topic refused a record");
    }
    bq::bench::set_items(state, threads * per_thread);
}

/// Opening (recovering) an existing topic of `partitions` partitions of the default segment size
/// (256 MiB), 1,000 records each: a new buffer_queue's add_topic, then its close. What every
/// restart of a service pays before it produces or consumes.
void mmap_open(benchmark::State& state, std::size_t partitions)
{
    scratch_directory directory;
    const auto options = [&] {
        return bq::mmap_topic_options<record>{.name = "records",
                                              .partitions = partitions,
                                              .data_directory = directory.path(),
                                              .flush = bq::flush_strategy::batch,
                                              .serializer = bq::raw_serializer<record>{}};
    };
    {
        boost::asio::io_context io;
        bq::buffer_queue queue(io.get_executor());
        queue.add_topic(options());
        bq::producer<record> producer = queue.producer<record>("records");
        for (std::int64_t id = 0; id < static_cast<std::int64_t>(1000 * partitions); ++id) {
            producer.try_produce(make_record(id));
        }
    }
    for (auto _ : state) {
        boost::asio::io_context io;
        bq::buffer_queue queue(io.get_executor());
        queue.add_topic(options());
    }
}

/// Durable produce of 1,000 records per call (`immediate`: one msync per call, returning once durable).
void mmap_produce_span(benchmark::State& state)
{
    constexpr std::size_t span = 1000;
    scratch_directory directory;
    record_topic topic(directory.path(), bq::flush_strategy::immediate, 100);
    bq::producer<record> producer = topic.queue.producer<record>("records");
    std::vector<record> records(span);
    std::int64_t id = 0;
    for (auto _ : state) {
        for (record& item : records) {
            item = make_record(id++);
        }
        if (!producer.try_produce(std::span<const record>(records))) {
            state.SkipWithError("the mmap topic refused a batch");
            break;
        }
    }
    bq::bench::set_items(state, span);
}

/// Floor 3: one msync per record - a 64-byte memcpy into a mapping of a preallocated file, then the
/// msync of that record's page through the library's file layer (detail/file.hpp), as an
/// `immediate` produce without group commit pays.
void floor_msync_per_record(benchmark::State& state)
{
    const bq::bench::mapped_scratch_file floor(64ULL * 1024 * 1024);
    const bq::detail::mapped_region& region = floor.region;
    const std::size_t size = floor.size;
    const record item = make_record(1);
    std::size_t offset = 0;
    for (auto _ : state) {
        std::memcpy(region.data() + offset, &item, sizeof item);
        region.flush(offset, sizeof item);
        offset = (offset + sizeof item) % size;
    }
    state.SetItemsProcessed(state.iterations());
}

#if BUFFERQUEUE_BENCH_SQLITE
/// Peer: SQLite 3 in WAL mode with synchronous=FULL (every commit fsyncs the WAL), one 64-byte blob
/// per row through a prepared INSERT, `per_transaction` rows per transaction.
void sqlite_insert(benchmark::State& state, std::size_t per_transaction)
{
    scratch_directory directory;
    sqlite3* raw = nullptr;
    if (sqlite3_open((directory.path() / "peer.db").c_str(), &raw) != SQLITE_OK) {
        state.SkipWithError("sqlite3_open failed");
        sqlite3_close(raw);
        return;
    }
    const std::unique_ptr<sqlite3, int (*)(sqlite3*)> database(raw, sqlite3_close);
    auto run = [&](const char* sql) {
        return sqlite3_exec(database.get(), sql, nullptr, nullptr, nullptr) == SQLITE_OK;
    };
    if (!run("PRAGMA journal_mode=WAL") || !run("PRAGMA synchronous=FULL") ||
        !run("CREATE TABLE records (id INTEGER PRIMARY KEY, payload BLOB NOT NULL)")) {
        state.SkipWithError(sqlite3_errmsg(database.get()));
        return;
    }
    sqlite3_stmt* raw_insert = nullptr;
    sqlite3_prepare_v2(database.get(), "INSERT INTO records (id, payload) VALUES (?, ?)", -1, &raw_insert, nullptr);
    const std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> insert(raw_insert, sqlite3_finalize);
    std::int64_t id = 0;
    for (auto _ : state) {
        bool ok = run("BEGIN");
        for (std::size_t row = 0; row < per_transaction && ok; ++row) {
            const record item = make_record(id);
            sqlite3_bind_int64(insert.get(), 1, id++);
            sqlite3_bind_blob(insert.get(), 2, &item, sizeof item, SQLITE_TRANSIENT);
            ok = sqlite3_step(insert.get()) == SQLITE_DONE;
            sqlite3_reset(insert.get());
        }
        if (!ok || !run("COMMIT")) {
            state.SkipWithError(sqlite3_errmsg(database.get()));
            break;
        }
    }
    bq::bench::set_items(state, per_transaction);
}
#endif

#if BUFFERQUEUE_BENCH_ROCKSDB
/// Peer: RocksDB with synced writes (WriteOptions::sync: the WAL is fsynced before Write returns),
/// `per_batch` 64-byte values per WriteBatch under 8-byte big-endian keys.
void rocksdb_write(benchmark::State& state, std::size_t per_batch)
{
    scratch_directory directory;
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    const rocksdb::Status opened = rocksdb::DB::Open(options, (directory.path() / "peer").string(), &raw);
    if (!opened.ok()) {
        state.SkipWithError(opened.ToString().c_str());
        return;
    }
    const std::unique_ptr<rocksdb::DB> database(raw);
    rocksdb::WriteOptions synced;
    synced.sync = true;
    std::uint64_t id = 0;
    rocksdb::WriteBatch batch;
    for (auto _ : state) {
        batch.Clear();
        for (std::size_t row = 0; row < per_batch; ++row) {
            const record item = make_record(static_cast<std::int64_t>(id));
            char key[8];
            for (int byte = 0; byte < 8; ++byte) {
                key[byte] = static_cast<char>(id >> (56 - 8 * byte));
            }
            ++id;
            batch.Put(rocksdb::Slice(key, sizeof key),
                      rocksdb::Slice(reinterpret_cast<const char*>(&item), sizeof item));
        }
        const rocksdb::Status written = database->Write(synced, &batch);
        if (!written.ok()) {
            state.SkipWithError(written.ToString().c_str());
            break;
        }
    }
    bq::bench::set_items(state, per_batch);
}
#endif

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
    configure(benchmark::RegisterBenchmark("mmap/floor/msync_per_record_64B", floor_msync_per_record));
    for (const std::size_t threads : {1, 4}) {
        const std::string name = "mmap/produce/immediate_concurrent/p:" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), mmap_produce_concurrent, threads)
            ->Unit(benchmark::kMicrosecond)
            ->UseManualTime();
    }
    configure(benchmark::RegisterBenchmark("mmap/produce/immediate_span_1000", mmap_produce_span));
    configure(benchmark::RegisterBenchmark("mmap/open/partitions:4", mmap_open, 4));
#if BUFFERQUEUE_BENCH_SQLITE
    configure(benchmark::RegisterBenchmark("mmap/peer/sqlite_wal_full/per_record", sqlite_insert, 1));
    configure(benchmark::RegisterBenchmark("mmap/peer/sqlite_wal_full/per_1000", sqlite_insert, 1000));
#endif
#if BUFFERQUEUE_BENCH_ROCKSDB
    configure(benchmark::RegisterBenchmark("mmap/peer/rocksdb_sync/per_record", rocksdb_write, 1));
    configure(benchmark::RegisterBenchmark("mmap/peer/rocksdb_sync/per_1000", rocksdb_write, 1000));
#endif
    configure(benchmark::RegisterBenchmark("serializer/json", serializer_round_trip<bq::json_serializer<record>>));
    configure(
        benchmark::RegisterBenchmark("serializer/msgpack", serializer_round_trip<bq::msgpack_serializer<record>>));
    configure(benchmark::RegisterBenchmark("serializer/raw", serializer_round_trip<bq::raw_serializer<record>>));
    return true;
}();

}  // namespace
