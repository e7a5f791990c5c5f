// The real-cluster mode of the Kafka tests (docs/kafka.md, "Tests"): with BUFFERQUEUE_KAFKA_BOOTSTRAP
// set, the tests create their topics through the admin API on that cluster, under names unique per
// run, and the tests that need the mock's fault injection skip with a warning. Checked here without
// a real cluster: this test starts a mock cluster in this process and runs a few Kafka tests in a
// child process (this binary again, posix_spawn) with BUFFERQUEUE_KAFKA_BOOTSTRAP naming the mock.
// librdkafka 2.0.2's mock answers no CreateTopics request (it names no controller), so this process
// creates each topic the child announces ("bufferqueue tests: creating Kafka topic ...") on the mock;
// the child finds it in the metadata, as it would a topic created for the run by someone else.
#include "bufferqueue/kafka.hpp"

#include "catch.hpp"
#include "kafka_test_support.hpp"

#include <cstdio>
#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace kafka_bootstrap_test {

namespace {

namespace bq = bufferqueue;

/// The Kafka tests the child runs: two that use the shared cluster (one creates a 6-partition topic
/// with 3 replicas), one that needs fault injection and must skip.
const std::vector<std::string> child_tests{
    "a kafka topic registers when the cluster has it with that partition count",
    "a kafka produce completes once the brokers acknowledged every record*",
    "a kafka produce completes with timed_out after message.timeout.ms while the broker is down"};

/// Runs this binary on `tests` with BUFFERQUEUE_KAFKA_BOOTSTRAP=`servers`, creating on `cluster` the
/// topics it announces; returns its exit status and its output (stdout and stderr).
std::pair<int, std::string> run_child(bq::kafka_mock_cluster& cluster, const std::string& servers,
                                      std::set<std::string>& created)
{
    std::string filter;
    for (const std::string& test : child_tests) {
        filter += (filter.empty() ? "" : ",") + test;
    }
    std::vector<std::string> variables{"BUFFERQUEUE_KAFKA_BOOTSTRAP=" + servers};
    std::vector<char*> environment_list{variables[0].data()};
    for (char** each = environ; *each != nullptr; ++each) {
        if (!std::string_view(*each).starts_with("BUFFERQUEUE_KAFKA_BOOTSTRAP=")) {
            environment_list.push_back(*each);
        }
    }
    environment_list.push_back(nullptr);
    int output_pipe[2];
    REQUIRE(::pipe(output_pipe) == 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, output_pipe[1], 1);
    posix_spawn_file_actions_adddup2(&actions, output_pipe[1], 2);
    posix_spawn_file_actions_addclose(&actions, output_pipe[0]);
    std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    std::string reporter = "--reporter=compact";  // one line per message, not wrapped
    std::vector<char*> arguments{self.data(), filter.data(), reporter.data(), nullptr};
    pid_t child = -1;
    const int spawned = posix_spawn(&child, self.c_str(), &actions, nullptr, arguments.data(), environment_list.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(output_pipe[1]);
    REQUIRE(spawned == 0);

    std::string output;
    FILE* from_child = ::fdopen(output_pipe[0], "r");
    REQUIRE(from_child != nullptr);
    const std::regex announcement("bufferqueue tests: creating Kafka topic ([^ ]+) \\(([0-9]+) partitions, "
                                  "replication ([0-9]+)\\)");
    char line[4096];
    while (std::fgets(line, sizeof line, from_child) != nullptr) {
        output += line;
        std::cmatch match;
        if (std::regex_search(line, match, announcement)) {
            cluster.create_topic(match[1], std::stoul(match[2]), std::stoul(match[3]));
            created.insert(match[1]);
        }
    }
    std::fclose(from_child);
    int status = 0;
    ::waitpid(child, &status, 0);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

}  // namespace

TEST_CASE("with BUFFERQUEUE_KAFKA_BOOTSTRAP the kafka tests run on that cluster under unique topic names, and the "
          "fault-injection tests skip saying why",
          "[kafka]")
{
    bq::kafka_mock_cluster cluster{3};
    const std::string servers = cluster.bootstrap_servers();
    std::set<std::string> created;
    const auto [status, output] = run_child(cluster, servers, created);
    INFO("the child's output:\n" << output);
    CHECK(status == 0);
    CHECK(output.find("Passed all " + std::to_string(child_tests.size()) + " test cases") != std::string::npos);
    // Each test that uses the shared cluster created its topic there, named for this run.
    REQUIRE(created.size() == 2);
    for (const std::string& topic : created) {
        CHECK(std::regex_match(topic, std::regex("bufferqueue-test-[0-9]+-[0-9]+-orders-[0-9]+")));
    }
    // The broker-down test says it skipped, naming the cluster and why.
    CHECK(output.find("skipped against the real cluster BUFFERQUEUE_KAFKA_BOOTSTRAP=" + servers +
                      ": this test takes a broker down") != std::string::npos);
    // The records the child produced are in the cluster it was given (both topics have 6 partitions).
    bq::test::kafka_reader reader(servers);
    std::int64_t records = 0;
    for (const std::string& topic : created) {
        for (std::int32_t partition = 0; partition < 6; ++partition) {
            records += reader.end_offset(topic, partition);
        }
    }
    CHECK(records > 0);
}

}  // namespace kafka_bootstrap_test
