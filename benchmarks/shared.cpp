// Process-shared persistent topics (issue 27): produce throughput from one and two processes into one
// shared topic beside one process with the folder to itself (batch flush), `immediate` produce from
// four processes into one partition beside the floor of one msync per four records and beside a
// bare group commit of four processes without the library (the ceiling), and the time
// from an append in one process to the resumption of a consumer parked in co_await consume() in
// another, beside the same within one process. The producing processes are forked before the
// measuring process opens anything; a round starts when the measuring process writes to their pipes
// and ends when every one of them answered. Files go under $BUFFERQUEUE_BENCH_DIR (see mmap_support.hpp).
#include "bufferqueue/bufferqueue.hpp"
#include "bufferqueue/mmap/detail/file.hpp"

#include "bare_group_commit.hpp"
#include "bench_support.hpp"
#include "io_thread.hpp"
#include "mmap_support.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace bq = bufferqueue;
using bq::bench::make_record;
using bq::bench::record;
using bq::bench::scratch_directory;
using clock_type = std::chrono::steady_clock;

namespace {

bq::mmap_topic_options<record> topic_options(const std::filesystem::path& directory, bq::flush_strategy flush,
                                             bool process_shared)
{
    return {.name = "records",
            .partitions = 1,
            .data_directory = directory,
            .segment_size = 64ULL * 1024 * 1024,
            .flush = flush,
            .flush_batch_size = 100,
            .serializer = bq::raw_serializer<record>{},
            .process_shared = process_shared};
}

/// Child processes that each run `round(index, round_number)` whenever the parent starts a round,
/// and answer when done. Forked in the constructor, which returns once each child's `setup` ran:
/// build it before this process starts threads or opens a topic. The destructor ends them (closing
/// their pipes) and reaps them.
class worker_processes {
public:
    using round_function = std::function<void(std::size_t index, std::uint64_t round)>;

    /// `setup(index)` runs once in each child before its first round and returns its round function.
    worker_processes(std::size_t count, const std::function<round_function(std::size_t)>& setup)
    {
        for (std::size_t index = 0; index < count; ++index) {
            std::array<int, 2> go{};
            std::array<int, 2> done{};
            if (::pipe(go.data()) != 0 || ::pipe(done.data()) != 0) {
                throw std::runtime_error("pipe failed");
            }
            const pid_t pid = ::fork();
            if (pid < 0) {
                throw std::runtime_error("fork failed");
            }
            if (pid == 0) {
                ::close(go[1]);
                ::close(done[0]);
                int status = 0;
                try {
                    const round_function round = setup(index);
                    char byte = 'o';
                    if (::write(done[1], &byte, 1) != 1) {  // ready: the topic is open
                        ::_exit(1);
                    }
                    std::uint64_t number = 0;
                    while (::read(go[0], &byte, 1) == 1) {
                        round(index, number++);
                        if (::write(done[1], &byte, 1) != 1) {
                            break;
                        }
                    }
                } catch (...) {
                    status = 1;
                }
                ::_exit(status);
            }
            ::close(go[0]);
            ::close(done[1]);
            workers_.push_back({pid, go[1], done[0]});
        }
        // No round starts before every child opened the topic (opening is not what is measured).
        if (!wait_all()) {
            throw std::runtime_error("a child process failed to open the topic");
        }
    }

    worker_processes(const worker_processes&) = delete;
    worker_processes& operator=(const worker_processes&) = delete;

    ~worker_processes()
    {
        for (const worker& each : workers_) {
            ::close(each.go);
        }
        for (const worker& each : workers_) {
            int status = 0;
            ::waitpid(each.pid, &status, 0);
            ::close(each.done);
        }
    }

    /// Starts a round in every child and waits until all answered; false when one failed.
    bool run_round()
    {
        const char byte = 'r';
        for (const worker& each : workers_) {
            if (::write(each.go, &byte, 1) != 1) {
                return false;
            }
        }
        return wait_all();
    }

    /// Starts a round in child `index` only, without waiting.
    bool start_one(std::size_t index)
    {
        const char byte = 'r';
        return ::write(workers_[index].go, &byte, 1) == 1;
    }

    /// Waits for child `index`'s answer.
    bool wait_one(std::size_t index)
    {
        char byte = 0;
        return ::read(workers_[index].done, &byte, 1) == 1;
    }

private:
    struct worker {
        pid_t pid;
        int go;
        int done;
    };

    bool wait_all()
    {
        for (std::size_t index = 0; index < workers_.size(); ++index) {
            if (!wait_one(index)) {
                return false;
            }
        }
        return true;
    }

    std::vector<worker> workers_;
};

/// Runs one round of every child per iteration, timed by hand (from the start signal to the last
/// answer); skips the benchmark with an error when a child failed.
void time_rounds(benchmark::State& state, worker_processes& workers)
{
    for (auto _ : state) {
        const auto start = clock_type::now();
        if (!workers.run_round()) {
            state.SkipWithError("a producing process failed");
            break;
        }
        state.SetIterationTime(std::chrono::duration<double>(clock_type::now() - start).count());
    }
}

/// A queue with the benchmark topic, opened in a child process.
struct child_queue {
    child_queue(const std::filesystem::path& directory, bq::flush_strategy flush, bool process_shared)
        : queue(io.get_executor())
    {
        queue.add_topic(topic_options(directory, flush, process_shared));
    }
    boost::asio::io_context io;
    bq::buffer_queue queue;
};

/// `processes` processes each produce `per_process` 64-byte records per thread, one per try_produce,
/// from `threads` threads, into one partition; items per second in total. `process_shared = false`
/// (one process only): the folder is the process's own, as before issue 27.
void shared_produce(benchmark::State& state, std::size_t processes, std::size_t threads, bq::flush_strategy flush,
                    std::size_t per_process, bool process_shared)
{
    scratch_directory directory;
    std::shared_ptr<child_queue> opened;  // per child, made in setup
    worker_processes workers(processes, [&](std::size_t) -> worker_processes::round_function {
        opened = std::make_shared<child_queue>(directory.path(), flush, process_shared);
        auto producer = std::make_shared<bq::producer<record>>(opened->queue.producer<record>("records"));
        return [producer, per_process, threads](std::size_t index, std::uint64_t round) {
            std::atomic<bool> refused{false};
            const auto produce = [&](std::size_t thread) {
                const auto first = static_cast<std::int64_t>(((round * 16 + index) * threads + thread) * per_process);
                for (std::size_t item = 0; item < per_process; ++item) {
                    if (!producer->try_produce(make_record(first + static_cast<std::int64_t>(item)))) {
                        refused.store(true);
                    }
                }
            };
            std::vector<std::thread> team;
            for (std::size_t thread = 1; thread < threads; ++thread) {
                team.emplace_back(produce, thread);
            }
            produce(0);
            for (std::thread& each : team) {
                each.join();
            }
            if (refused.load()) {
                throw std::runtime_error("refused");
            }
        };
    });
    time_rounds(state, workers);
    bq::bench::set_items(state, processes * threads * per_process);
}

/// The ceiling of `immediate` from `processes` processes on one partition (bare_group_commit.hpp):
/// each appends `per_process` 64-byte records per round, one at a time, each returning once durable,
/// into one preallocated mapping made before the fork, as the floor's is.
void bare_group_commit_ceiling(benchmark::State& state, std::size_t processes, std::size_t per_process)
{
    constexpr std::chrono::microseconds gather{300};
    const bq::bench::mapped_scratch_file file(64ULL * 1024 * 1024);
    bq::bench::bare_group_commit* const commit = bq::bench::bare_group_commit::create_shared();
    worker_processes workers(processes, [&](std::size_t) -> worker_processes::round_function {
        return [&file, commit, processes, per_process](std::size_t index, std::uint64_t round) {
            const auto first = static_cast<std::int64_t>((round * 16 + index) * per_process);
            for (std::size_t item = 0; item < per_process; ++item) {
                const record made = make_record(first + static_cast<std::int64_t>(item));
                commit->append_durably(file.region, &made, sizeof made, processes, gather);
            }
        };
    });
    time_rounds(state, workers);
    bq::bench::set_items(state, processes * per_process);
}

/// The floor of `immediate` from four processes on one partition: four 64-byte records copied into
/// a mapping of a preallocated file, then one msync of their bytes (per record: a quarter of it).
void floor_msync_per_four_records(benchmark::State& state)
{
    const bq::bench::mapped_scratch_file floor(64ULL * 1024 * 1024);
    const bq::detail::mapped_region& region = floor.region;
    const std::size_t size = floor.size;
    const record item = make_record(1);
    std::size_t offset = 0;
    for (auto _ : state) {
        for (int copy = 0; copy < 4; ++copy) {
            std::memcpy(region.data() + offset + copy * sizeof item, &item, sizeof item);
        }
        region.flush(offset, 4 * sizeof item);
        offset = (offset + 4 * sizeof item) % size;
    }
    state.SetItemsProcessed(state.iterations() * 4);
}

/// The consumer whose wake-ups are measured: parked in co_await consume() on its io thread, it
/// stamps each resumption with the record's age (its `timestamp` is when it was produced, in
/// steady_clock nanoseconds: one clock for every process of the host), commits, counts the batch in
/// `ready` and parks again. The commit (an msync and a checkpoint's fsyncs) is not measured.
struct parked_consumer {
    std::atomic<std::uint64_t> ready{0};
    std::atomic<std::int64_t> latency_ns{0};

    void start(boost::asio::io_context& io, bq::pull_consumer<record>& consumer)
    {
        boost::asio::co_spawn(
            io,
            [this, &consumer]() -> boost::asio::awaitable<void> {
                try {
                    for (;;) {
                        bq::batch<record> batch = co_await consumer.consume();
                        const std::int64_t now = clock_type::now().time_since_epoch().count();
                        latency_ns.store(now - batch[batch.size() - 1].timestamp, std::memory_order_relaxed);
                        const std::size_t size = batch.size();
                        co_await consumer.commit();
                        ready.fetch_add(size, std::memory_order_release);
                    }
                } catch (const boost::system::system_error&) {
                    // closed
                }
            },
            boost::asio::detached);
    }
};

record stamped(std::int64_t id)
{
    record item = make_record(id);
    item.timestamp = clock_type::now().time_since_epoch().count();
    return item;
}

/// One record appended while the consumer is parked (on an idle thread of this process), by another
/// process (`cross_process`) or by this one; the time until the consumer resumes. Manual time.
void shared_wakeup(benchmark::State& state, bool cross_process)
{
    scratch_directory directory;
    std::shared_ptr<child_queue> opened;
    std::optional<worker_processes> producer_process;
    if (cross_process) {
        producer_process.emplace(1, [&](std::size_t) -> worker_processes::round_function {
            opened = std::make_shared<child_queue>(directory.path(), bq::flush_strategy::batch, true);
            auto producer = std::make_shared<bq::producer<record>>(opened->queue.producer<record>("records"));
            return [producer](std::size_t, std::uint64_t round) {
                if (!producer->try_produce(stamped(static_cast<std::int64_t>(round)))) {
                    throw std::runtime_error("refused");
                }
            };
        });
    }
    bq::bench::io_thread consumer_thread;
    bq::buffer_queue queue(consumer_thread.context().get_executor());
    queue.add_topic(topic_options(directory.path(), bq::flush_strategy::batch, cross_process));
    bq::producer<record> producer = queue.producer<record>("records");
    bq::pull_consumer<record> consumer =
        queue.create_pull_consumer<record>({.topic = "records", .group = "g", .auto_commit = false, .batch_size = 1});
    parked_consumer parked;
    parked.start(consumer_thread.context(), consumer);

    std::vector<double> samples;
    std::uint64_t expected = 0;
    for (auto _ : state) {
        // The consumer committed the last record; give it time to park again, its thread idle.
        std::this_thread::sleep_for(std::chrono::microseconds(500));
        ++expected;
        if (cross_process) {
            if (!producer_process->start_one(0) || !producer_process->wait_one(0)) {
                state.SkipWithError("the producing process failed");
                break;
            }
        } else {
            producer.try_produce(stamped(static_cast<std::int64_t>(expected)));
        }
        bq::bench::spin_until([&] { return parked.ready.load(std::memory_order_acquire) >= expected; });
        const double seconds = static_cast<double>(parked.latency_ns.load(std::memory_order_relaxed)) * 1e-9;
        samples.push_back(seconds);
        state.SetIterationTime(seconds);
    }
    consumer.close();
    bq::bench::report_latencies(state, samples);
}

const bool registered = [] {
    constexpr std::size_t batch_records = 20000;
    constexpr std::size_t immediate_records = 64;
    auto configure = [](benchmark::internal::Benchmark* benchmark) {
        benchmark->Unit(benchmark::kMicrosecond)->UseManualTime();
    };
    configure(benchmark::RegisterBenchmark("shared/produce/batch_100/exclusive_process", shared_produce, 1, 1,
                                           bq::flush_strategy::batch, 2 * batch_records, false));
    configure(benchmark::RegisterBenchmark("shared/produce/batch_100/processes:1", shared_produce, 1, 1,
                                           bq::flush_strategy::batch, 2 * batch_records, true));
    configure(benchmark::RegisterBenchmark("shared/produce/batch_100/processes:2", shared_produce, 2, 1,
                                           bq::flush_strategy::batch, batch_records, true));
    configure(benchmark::RegisterBenchmark("shared/produce/immediate/processes:1", shared_produce, 1, 1,
                                           bq::flush_strategy::immediate, 4 * immediate_records, true));
    configure(benchmark::RegisterBenchmark("shared/produce/immediate/processes:2", shared_produce, 2, 1,
                                           bq::flush_strategy::immediate, 2 * immediate_records, true));
    configure(benchmark::RegisterBenchmark("shared/produce/immediate/processes:4", shared_produce, 4, 1,
                                           bq::flush_strategy::immediate, immediate_records, true));
    // The same four producers as threads of one process with the folder to itself: what group
    // commit reaches within one process, beside the floor.
    configure(benchmark::RegisterBenchmark("shared/produce/immediate/exclusive_process_threads:4", shared_produce, 1, 4,
                                           bq::flush_strategy::immediate, immediate_records, false));
    // Four processes with a bare group commit and no library (bare_group_commit.hpp): what any
    // protocol that sleeps until each record is durable can reach here, beside the floor.
    configure(benchmark::RegisterBenchmark("shared/ceiling/bare_group_commit/processes:4", bare_group_commit_ceiling, 4,
                                           immediate_records));
    benchmark::RegisterBenchmark("shared/floor/msync_per_4_records_64B", floor_msync_per_four_records)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
    const auto wakeups =
        static_cast<benchmark::IterationCount>(bq::bench::environment_number("BUFFERQUEUE_BENCH_WAKEUPS", 500));
    configure(benchmark::RegisterBenchmark("shared/wakeup/cross_process", shared_wakeup, true)->Iterations(wakeups));
    configure(benchmark::RegisterBenchmark("shared/wakeup/same_process", shared_wakeup, false)->Iterations(wakeups));
    return true;
}();

}  // namespace
