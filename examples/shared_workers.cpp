// Process-shared persistent topics: several processes of one host produce into and consume from one
// topic folder at once. Run with a directory only, this program coordinates: it starts two producer
// processes and a consumer process of group "workers" (this program again, with a role), and once
// the group committed its first batch a second consumer process, which joins while the first works.
// It waits until the producers are done and the group committed every job - which it reads from
// the topic's statistics, as any process that opens the folder can - and stops the consumers with
// SIGTERM. The consumers share the topic's partitions; each prints how many jobs it got in the
// batches it committed, and together that is every job once (nothing committed is delivered again).
//
//   example_shared_workers <directory>
//   example_shared_workers produce <directory> <producer> <jobs>   (what the coordinator starts)
//   example_shared_workers consume <directory> <consumer>
#include <bufferqueue/bufferqueue.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

extern char** environ;

namespace asio = boost::asio;
namespace bq = bufferqueue;

struct job {
    int producer = 0;
    int number = 0;
};

void to_json(nlohmann::json& json, const job& j)
{
    json = {{"producer", j.producer}, {"number", j.number}};
}
void from_json(const nlohmann::json& json, job& j)
{
    json.at("producer").get_to(j.producer);
    json.at("number").get_to(j.number);
}

constexpr int producers = 2;
constexpr int consumers = 2;
constexpr int jobs_per_producer = 500;

// [readme:shared]
// Every process that opens the folder says process_shared = true, with the same partitions, segment
// size, retention and serializer; each of them may produce into the topic and consume from it.
bq::mmap_topic_options<job> jobs_topic(const std::filesystem::path& directory)
{
    return {.name = "jobs",
            .partitions = 4,
            .data_directory = directory,
            .flush = bq::flush_strategy::batch,
            .process_shared = true};
}
// [readme:shared-end]

// A producer process: appends its jobs, numbered 0..count-1; the topic spreads them over its partitions.
int produce(const std::filesystem::path& directory, int producer, int count)
{
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(jobs_topic(directory));
    bq::producer<job> jobs = queue.producer<job>("jobs");
    for (int number = 0; number < count; ++number) {
        if (!jobs.try_produce(job{.producer = producer, .number = number})) {
            std::fprintf(stderr, "producer %d: job %d refused\n", producer, number);
            return 1;
        }
    }
    std::printf("producer %d: appended %d jobs\n", producer, count);
    return 0;
}

// A consumer process of group "workers": consumes until SIGTERM, then prints how many jobs it got
// in the batches it committed. Within a partition each producer's jobs come in the order it
// produced them.
int consume(const std::filesystem::path& directory, int consumer_number)
{
    asio::io_context io;
    // Before the queue: a SIGTERM while it opens, or another while it closes, is caught too.
    asio::signal_set stop(io, SIGTERM);
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(jobs_topic(directory));
    // The group's partitions are shared among its consumers in every process. Each batch is
    // committed once handled (a batch left uncommitted is delivered again, at least once).
    bq::pull_consumer<job> consumer =
        queue.create_pull_consumer<job>({.topic = "jobs", .group = "workers", .batch_size = 50});
    stop.async_wait([&](boost::system::error_code, int) { consumer.close(); });  // ends the pending consume()

    std::size_t received = 0;
    std::set<std::size_t> partitions;
    std::map<std::pair<std::size_t, int>, int> last;  // (partition, producer) -> last number seen
    bool in_order = true;
    std::string failure;
    asio::steady_timer handling(io);
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            for (;;) {
                bq::batch<job> batch = co_await consumer.consume();
                handling.expires_after(std::chrono::milliseconds(5));  // as if the jobs took a while
                co_await handling.async_wait(asio::use_awaitable);
                // Then commit. When another consumer joined meanwhile and
                // the partition moved to it, the commit fails with partition_revoked and that
                // consumer gets the batch again: only committed batches count below.
                try {
                    co_await consumer.commit();
                } catch (const boost::system::system_error& failed) {
                    if (failed.code() != bq::errc::partition_revoked) {
                        throw;
                    }
                    continue;
                }
                partitions.insert(batch.partition());
                for (const job& j : batch) {
                    const auto [previous, first] = last.try_emplace({batch.partition(), j.producer}, j.number);
                    in_order = in_order && (first || j.number > previous->second);
                    previous->second = j.number;
                    ++received;
                }
            }
        },
        [&](std::exception_ptr error) {
            try {
                if (error) {
                    std::rethrow_exception(error);
                }
            } catch (const boost::system::system_error& ended) {
                // Closed by SIGTERM: the pending consume() was aborted (or the next one refused).
                if (ended.code() != asio::error::operation_aborted && ended.code() != bq::errc::closed) {
                    failure = ended.what();
                }
            } catch (const std::exception& other) {
                failure = other.what();
            }
            io.stop();
        });
    io.run();
    if (!failure.empty()) {
        std::fprintf(stderr, "consumer %d: %s\n", consumer_number, failure.c_str());
        return 1;
    }
    std::string from;
    for (std::size_t partition : partitions) {
        from += (from.empty() ? "" : ", ") + std::to_string(partition);
    }
    std::printf("consumer %d: got %zu jobs from partitions %s, %s\n", consumer_number, received,
                from.empty() ? "(none)" : from.c_str(), in_order ? "each producer's in order" : "OUT OF ORDER");
    std::fflush(stdout);  // the coordinator reads it from a pipe
    return in_order ? 0 : 1;
}

// A process running this program again with other arguments.
struct worker {
    pid_t pid = -1;
    int output = -1;  // the read end of its standard output, when captured
};

// Starts this program again with `arguments`; with `capture`, its standard output goes to a pipe.
worker start(const char* program, const std::vector<std::string>& arguments, bool capture)
{
    std::vector<char*> argv{const_cast<char*>(program)};
    for (const std::string& argument : arguments) {
        argv.push_back(const_cast<char*>(argument.c_str()));
    }
    argv.push_back(nullptr);
    int pipe_ends[2] = {-1, -1};
    posix_spawn_file_actions_t actions;
    ::posix_spawn_file_actions_init(&actions);
    if (capture) {
        if (::pipe(pipe_ends) != 0) {
            throw std::runtime_error("cannot make a pipe");
        }
        ::posix_spawn_file_actions_adddup2(&actions, pipe_ends[1], STDOUT_FILENO);
        ::posix_spawn_file_actions_addclose(&actions, pipe_ends[0]);
    }
    worker started;
    const int failure = ::posix_spawn(&started.pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
    ::posix_spawn_file_actions_destroy(&actions);
    if (capture) {
        ::close(pipe_ends[1]);
        started.output = pipe_ends[0];
    }
    if (failure != 0) {
        throw std::runtime_error("cannot start a worker process");
    }
    return started;
}

// Waits for `process`; true when it exited with status 0. Its captured output goes to `output`.
bool succeeded(const worker& process, std::string* output = nullptr)
{
    if (process.output >= 0) {
        char buffer[4096];
        for (ssize_t got = 0; (got = ::read(process.output, buffer, sizeof buffer)) > 0;) {
            output->append(buffer, static_cast<std::size_t>(got));
        }
        ::close(process.output);
    }
    int status = 0;
    return ::waitpid(process.pid, &status, 0) == process.pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The jobs group "workers" committed, over all partitions, as every process that opens the topic
// sees them (its statistics read the commits of every process).
std::uint64_t committed_jobs(bq::buffer_queue& queue)
{
    std::uint64_t committed = 0;
    for (const bq::group_stats& group : queue.stats<job>("jobs").groups) {
        if (group.name == "workers") {
            for (const bq::group_partition_stats& partition : group.partitions) {
                committed += partition.committed;
            }
        }
    }
    return committed;
}

int coordinate(const char* program, const std::filesystem::path& directory)
{
    std::filesystem::remove_all(directory / "jobs");  // a fresh topic: the counts below start at 0
    // The coordinator opens the topic too (it only reads its statistics).
    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    queue.add_topic(jobs_topic(directory));

    // The first consumer and the producers; once the group committed its first batch, the other
    // consumers join while it works, and the partitions are shared again among them all.
    std::vector<worker> consuming{start(program, {"consume", directory.string(), "0"}, true)};
    std::vector<worker> producing;
    for (int number = 0; number < producers; ++number) {
        producing.push_back(
            start(program, {"produce", directory.string(), std::to_string(number), std::to_string(jobs_per_producer)},
                  false));
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (committed_jobs(queue) == 0 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    for (int number = 1; number < consumers; ++number) {
        consuming.push_back(start(program, {"consume", directory.string(), std::to_string(number)}, true));
    }
    bool ok = true;
    for (const worker& process : producing) {
        ok = succeeded(process) && ok;
    }
    // Every process's appends and commits show in the statistics of every process.
    const std::uint64_t total = static_cast<std::uint64_t>(producers) * jobs_per_producer;
    bool committed = false;
    while (ok && !committed && std::chrono::steady_clock::now() < deadline) {
        committed = committed_jobs(queue) == total;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    // The consumers print what they committed; together, every job once.
    std::uint64_t received = 0;
    for (const worker& process : consuming) {
        ::kill(process.pid, SIGTERM);
        std::string output;
        ok = succeeded(process, &output) && ok;
        std::fputs(output.c_str(), stdout);
        unsigned long long got = 0;
        int consumer_number = 0;
        if (std::sscanf(output.c_str(), "consumer %d: got %llu jobs", &consumer_number, &got) == 2) {
            received += got;
        }
    }
    std::printf("shared_workers: %d producer processes appended %llu jobs; group workers %s; its %d consumer "
                "processes got %llu jobs in all\n",
                producers, static_cast<unsigned long long>(total),
                committed ? "committed all of them" : "did NOT commit all of them within 30 s", consumers,
                static_cast<unsigned long long>(received));
    ok = ok && committed && received == total;
    std::printf("shared_workers: %s\n", ok ? "done" : "FAILED");
    return ok ? 0 : 1;
}

// Prints the usage line: on stdout for --help, on stderr after a mistake.
void print_usage(std::FILE* to, const char* program)
{
    std::fprintf(to,
                 "usage: %s <directory>\n"
                 "  Starts 2 producer and 2 consumer processes that share the persistent topic 'jobs' under\n"
                 "  <directory>/jobs (made anew), and waits until the consumers' group committed every job.\n",
                 program);
}

std::optional<int> number(const char* text)
{
    try {
        std::size_t used = 0;
        const int value = std::stoi(text, &used);
        return used == std::string_view(text).size() && value >= 0 ? std::optional<int>(value) : std::nullopt;
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

int main(int argc, char** argv)
{
    const std::string_view first = argc > 1 ? argv[1] : "";
    try {
        if (argc == 2 && (first == "--help" || first == "-h")) {
            print_usage(stdout, argv[0]);
            return 0;
        }
        if (argc == 5 && first == "produce" && number(argv[3]) && number(argv[4])) {
            return produce(argv[2], *number(argv[3]), *number(argv[4]));
        }
        if (argc == 4 && first == "consume" && number(argv[3])) {
            return consume(argv[2], *number(argv[3]));
        }
        if (argc != 2 || first.empty() || first.front() == '-') {  // a directory, not an option
            print_usage(stderr, argv[0]);
            return 2;
        }
        return coordinate(argv[0], argv[1]);
    } catch (const std::exception& failure) {  // e.g. the directory cannot be created or is damaged
        std::fprintf(stderr, "shared_workers: %s\n", failure.what());
        std::printf("shared_workers: FAILED\n");
        return 1;
    }
}
