// Soak: producers and consumers at full speed on a persistent topic and a bounded memory topic,
// several consumer groups each, with the queue closed and reopened between rounds. Every group
// must read every item exactly once in per-producer order on each partition, a committed group
// reads nothing again after a reopen, and resident memory and the persistent topic's disk use stay
// flat (memory segments are recycled, consumed segment files deleted).
//
// usage: bufferqueue_soak [seconds] [directory]   (default 20 s in the system's temporary directory)
#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/memory/memory_topic.hpp"
#include "bufferqueue/mmap/mmap_topic.hpp"
#include "bufferqueue/serialization/serializer.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

// AddressSanitizer's quarantine holds freed memory back, so resident memory is reported but not
// checked in ASan builds.
#if defined(__SANITIZE_ADDRESS__)
#define BUFFERQUEUE_SOAK_CHECKS_RESIDENT_MEMORY 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BUFFERQUEUE_SOAK_CHECKS_RESIDENT_MEMORY 0
#endif
#endif
#ifndef BUFFERQUEUE_SOAK_CHECKS_RESIDENT_MEMORY
#define BUFFERQUEUE_SOAK_CHECKS_RESIDENT_MEMORY 1
#endif

namespace {

namespace bq = bufferqueue;
namespace fs = std::filesystem;

constexpr std::size_t producers = 2;
constexpr std::size_t groups = 3;
constexpr std::size_t partitions = 4;
constexpr std::uint64_t producer_shift = 40;  // item = producer << 40 | sequence

struct failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

void check(bool condition, const std::string& message)
{
    if (!condition) {
        throw failure(message);
    }
}

std::uint64_t resident_bytes()
{
    std::ifstream statm("/proc/self/statm");
    std::uint64_t size = 0;
    std::uint64_t resident = 0;
    statm >> size >> resident;
    return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

std::uint64_t directory_bytes(const fs::path& directory)
{
    std::uint64_t total = 0;
    for (const auto& entry : fs::recursive_directory_iterator(directory)) {
        if (entry.is_regular_file()) {
            total += entry.file_size();
        }
    }
    return total;
}

// What one group has read of one topic: per (partition, producer) the next expected sequence.
struct group_progress {
    std::map<std::pair<std::size_t, std::uint64_t>, std::uint64_t> next;
    std::uint64_t count = 0;
};

struct topic_run {
    std::string name;
    std::atomic<std::uint64_t> produced{0};
    std::array<std::uint64_t, producers> sequences{};  // next sequence per producer, across rounds
    std::array<group_progress, groups> progress{};
};

// One round on one topic: producers for `duration`, then consumers until they have read everything.
void run_round(bq::buffer_queue& queue, topic_run& topic, std::chrono::milliseconds duration)
{
    std::atomic<bool> stop{false};
    std::atomic<bool> producing_done{false};
    std::vector<std::thread> threads;
    std::mutex errors_mutex;
    std::vector<std::string> errors;
    const auto record_error = [&](const std::string& text) {
        std::lock_guard lock(errors_mutex);
        errors.push_back(text);
        stop = true;
    };
    const std::uint64_t produced_before = topic.produced.load();
    // Created before anything is produced in this round: a group that committed everything before
    // the queue closed reads nothing again after the reopen.
    std::vector<bq::pull_consumer<std::uint64_t>> consumers;
    for (std::size_t g = 0; g < groups; ++g) {
        consumers.push_back(queue.create_pull_consumer<std::uint64_t>(
            {.topic = topic.name, .group = "group-" + std::to_string(g), .batch_size = 256}));
        check(!consumers.back().try_consume(),
              topic.name + ": group " + std::to_string(g) + " reads records again after a reopen");
    }
    for (std::size_t p = 0; p < producers; ++p) {
        threads.emplace_back([&, p] {
            try {
                auto producer = queue.producer<std::uint64_t>(topic.name);
                std::vector<std::uint64_t> batch;
                const auto until = std::chrono::steady_clock::now() + duration;
                while (!stop && std::chrono::steady_clock::now() < until) {
                    batch.clear();
                    for (std::size_t i = 0; i < 64; ++i) {
                        batch.push_back(p << producer_shift | (topic.sequences[p] + i));
                    }
                    if (producer.try_produce(std::span<const std::uint64_t>(batch))) {
                        topic.sequences[p] += batch.size();
                        topic.produced += batch.size();
                    } else {
                        std::this_thread::yield();  // a bounded topic is full until consumers catch up
                    }
                }
            } catch (const std::exception& error) {
                record_error("producer: " + std::string(error.what()));
            }
        });
    }
    for (std::size_t g = 0; g < groups; ++g) {
        threads.emplace_back([&, g] {
            try {
                auto& consumer = consumers[g];
                group_progress& progress = topic.progress[g];
                for (;;) {
                    auto batch = consumer.try_consume();
                    if (!batch) {
                        if (stop || (producing_done && progress.count == topic.produced.load())) {
                            break;
                        }
                        std::this_thread::sleep_for(std::chrono::microseconds(50));
                        continue;
                    }
                    for (const std::uint64_t item : *batch) {
                        const std::uint64_t producer = item >> producer_shift;
                        const std::uint64_t sequence = item & ((std::uint64_t{1} << producer_shift) - 1);
                        std::uint64_t& next = progress.next[{batch->partition(), producer}];
                        if (sequence < next) {
                            throw failure("item " + std::to_string(sequence) + " of producer " +
                                          std::to_string(producer) + " read twice or out of order on partition " +
                                          std::to_string(batch->partition()));
                        }
                        next = sequence + 1;
                        ++progress.count;
                    }
                    consumer.commit(boost::asio::use_future).get();
                }
            } catch (const std::exception& error) {
                record_error("group " + std::to_string(g) + ": " + error.what());
            }
        });
    }
    for (std::size_t p = 0; p < producers; ++p) {
        threads[p].join();
    }
    producing_done = true;
    for (std::size_t i = producers; i < threads.size(); ++i) {
        threads[i].join();
    }
    check(errors.empty(), topic.name + ": " + (errors.empty() ? std::string() : errors.front()));
    check(topic.produced.load() > produced_before, topic.name + ": nothing was produced in a round");
    for (std::size_t g = 0; g < groups; ++g) {
        check(topic.progress[g].count == topic.produced.load(),
              topic.name + ": group " + std::to_string(g) + " read " + std::to_string(topic.progress[g].count) +
                  " items of " + std::to_string(topic.produced.load()));
    }
}

int run(double seconds, const fs::path& root)
{
    // A folder of this run's own: two runs at once (two checkouts' ctest on one machine) must not
    // share one and audit each other's records.
    const fs::path directory = root / ("soak-" + std::to_string(::getpid()));
    fs::remove_all(directory);
    boost::asio::io_context io;
    auto work = boost::asio::make_work_guard(io);
    std::thread runner([&] { io.run(); });
    topic_run persistent;
    persistent.name = "persistent";
    topic_run memory;
    std::uint64_t rounds = 0;
    std::uint64_t baseline_resident = 0;
    std::uint64_t peak_resident = 0;
    std::uint64_t peak_disk = 0;
    const auto start = std::chrono::steady_clock::now();
    const auto elapsed = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    int status = 0;
    try {
        while (rounds < 4 || elapsed() < seconds) {
            // A fresh memory topic per queue (its items do not survive the close).
            memory.name = "memory";
            memory.produced = 0;
            memory.sequences = {};
            memory.progress = {};
            bq::buffer_queue queue(io.get_executor());
            queue.add_topic(bq::mmap_topic_options<std::uint64_t>{.name = "persistent",
                                                                  .partitions = partitions,
                                                                  .data_directory = directory,
                                                                  .segment_size = 256 * 1024,
                                                                  .max_retained_consumed_segments = 1,
                                                                  .flush = bq::flush_strategy::batch,
                                                                  .flush_batch_size = 1000,
                                                                  .serializer = bq::raw_serializer<std::uint64_t>{}});
            queue.add_topic(bq::memory_topic_options<std::uint64_t>{
                .name = "memory", .partitions = partitions, .segment_size = 1024, .bounded_capacity = 100000});
            std::thread memory_round;
            std::string memory_error;
            memory_round = std::thread([&] {
                try {
                    run_round(queue, memory, std::chrono::milliseconds(500));
                } catch (const std::exception& error) {
                    memory_error = error.what();
                }
            });
            run_round(queue, persistent, std::chrono::milliseconds(500));
            memory_round.join();
            check(memory_error.empty(), memory_error);
            queue.close();
            ++rounds;
            const std::uint64_t resident = resident_bytes();
            const std::uint64_t disk = directory_bytes(directory);
            if (rounds == 3) {
                baseline_resident = resident;
            }
            if (rounds > 3) {
                peak_resident = std::max(peak_resident, resident);
                peak_disk = std::max(peak_disk, disk);
            }
        }
        // Flat: after warm-up, resident memory grows by less than 32 MiB however long it runs, and
        // the persistent topic keeps at most a few segments per partition.
        check(!BUFFERQUEUE_SOAK_CHECKS_RESIDENT_MEMORY || peak_resident <= baseline_resident + 32 * 1024 * 1024,
              "resident memory grew from " + std::to_string(baseline_resident >> 20) + " MiB to " +
                  std::to_string(peak_resident >> 20) + " MiB");
        check(peak_disk <= partitions * 16 * 256 * 1024,
              "the persistent topic grew to " + std::to_string(peak_disk >> 10) + " KiB on disk");
        std::printf("soak: %llu close/reopen rounds in %.1f s; persistent topic %llu items, memory topics %llu items "
                    "in the last round, each read exactly once by %zu groups; resident memory %llu MiB after "
                    "warm-up, peak %llu MiB%s; disk peak %llu KiB\n",
                    static_cast<unsigned long long>(rounds), elapsed(),
                    static_cast<unsigned long long>(persistent.produced.load()),
                    static_cast<unsigned long long>(memory.produced.load()), groups,
                    static_cast<unsigned long long>(baseline_resident >> 20),
                    static_cast<unsigned long long>(peak_resident >> 20),
                    BUFFERQUEUE_SOAK_CHECKS_RESIDENT_MEMORY ? "" : " (not checked under ASan)",
                    static_cast<unsigned long long>(peak_disk >> 10));
    } catch (const std::exception& error) {
        std::fprintf(stderr, "soak: FAILED after %llu rounds: %s\n", static_cast<unsigned long long>(rounds),
                     error.what());
        status = 1;
    }
    work.reset();
    io.stop();
    runner.join();
    fs::remove_all(directory);
    return status;
}

}  // namespace

int main(int argc, char** argv)
{
    const double seconds = argc > 1 ? std::stod(argv[1]) : 20;
    const fs::path root = argc > 2 ? fs::path(argv[2]) : fs::temp_directory_path();
    return run(seconds, root);
}
