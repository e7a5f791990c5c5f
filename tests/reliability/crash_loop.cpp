// Crash loop: a forked child produces numbered records (flush immediate) and consumes-and-commits
// them in a group, reporting every step over a pipe; the parent SIGKILLs it at a random moment,
// reopens the directory and checks that every acknowledged record is present exactly once, in
// order per partition, with nothing that was never produced, and that committed offsets never move
// backwards and never skip an uncommitted record.
//
// usage: bufferqueue_crash_loop [cycles] [seconds] [directory]
//   Runs `cycles` kill cycles (default 200) or until `seconds` (default 60) have passed, whichever
//   comes first; fails when a check fails or fewer than a quarter of the cycles ran.
#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/mmap_topic.hpp"
#include "bufferqueue/serialization/serializer.hpp"

#include <boost/asio/io_context.hpp>

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace {

namespace bq = bufferqueue;
namespace fs = std::filesystem;

constexpr std::size_t partitions = 3;
constexpr std::uint64_t segment_size = 1024;  // ~60 records of 8 bytes: frequent rollovers and deletions

bq::mmap_topic_options<std::uint64_t> topic_options(const fs::path& directory)
{
    return {.name = "crash",
            .partitions = partitions,
            .data_directory = directory,
            .segment_size = segment_size,
            .max_retained_consumed_segments = 1,
            .flush = bq::flush_strategy::immediate,
            .flush_batch_size = 7,
            .serializer = bq::raw_serializer<std::uint64_t>{}};
}

// One report from the child: fixed size, so a pipe write of it is atomic.
struct report {
    enum kind : std::uint64_t {
        attempt = 1,    // about to produce sequence numbers [a, b]
        acked = 2,      // produce of [a, b] succeeded
        delivered = 3,  // a batch of partition a ending with sequence number b was handed out
        committed = 4,  // that batch's commit succeeded
    };
    std::uint64_t type = 0;
    std::uint64_t a = 0;
    std::uint64_t b = 0;
};

void send(int fd, report message)
{
    const ssize_t written = ::write(fd, &message, sizeof message);
    if (written != static_cast<ssize_t>(sizeof message)) {
        ::_exit(3);
    }
}

// The child: produce batches and consume-and-commit forever, until killed.
[[noreturn]] void run_child(const fs::path& directory, std::uint64_t next_sequence, int fd, unsigned seed)
{
    try {
        std::mt19937 random(seed);
        boost::asio::io_context io;
        bq::buffer_queue queue(io.get_executor());
        queue.add_topic(topic_options(directory));
        auto producer = queue.producer<std::uint64_t>("crash");
        auto consumer = queue.create_pull_consumer<std::uint64_t>(
            {.topic = "crash", .group = "work", .batch_size = 1 + random() % 16});
        for (;;) {
            const std::size_t count = 1 + random() % 8;
            std::vector<std::uint64_t> items;
            for (std::size_t i = 0; i < count; ++i) {
                items.push_back(next_sequence + i);
            }
            send(fd, {report::attempt, items.front(), items.back()});
            if (!producer.try_produce(std::span<const std::uint64_t>(items))) {
                ::_exit(4);
            }
            send(fd, {report::acked, items.front(), items.back()});
            next_sequence += count;
            if (random() % 2 == 0) {
                if (auto batch = consumer.try_consume()) {
                    send(fd, {report::delivered, batch->partition(), (*batch)[batch->size() - 1]});
                    boost::system::error_code result = bq::errc::invalid_argument;
                    consumer.commit([&](boost::system::error_code error) { result = error; });
                    io.run();
                    io.restart();
                    if (result) {
                        std::fprintf(stderr, "crash child: commit failed: %s\n", result.message().c_str());
                        ::_exit(5);
                    }
                    send(fd, {report::committed, batch->partition(), (*batch)[batch->size() - 1]});
                }
            }
        }
    } catch (const std::exception& failure) {
        std::fprintf(stderr, "crash child: %s\n", failure.what());
        ::_exit(6);
    }
}

struct failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

void check(bool condition, const std::string& message)
{
    if (!condition) {
        throw failure(message);
    }
}

std::string partition_folder(const fs::path& directory, std::size_t partition)
{
    return bq::detail::partition_folder((directory / "crash").string(), partition);
}

// Everything the parent knows, carried from cycle to cycle.
struct model {
    std::uint64_t next_sequence = 0;
    std::set<std::uint64_t> pending;                           // attempted in this cycle, not yet audited
    std::set<std::uint64_t> acked_unaudited;                   // acknowledged, not yet seen by the audit
    std::array<std::vector<std::uint64_t>, partitions> order;  // audited sequence numbers per partition
    std::set<std::uint64_t> seen;                              // every audited sequence number
    // The work group: the last reported commit per partition and batches delivered after it.
    std::array<std::optional<std::uint64_t>, partitions> last_commit;
    std::array<std::vector<std::uint64_t>, partitions> delivered_since_commit;
    std::map<std::string, std::uint64_t> checkpoints;  // consumer.offset files, last value seen
    std::uint64_t records_audited = 0;
    std::uint64_t commits_reported = 0;
};

void apply(model& state, const report& message)
{
    switch (message.type) {
    case report::attempt:
        for (std::uint64_t sequence = message.a; sequence <= message.b; ++sequence) {
            state.pending.insert(sequence);
        }
        state.next_sequence = message.b + 1;
        break;
    case report::acked:
        for (std::uint64_t sequence = message.a; sequence <= message.b; ++sequence) {
            state.acked_unaudited.insert(sequence);
        }
        break;
    case report::delivered:
        check(message.a < partitions, "a delivered report names partition " + std::to_string(message.a));
        state.delivered_since_commit[message.a].push_back(message.b);
        break;
    case report::committed:
        state.last_commit[message.a] = message.b;
        state.delivered_since_commit[message.a].clear();
        ++state.commits_reported;
        break;
    default: throw failure("unknown report type " + std::to_string(message.type));
    }
}

// Checkpoints never move backwards.
void check_checkpoints(model& state, const fs::path& directory)
{
    for (std::size_t partition = 0; partition < partitions; ++partition) {
        for (const std::string group : {"work", "audit"}) {
            const std::string path = partition_folder(directory, partition) + "/offsets/" + group + "/consumer.offset";
            const std::optional<std::uint64_t> value = bq::detail::read_checkpoint(path);
            if (!value) {
                continue;
            }
            const auto [previous, inserted] = state.checkpoints.emplace(path, *value);
            check(inserted || previous->second <= *value,
                  path + " moved backwards from " + std::to_string(previous->second) + " to " + std::to_string(*value));
            previous->second = *value;
        }
    }
}

// Reopens the topic, reads what the audit group has not read yet and checks it; checks where the
// work group resumes; commits the audit group.
void audit(model& state, const fs::path& directory)
{
    check_checkpoints(state, directory);
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(topic_options(directory));
    auto auditor = queue.create_pull_consumer<std::uint64_t>({.topic = "crash", .group = "audit", .batch_size = 1000});
    while (auto batch = auditor.try_consume()) {
        std::vector<std::uint64_t>& order = state.order[batch->partition()];
        for (const std::uint64_t sequence : *batch) {
            check(state.pending.contains(sequence) || state.acked_unaudited.contains(sequence),
                  "record " + std::to_string(sequence) + " in partition " + std::to_string(batch->partition()) +
                      " was never produced in this cycle (or was already delivered)");
            check(order.empty() || order.back() < sequence, "record " + std::to_string(sequence) + " in partition " +
                                                                std::to_string(batch->partition()) +
                                                                " is out of order");
            check(state.seen.insert(sequence).second, "record " + std::to_string(sequence) + " appears twice");
            order.push_back(sequence);
            state.pending.erase(sequence);
            state.acked_unaudited.erase(sequence);
            ++state.records_audited;
        }
        boost::system::error_code result = bq::errc::invalid_argument;
        auditor.commit([&](boost::system::error_code error) { result = error; });
        io.run();
        io.restart();
        check(!result, "the audit commit failed: " + result.message());
    }
    check(state.acked_unaudited.empty(),
          std::to_string(state.acked_unaudited.size()) + " acknowledged records are missing, the first is " +
              (state.acked_unaudited.empty() ? std::string() : std::to_string(*state.acked_unaudited.begin())));
    // Attempted but not stored: lost for good; if one shows up later, it is not in `pending`.
    state.pending.clear();

    // The work group resumes right after a batch whose commit may have persisted: the last reported
    // commit or one of the batches delivered after it (killed before the report), never earlier and
    // never later (no skipped record).
    // One consumer per partition, so each try_consume reads the partition's first unread record.
    auto workers =
        queue.create_pull_consumers<std::uint64_t>({.topic = "crash", .group = "work", .batch_size = 1}, partitions);
    std::array<std::optional<std::uint64_t>, partitions> first_unread;
    for (auto& worker : workers) {
        if (auto batch = worker.try_consume()) {
            first_unread[batch->partition()] = (*batch)[0];
        }
    }
    for (std::size_t partition = 0; partition < partitions; ++partition) {
        const std::vector<std::uint64_t>& order = state.order[partition];
        std::vector<std::optional<std::uint64_t>> allowed_after;  // nullopt: from the start
        allowed_after.push_back(state.last_commit[partition]);
        for (const std::uint64_t end : state.delivered_since_commit[partition]) {
            allowed_after.push_back(end);
        }
        bool matched = false;
        for (const auto& after : allowed_after) {
            // The record following `after` in this partition, or none.
            std::optional<std::uint64_t> expected;
            if (!after) {
                if (!order.empty()) {
                    expected = order.front();
                }
            } else {
                const auto found = std::upper_bound(order.begin(), order.end(), *after);
                if (found != order.end()) {
                    expected = *found;
                }
            }
            matched = matched || expected == first_unread[partition];
        }
        check(matched, "the work group resumes partition " + std::to_string(partition) + " at " +
                           (first_unread[partition] ? std::to_string(*first_unread[partition]) : "the end") +
                           ", not right after a batch whose commit may have persisted (last reported commit " +
                           (state.last_commit[partition] ? std::to_string(*state.last_commit[partition]) : "none") +
                           ")");
    }
    queue.close();
    check_checkpoints(state, directory);
}

int run(std::size_t cycles, double seconds, const fs::path& root)
{
    // A folder of this run's own: two runs at once (two checkouts' ctest on one machine) must not
    // share one and audit each other's records.
    const fs::path directory = root / ("crash-loop-" + std::to_string(::getpid()));
    fs::remove_all(directory);
    fs::create_directories(directory);
    model state;
    std::mt19937 random(std::random_device{}());
    const auto start = std::chrono::steady_clock::now();
    const auto elapsed = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    std::size_t cycle = 0;
    try {
        for (; cycle < cycles && elapsed() < seconds; ++cycle) {
            int fds[2];
            check(::pipe2(fds, O_CLOEXEC) == 0, std::string("pipe: ") + std::strerror(errno));
            const unsigned seed = static_cast<unsigned>(random());
            const pid_t child = ::fork();
            check(child >= 0, std::string("fork: ") + std::strerror(errno));
            if (child == 0) {
                ::close(fds[0]);
                run_child(directory, state.next_sequence, fds[1], seed);
            }
            ::close(fds[1]);
            // Kill anywhere from the middle of opening the topic to well into producing.
            std::this_thread::sleep_for(std::chrono::microseconds(random() % 60000));
            ::kill(child, SIGKILL);
            int status = 0;
            ::waitpid(child, &status, 0);
            report message;
            ssize_t got = 0;
            while ((got = ::read(fds[0], &message, sizeof message)) == static_cast<ssize_t>(sizeof message)) {
                apply(state, message);
            }
            ::close(fds[0]);
            check(got == 0, "a partial report on the pipe");
            check(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                  "the child exited by itself (status " + std::to_string(status) + ") instead of being killed");
            audit(state, directory);
        }
    } catch (const std::exception& error) {
        std::fprintf(stderr, "crash loop: FAILED in cycle %zu: %s\n(directory kept: %s)\n", cycle + 1, error.what(),
                     directory.c_str());
        return 1;
    }
    std::printf("crash loop: %zu kill cycles survived in %.1f s; %llu records produced, %llu audited "
                "exactly once in order, %llu commits reported, 0 losses\n",
                cycle, elapsed(), static_cast<unsigned long long>(state.next_sequence),
                static_cast<unsigned long long>(state.records_audited),
                static_cast<unsigned long long>(state.commits_reported));
    fs::remove_all(directory);
    if (cycle * 4 < cycles) {
        std::fprintf(stderr, "crash loop: FAILED: only %zu of %zu cycles fit in %.0f s\n", cycle, cycles, seconds);
        return 1;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    const std::size_t cycles = argc > 1 ? std::stoul(argv[1]) : 200;
    const double seconds = argc > 2 ? std::stod(argv[2]) : 60;
    const fs::path root = argc > 3 ? fs::path(argv[3]) : fs::temp_directory_path();
    return run(cycles, seconds, root);
}
