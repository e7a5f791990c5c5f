// Kill loop of a process-shared topic (issue 27): three producer processes, two consumer processes
// of group "g" and one of group "h" share one persistent topic folder. Every few hundred
// milliseconds the driver SIGKILLs a random one of them and starts it again. Each child reports
// what it does over a pipe of its own. Once the kills are done, the consumers drain the topic; then
// the driver kills them all, opens the folder itself and checks:
//
// - every acknowledged record was delivered to each group, and nothing was delivered that no
//   producer attempted;
// - a record delivered twice in a group was first delivered in a batch whose commit was never
//   reported: its consumer was killed before, or the commit failed because a rebalance (a restarted
//   consumer joining) revoked the partition while the batch was held, which the library reports
//   instead of committing (docs/consumer-model.md); the run prints how many commits failed;
// - the stored log holds each record at most once, in each producer's order per partition, and
//   nothing that was never attempted. Retention runs all along (every process deletes the segments
//   that both groups of every process committed past), so the log holds the acknowledged records
//   that it did not delete: each one it deleted was delivered to both groups (checked above), and
//   the folder still opens (a group's checkpoint below the log's start would make it corrupt).
//
// usage: bufferqueue_shared_kill_loop [kills] [seconds] [directory]
//   Runs `kills` kills (default 100) or until `seconds` (default 120) have passed, whichever comes
//   first; fails when a check fails or fewer than a quarter of the kills ran. The driver itself
//   never opens the topic before the audit, so it forks from one thread only.
#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/mmap/mmap_topic.hpp"
#include "bufferqueue/serialization/serializer.hpp"

#include <boost/asio/io_context.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

namespace bq = bufferqueue;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr std::size_t partitions = 4;
constexpr std::size_t producer_count = 3;

// `flush` is each process's own: producer 0 appends under `immediate` (group commit across
// processes), the others under `batch`.
bq::mmap_topic_options<std::uint64_t> topic_options(const fs::path& directory,
                                                    bq::flush_strategy flush = bq::flush_strategy::batch)
{
    return {.name = "shared",
            .partitions = partitions,
            .data_directory = directory,
            .segment_size = 4096,                 // 256 records of 8 bytes: frequent rollovers
            .max_retained_consumed_segments = 1,  // retention across processes, under the kills
            .flush = flush,
            .flush_batch_size = 16,
            .serializer = bq::raw_serializer<std::uint64_t>{},
            .process_shared = true};
}

// A record's value: its producer in the top 16 bits, its sequence number below.
constexpr std::uint64_t record_value(std::uint64_t source, std::uint64_t sequence)
{
    return (source << 48) | sequence;
}
constexpr std::uint64_t source_of(std::uint64_t value)
{
    return value >> 48;
}
constexpr std::uint64_t sequence_of(std::uint64_t value)
{
    return value & ((std::uint64_t{1} << 48) - 1);
}

// One report from a child: fixed size, so a pipe write of it is atomic (and a killed child leaves
// none half-written).
struct report {
    enum kind : std::uint64_t {
        attempt = 1,    // a producer is about to produce values [a, b]
        acked = 2,      // that produce succeeded
        delivered = 3,  // a consumer was handed value a of partition b in batch c
        committed = 4,  // the commit of batch c succeeded
        commit_failed = 5,
    };
    std::uint64_t type = 0;
    std::uint64_t a = 0;
    std::uint64_t b = 0;
    std::uint64_t c = 0;
    // When it happened (steady_clock, one clock for every process of the host): the driver reads
    // the children's pipes in turns, so the order it reads reports in is not the order of events.
    std::int64_t time = 0;
};

void send(int fd, report message)
{
    message.time = std::chrono::steady_clock::now().time_since_epoch().count();
    if (::write(fd, &message, sizeof message) != static_cast<ssize_t>(sizeof message)) {
        ::_exit(3);
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

// What a child does: produce (source, from its next sequence number) or consume in a group.
struct role {
    bool producer = false;
    std::uint64_t source = 0;  // producers
    std::string group;         // consumers
    std::string name;
};

[[noreturn]] void run_producer(const fs::path& directory, std::uint64_t source, std::uint64_t next, int fd,
                               unsigned seed)
{
    std::mt19937 random(seed);
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(topic_options(directory, source == 0 ? bq::flush_strategy::immediate : bq::flush_strategy::batch));
    auto producer = queue.producer<std::uint64_t>("shared");
    for (;;) {
        const std::size_t count = 1 + random() % 8;
        std::vector<std::uint64_t> values;
        for (std::size_t i = 0; i < count; ++i) {
            values.push_back(record_value(source, next + i));
        }
        send(fd, {report::attempt, values.front(), values.back(), 0});
        if (!producer.try_produce(std::span<const std::uint64_t>(values))) {
            ::_exit(4);
        }
        send(fd, {report::acked, values.front(), values.back(), 0});
        next += count;
        if (random() % 4 == 0) {
            std::this_thread::sleep_for(1ms);
        }
    }
}

[[noreturn]] void run_consumer(const fs::path& directory, const std::string& group, int fd, std::uint64_t batch_base)
{
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(topic_options(directory));
    auto consumer = queue.create_pull_consumer<std::uint64_t>({.topic = "shared", .group = group, .batch_size = 32});
    for (std::uint64_t batch_id = batch_base;; ++batch_id) {
        auto batch = consumer.try_consume();
        if (!batch) {
            // The membership's assignments and the watcher's wake-ups arrive meanwhile (run_for
            // returns at once when the io_context has no work).
            std::this_thread::sleep_for(1ms);
            io.poll();
            io.restart();
            continue;
        }
        for (const std::uint64_t value : *batch) {
            send(fd, {report::delivered, value, batch->partition(), batch_id});
        }
        boost::system::error_code result = bq::errc::invalid_argument;
        bool done = false;
        consumer.commit([&](boost::system::error_code error) {
            result = error;
            done = true;
        });
        while (!done) {
            io.run_for(2ms);
            io.restart();
            if (!done) {
                std::this_thread::sleep_for(100us);
            }
        }
        if (result) {
            std::fprintf(stderr, "consumer of %s: a commit failed: %s\n", group.c_str(), result.message().c_str());
        }
        send(fd, {result ? report::commit_failed : report::committed, 0, 0, batch_id});
    }
}

// A running child and the read end of its pipe.
struct child {
    role what;
    pid_t pid = -1;
    int fd = -1;
};

// The driver's knowledge, fed by the reports.
struct model {
    std::array<std::uint64_t, producer_count> next{};  // the next sequence number per producer
    std::set<std::uint64_t> attempted;
    std::set<std::uint64_t> acked;
    // Per group: every delivery (value -> the batches it came in, and when), the batches committed
    // (and when their commit succeeded).
    std::map<std::string, std::map<std::uint64_t, std::vector<std::pair<std::uint64_t, std::int64_t>>>> delivered;
    std::map<std::uint64_t, std::int64_t> committed_batches;
    std::uint64_t commit_failures = 0;
    std::map<std::uint64_t, std::string> batch_group;        // incarnation -> group
    std::map<std::uint64_t, std::string> batch_owner;        // incarnation -> "consumer g/0 #3"
    std::map<std::uint64_t, std::uint64_t> batch_partition;  // batch id -> partition
};

void apply(model& state, const report& message)
{
    switch (message.type) {
    case report::attempt:
        for (std::uint64_t value = message.a; value <= message.b; ++value) {
            state.attempted.insert(value);
        }
        state.next[source_of(message.a)] = sequence_of(message.b) + 1;
        break;
    case report::acked:
        for (std::uint64_t value = message.a; value <= message.b; ++value) {
            state.acked.insert(value);
        }
        break;
    case report::delivered:
        check(message.b < partitions, "a delivery names partition " + std::to_string(message.b));
        state.delivered[state.batch_group.at(message.c >> 32)][message.a].emplace_back(message.c, message.time);
        state.batch_partition[message.c] = message.b;
        break;
    case report::committed: state.committed_batches[message.c] = message.time; break;
    case report::commit_failed: ++state.commit_failures; break;
    default: throw failure("unknown report type " + std::to_string(message.type));
    }
}

class driver {
public:
    explicit driver(fs::path directory) : directory_(std::move(directory)) {}

    ~driver()
    {
        for (child& each : children_) {
            stop(each);
        }
    }

    void add(role what)
    {
        children_.push_back({std::move(what)});
        start(children_.back());
    }

    // Reads the reports that arrive within `wait`, and returns once it passed (also while children
    // still report: what is left is read by the next pump, or when a child is stopped).
    void pump(std::chrono::milliseconds wait)
    {
        std::vector<pollfd> readable;
        for (const child& each : children_) {
            readable.push_back({.fd = each.fd, .events = POLLIN, .revents = 0});  // poll skips a stopped one's -1
        }
        const auto deadline = std::chrono::steady_clock::now() + wait;
        for (;;) {
            const auto left =
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0 || ::poll(readable.data(), readable.size(), static_cast<int>(left.count())) <= 0) {
                return;
            }
            for (std::size_t i = 0; i < readable.size(); ++i) {
                if ((readable[i].revents & POLLIN) != 0) {
                    read_one(children_[i]);
                }
            }
        }
    }

    // SIGKILLs child `index`, reads what it reported before, and starts it again.
    void kill_and_restart(std::size_t index)
    {
        child& victim = children_[index];
        stop(victim);
        start(victim);
        ++kills_;
    }

    // SIGKILLs child `index` for good.
    void stop_child(std::size_t index) { stop(children_[index]); }

    void stop_all()
    {
        for (child& each : children_) {
            stop(each);
        }
    }

    std::size_t size() const { return children_.size(); }
    std::uint64_t kills() const { return kills_; }
    model& state() { return state_; }

    // True once every acknowledged record was delivered to each group.
    bool drained(const std::vector<std::string>& groups) const
    {
        for (const std::string& group : groups) {
            const auto found = state_.delivered.find(group);
            for (const std::uint64_t value : state_.acked) {
                if (found == state_.delivered.end() || !found->second.contains(value)) {
                    return false;
                }
            }
        }
        return true;
    }

private:
    void start(child& each)
    {
        int ends[2];
        if (::pipe(ends) != 0) {
            throw failure("pipe failed");
        }
        const std::uint64_t batch_base = ++incarnations_ << 32;  // batch ids unique per incarnation
        state_.batch_group[batch_base >> 32] = each.what.group;
        state_.batch_owner[batch_base >> 32] = each.what.name + " #" + std::to_string(batch_base >> 32);
        const std::uint64_t next = each.what.producer ? state_.next[each.what.source] : 0;
        std::fflush(nullptr);
        const pid_t pid = ::fork();
        if (pid < 0) {
            throw failure("fork failed");
        }
        if (pid == 0) {
            ::close(ends[0]);
            for (const child& other : children_) {
                if (other.fd >= 0) {
                    ::close(other.fd);
                }
            }
            try {
                if (each.what.producer) {
                    run_producer(directory_, each.what.source, next, ends[1], static_cast<unsigned>(batch_base >> 32));
                }
                run_consumer(directory_, each.what.group, ends[1], batch_base);
            } catch (const std::exception& error) {
                std::fprintf(stderr, "%s: %s\n", each.what.name.c_str(), error.what());
                ::_exit(6);
            }
        }
        ::close(ends[1]);
        each.pid = pid;
        each.fd = ends[0];
    }

    void stop(child& each)
    {
        if (each.pid <= 0) {
            return;
        }
        ::kill(each.pid, SIGKILL);
        int status = 0;
        ::waitpid(each.pid, &status, 0);
        const bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
        each.pid = -1;
        while (read_one(each)) {
        }
        ::close(each.fd);
        each.fd = -1;
        check(killed, each.what.name + " ended before it was killed (status " + std::to_string(status) + ")");
    }

    // Reads one report; false at the end of the pipe.
    bool read_one(child& each)
    {
        report message;
        const ssize_t got = ::read(each.fd, &message, sizeof message);
        if (got == 0) {
            return false;
        }
        check(got == static_cast<ssize_t>(sizeof message), each.what.name + ": a short report");
        apply(state_, message);
        return true;
    }

    fs::path directory_;
    std::vector<child> children_;
    model state_;
    std::uint64_t incarnations_ = 0;
    std::uint64_t kills_ = 0;
};

// Every record delivered twice in a group was first delivered in a batch never reported committed.
void check_deliveries(const model& state, const std::vector<std::string>& groups, std::uint64_t& redelivered)
{
    for (const std::string& group : groups) {
        const auto& deliveries = state.delivered.at(group);
        for (const auto& [value, batches] : deliveries) {
            check(state.attempted.contains(value),
                  group + " was handed value " + std::to_string(value) + ", which no producer attempted");
            // A delivery after the commit of an earlier batch with the value is the library's fault.
            for (const auto& delivery : batches) {
                const std::uint64_t batch = delivery.first;
                const auto commit = state.committed_batches.find(batch);
                if (commit == state.committed_batches.end()) {
                    continue;
                }
                for (const auto& [again, again_at] : batches) {
                    if (again == batch || again_at <= commit->second) {
                        continue;
                    }
                    std::string history;
                    for (const auto& [each, at] : batches) {
                        const auto committed = state.committed_batches.find(each);
                        history += " batch " + std::to_string(each & 0xffffffff) + " of " +
                                   state.batch_owner.at(each >> 32) + " (partition " +
                                   std::to_string(state.batch_partition.at(each)) + ", delivered at " +
                                   std::to_string(at) + ", " +
                                   (committed == state.committed_batches.end()
                                        ? std::string("not committed")
                                        : "committed at " + std::to_string(committed->second)) +
                                   ");";
                    }
                    throw failure(group + " was handed value " + std::to_string(value) +
                                  " again after a batch with it was committed:" + history);
                }
            }
            redelivered += batches.size() - 1;
        }
        for (const std::uint64_t value : state.acked) {
            check(deliveries.contains(value), group + " never got acknowledged value " + std::to_string(value));
        }
    }
}

// Reads the whole log with a new group and checks it against what was attempted and acknowledged.
void audit_log(const fs::path& directory, const model& state)
{
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(topic_options(directory));
    auto reader = queue.create_pull_consumer<std::uint64_t>({.topic = "shared", .group = "audit", .batch_size = 512});
    std::set<std::uint64_t> stored;
    std::map<std::pair<std::size_t, std::uint64_t>, std::uint64_t> last;  // (partition, source) -> sequence
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    std::size_t quiet = 0;
    while (quiet < 100 && std::chrono::steady_clock::now() < deadline) {
        auto batch = reader.try_consume();
        if (!batch) {
            ++quiet;
            std::this_thread::sleep_for(5ms);  // the membership assigns the partitions meanwhile
            io.poll();
            io.restart();
            continue;
        }
        quiet = 0;
        for (const std::uint64_t value : *batch) {
            check(state.attempted.contains(value),
                  "the log holds value " + std::to_string(value) + ", which no producer attempted");
            check(stored.insert(value).second, "the log holds value " + std::to_string(value) + " twice");
            const auto key = std::make_pair(batch->partition(), source_of(value));
            const auto previous = last.find(key);
            check(previous == last.end() || previous->second < sequence_of(value),
                  "partition " + std::to_string(batch->partition()) + " holds producer " +
                      std::to_string(source_of(value)) + "'s " + std::to_string(sequence_of(value)) + " after " +
                      (previous == last.end() ? std::string() : std::to_string(previous->second)));
            last[key] = sequence_of(value);
        }
        boost::system::error_code result = bq::errc::invalid_argument;
        reader.commit([&](boost::system::error_code error) { result = error; });
        io.run();
        io.restart();
        check(!result, "the audit's commit failed: " + result.message());
    }
    // What retention deleted: each was delivered to both groups (check_deliveries).
    std::size_t deleted = 0;
    for (const std::uint64_t value : state.acked) {
        deleted += stored.contains(value) ? 0 : 1;
    }
    std::printf("audit: %zu records stored, %zu acknowledged (%zu of them deleted by retention), %zu attempted\n",
                stored.size(), state.acked.size(), deleted, state.attempted.size());
}

}  // namespace

int main(int argc, char** argv)
{
    const std::uint64_t target_kills = argc > 1 ? std::stoull(argv[1]) : 100;
    const std::chrono::seconds limit(argc > 2 ? std::stoll(argv[2]) : 120);
    const fs::path directory =
        argc > 3 ? fs::path(argv[3])
                 : fs::temp_directory_path() / ("bufferqueue-shared-kill-" + std::to_string(::getpid()));
    const bool own_directory = argc <= 3;
    fs::remove_all(directory);
    fs::create_directories(directory);
    int status = 0;
    try {
        const std::vector<std::string> groups = {"g", "h"};
        driver processes(directory);
        for (std::uint64_t source = 0; source < producer_count; ++source) {
            processes.add(
                {.producer = true, .source = source, .group = "", .name = "producer " + std::to_string(source)});
        }
        processes.add({.producer = false, .source = 0, .group = "g", .name = "consumer g/0"});
        processes.add({.producer = false, .source = 0, .group = "g", .name = "consumer g/1"});
        processes.add({.producer = false, .source = 0, .group = "h", .name = "consumer h/0"});

        std::mt19937 random(12345);
        const auto start = std::chrono::steady_clock::now();
        while (processes.kills() < target_kills && std::chrono::steady_clock::now() - start < limit) {
            processes.pump(std::chrono::milliseconds(100 + random() % 300));
            processes.kill_and_restart(random() % processes.size());
        }
        const std::uint64_t kills = processes.kills();
        // The producers stop; the consumers (restarted or not) drain what was acknowledged.
        for (std::size_t index = 0; index < producer_count; ++index) {
            processes.stop_child(index);
        }
        const auto drain_deadline = std::chrono::steady_clock::now() + 60s;
        while (!processes.drained(groups) && std::chrono::steady_clock::now() < drain_deadline) {
            processes.pump(100ms);
        }
        processes.pump(300ms);  // a consumer delivering something again would show here
        processes.stop_all();
        std::uint64_t redelivered = 0;
        check_deliveries(processes.state(), groups, redelivered);
        audit_log(directory, processes.state());
        std::printf("shared kill loop: %llu kills, %zu records acknowledged, %llu deliveries again after a kill, "
                    "%llu failed commits\n",
                    static_cast<unsigned long long>(kills), processes.state().acked.size(),
                    static_cast<unsigned long long>(redelivered),
                    static_cast<unsigned long long>(processes.state().commit_failures));
        check(kills * 4 >= target_kills, "only " + std::to_string(kills) + " kills ran");
    } catch (const std::exception& error) {
        std::fprintf(stderr, "shared kill loop FAILED: %s\n", error.what());
        status = 1;
    }
    if (own_directory && status == 0) {
        fs::remove_all(directory);
    }
    return status;
}
