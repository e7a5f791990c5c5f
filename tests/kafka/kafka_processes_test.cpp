// Kafka topics across processes (docs/kafka.md "Tests"): two processes in one consumer group split
// the partitions; when one is killed (SIGKILL: no leave, no commit) the other takes its partitions
// and receives its uncommitted records again. Every acknowledged record is received at least once.
// The processes are this test binary again, running the hidden test case below (posix_spawn, so
// the parent's librdkafka threads never meet a fork).
#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/kafka.hpp"

#include "catch.hpp"
#include "kafka_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace kafka_processes_test {

namespace {

namespace bq = bufferqueue;
namespace fs = std::filesystem;

constexpr const char* child_test_name = "kafka group member process (run by the multi-process test)";

bq::kafka_topic_options<int> options_for(const std::string& topic, const std::string& servers)
{
    return bq::kafka_topic_options<int>{.name = topic,
                                        .partitions = 4,
                                        .bootstrap_servers = servers,
                                        // A killed member is noticed after session.timeout.ms.
                                        .properties = bq::test::group_properties()};
}

std::string environment(const char* name)
{
    const char* value = std::getenv(name);
    return value != nullptr ? value : "";
}

/// A member process: this binary running `child_test_name` with the settings in its environment.
class member_process {
public:
    member_process(const std::string& servers, const std::string& topic, const fs::path& output, bool commits)
    {
        std::vector<std::string> variables{"BUFFERQUEUE_TEST_KAFKA_SERVERS=" + servers,
                                           "BUFFERQUEUE_TEST_KAFKA_TOPIC=" + topic,
                                           "BUFFERQUEUE_TEST_KAFKA_OUTPUT=" + output.string(),
                                           std::string("BUFFERQUEUE_TEST_KAFKA_COMMITS=") + (commits ? "1" : "0")};
        std::vector<char*> environment_list;
        for (std::string& each : variables) {
            environment_list.push_back(each.data());
        }
        for (char** each = environ; *each != nullptr; ++each) {
            environment_list.push_back(*each);
        }
        environment_list.push_back(nullptr);
        std::string self = fs::read_symlink("/proc/self/exe").string();
        std::string name = child_test_name;
        std::vector<char*> arguments{self.data(), name.data(), nullptr};
        REQUIRE(posix_spawn(&pid_, self.c_str(), nullptr, nullptr, arguments.data(), environment_list.data()) == 0);
    }
    member_process(const member_process&) = delete;
    member_process& operator=(const member_process&) = delete;
    ~member_process() { kill(); }

    /// SIGKILL, then reaps the process. Idempotent.
    void kill() noexcept
    {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            int status = 0;
            ::waitpid(pid_, &status, 0);
            pid_ = -1;
        }
    }

private:
    pid_t pid_ = -1;
};

/// The items a member process wrote to `output` so far (one per line).
std::multiset<int> received(const fs::path& output)
{
    std::multiset<int> items;
    std::ifstream in(output);
    int item = 0;
    while (in >> item) {
        items.insert(item);
    }
    return items;
}

/// Polls `done()` every 50 ms until it holds; REQUIREs it within `timeout`.
template <class Done>
void wait_for(Done done, std::chrono::seconds timeout)
{
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    REQUIRE(done());
}

}  // namespace

TEST_CASE("two processes in one kafka group split the partitions, and when one is killed the other receives its "
          "uncommitted records again",
          "[kafka][slow]")
{
    const std::string topic = bq::test::unique_topic("processes");
    bq::test::kafka_test_cluster& cluster = bq::test::shared_kafka_cluster();
    cluster.create_topic(topic, 4);
    const std::string servers = cluster.bootstrap_servers();
    const bq::test::temporary_directory directory("bufferqueue-kafka-processes");

    // Acknowledged records: round-robin, item % 4 is its partition.
    const std::vector<int> produced = bq::test::range(0, 40);
    {
        boost::asio::io_context io;
        bq::buffer_queue queue(io.get_executor());
        queue.add_topic(options_for(topic, servers));
        auto producer = queue.producer<int>(topic);
        std::optional<boost::system::error_code> result;
        producer.produce(produced, [&](boost::system::error_code error) { result = error; });
        REQUIRE(bq::test::run_until(io, [&] { return result.has_value(); }));
        REQUIRE(*result == boost::system::error_code());
    }
    const std::set<int> every(produced.begin(), produced.end());

    const fs::path victim_output = directory.path() / "victim.txt";
    const fs::path survivor_output = directory.path() / "survivor.txt";
    const auto distinct = [](const fs::path& output) {
        const std::multiset<int> items = received(output);
        return std::set<int>(items.begin(), items.end());
    };
    // Alone in the group, the first member gets every partition and receives every record; it
    // never commits.
    member_process victim(servers, topic, victim_output, false);
    wait_for([&] { return distinct(victim_output) == every; }, std::chrono::seconds(60));
    // A second member joins: the group splits the partitions, and it receives its share from the
    // committed offsets (none: from the start) while the first keeps the rest.
    member_process survivor(servers, topic, survivor_output, true);
    wait_for([&] { return !distinct(survivor_output).empty(); }, std::chrono::seconds(60));
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const std::set<int> share = distinct(survivor_output);
    CHECK(share.size() < every.size());

    victim.kill();  // no leave, no commit: the group notices after the session timeout
    // The survivor takes the victim's partitions and receives from their committed offsets: the
    // records the victim received without committing come again, and none is missing.
    wait_for([&] { return distinct(survivor_output) == every; }, std::chrono::seconds(60));
    survivor.kill();
}

TEST_CASE(child_test_name, "[.][kafka_process]")
{
    // Run only by the test above (in a process of its own); ends when killed, or after 2 minutes.
    const std::string servers = environment("BUFFERQUEUE_TEST_KAFKA_SERVERS");
    REQUIRE_FALSE(servers.empty());
    const std::string topic = environment("BUFFERQUEUE_TEST_KAFKA_TOPIC");
    const bool commits = environment("BUFFERQUEUE_TEST_KAFKA_COMMITS") == "1";
    std::ofstream output(environment("BUFFERQUEUE_TEST_KAFKA_OUTPUT"));
    REQUIRE(output);
    boost::asio::io_context io;
    bq::buffer_queue queue(io.get_executor());
    queue.add_topic(options_for(topic, servers));
    auto consumer = queue.create_pull_consumer<int>({.topic = topic, .group = "members", .batch_size = 100});
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (std::chrono::steady_clock::now() < deadline) {
        std::optional<boost::system::error_code> result;
        std::vector<int> items;
        consumer.consume([&](boost::system::error_code error, bq::batch<int> batch) {
            items.assign(batch.begin(), batch.end());
            result = error;
        });
        while (!result && std::chrono::steady_clock::now() < deadline) {
            io.restart();
            io.run_for(std::chrono::milliseconds(20));
        }
        if (!result || *result) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));  // failed: try again shortly
            continue;
        }
        for (const int item : items) {
            output << item << '\n';
        }
        output.flush();  // written before it is committed
        if (commits) {
            std::optional<boost::system::error_code> committed;
            consumer.commit([&](boost::system::error_code error) { committed = error; });
            while (!committed && std::chrono::steady_clock::now() < deadline) {
                io.restart();
                io.run_for(std::chrono::milliseconds(20));
            }
        }
    }
}

}  // namespace kafka_processes_test
