// Test driver of the http_ingest example: starts the server on an ephemeral loopback port, drives
// it with real HTTP requests, checks status codes, that the consumers saw every accepted item, and
// that the server shuts down cleanly on request and answers a request that arrives while it stops
// with 503 (the queue is closed by then). Built with bufferqueue::prometheus, it also scrapes
// GET /metrics and checks the lag of group-audit, which never consumes.
//
//   http_ingest_client <path to example_http_ingest> [--kafka[=<servers>]]
//
// With --kafka the server runs with that option (topic-foo1 in Kafka) and the driver checks the same
// things, except the /metrics samples of topic-foo1: the server answers /metrics on its io_context
// thread, where a Kafka topic's snapshot asks the brokers nothing and reports the last numbers this
// process knew (docs/kafka.md, "Statistics"), which need not be the accepted counts.
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <initializer_list>
#include <map>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

int failures = 0;
int checks = 0;

void check(bool condition, const std::string& what)
{
    ++checks;
    if (!condition) {
        ++failures;
        std::printf("http_ingest driver: FAILED: %s\n", what.c_str());
    }
}

http::response<http::string_body> send(unsigned short port, http::verb verb, const std::string& target,
                                       const std::string& body = "")
{
    asio::io_context io;
    tcp::socket socket(io);
    socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    http::request<http::string_body> request{verb, target, 11};
    request.set(http::field::host, "127.0.0.1");
    request.set(http::field::content_type, "application/json");
    request.body() = body;
    request.prepare_payload();
    http::write(socket, request);
    beast::flat_buffer buffer;
    http::response<http::string_body> response;
    http::read(socket, buffer, response);
    boost::system::error_code ignored;
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    return response;
}

int status_of(unsigned short port, http::verb verb, const std::string& target, const std::string& body = "")
{
    return static_cast<int>(send(port, verb, target, body).result());
}

#if BUFFERQUEUE_EXAMPLE_PROMETHEUS
// The sum of the samples of `metric` in Prometheus text `metrics` whose labels contain every one of
// `labels` (each written as name="value"); -1 when there is none.
double sum_samples(const std::string& metrics, const std::string& metric, std::initializer_list<std::string> labels)
{
    double sum = -1;
    std::istringstream lines(metrics);
    for (std::string line; std::getline(lines, line);) {
        if (!line.starts_with(metric + "{")) {
            continue;
        }
        const std::size_t close = line.find("} ");
        const std::string label_text = line.substr(0, close);
        bool matches = close != std::string::npos;
        for (const std::string& label : labels) {
            matches = matches && label_text.find(label) != std::string::npos;
        }
        if (matches) {
            sum = (sum < 0 ? 0 : sum) + std::stod(line.substr(close + 2));
        }
    }
    return sum;
}
#endif

std::size_t count_lines(const std::string& output, const std::string& part)
{
    std::size_t count = 0;
    for (std::size_t at = output.find(part); at != std::string::npos; at = output.find(part, at + 1)) {
        ++count;
    }
    return count;
}

}  // namespace

int main(int argc, char** argv)
{
    const bool kafka = argc == 3 && std::string_view(argv[2]).starts_with("--kafka");
    if ((argc != 2 && !kafka) || std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h") {
        const bool help = argc == 2;
        std::fprintf(help ? stdout : stderr, "usage: %s <path to example_http_ingest> [--kafka[=<servers>]]\n",
                     argv[0]);
        return help ? 0 : 2;
    }
    // Port 0: the server picks a free port and prints it. 60: it stops by itself after a minute.
    const std::string command =
        std::string("'") + argv[1] + "' " + (kafka ? std::string("'") + argv[2] + "' " : std::string()) + "0 60";
    FILE* server = ::popen(command.c_str(), "r");
    if (server == nullptr) {
        std::perror("popen");
        return 1;
    }
    std::string output;
    char line[4096];
    unsigned short port = 0;
    while (port == 0 && std::fgets(line, sizeof line, server) != nullptr) {
        output += line;
        std::smatch match;
        const std::string text(line);
        if (std::regex_search(text, match, std::regex("listening on 127\\.0\\.0\\.1:([0-9]+)"))) {
            port = static_cast<unsigned short>(std::stoi(match[1]));
        }
    }
    if (port == 0) {
        std::printf("%shttp_ingest driver: the server did not report its port\n", output.c_str());
        ::pclose(server);
        return 1;
    }

    std::map<std::string, int> accepted{{"foo1", 0}, {"foo2", 0}, {"bar", 0}};
    try {
        for (int id = 1; id <= 3; ++id) {
            const std::string item =
                R"({"id": )" + std::to_string(id) + R"(, "name": "item )" + std::to_string(id) + R"("})";
            check(status_of(port, http::verb::post, "/api/foo1", item) == 202, "POST /api/foo1 is accepted");
            check(status_of(port, http::verb::post, "/api/foo2", item) == 202, "POST /api/foo2 is accepted");
            ++accepted["foo1"];
            ++accepted["foo2"];
        }

        const auto malformed = send(port, http::verb::post, "/api/foo1", R"({"id": 1, "name": )");
        check(static_cast<int>(malformed.result()) == 400, "malformed JSON gets 400");
        check(malformed.body().find("malformed JSON") != std::string::npos, "the 400 says what is wrong");
        const auto wrong_fields = send(port, http::verb::post, "/api/foo2", R"({"id": "one"})");
        check(static_cast<int>(wrong_fields.result()) == 400, "JSON with wrong fields gets 400");
        check(status_of(port, http::verb::post, "/api/nothing", "{}") == 404, "an unknown path gets 404");
        check(status_of(port, http::verb::get, "/api/foo1") == 405, "GET on an ingest path gets 405");
        const std::string huge = R"({"id": 1, "name": ")" + std::string(10'000, 'x') + R"("})";
        check(status_of(port, http::verb::post, "/api/foo1", huge) == 413, "a body over the limit gets 413");

        // topic-bar holds at most 8 uncommitted items and its consumer is slow: a burst fills it.
        int unavailable = 0;
        for (int id = 1; id <= 40; ++id) {
            const int status = status_of(port, http::verb::post, "/api/bar",
                                         R"({"id": )" + std::to_string(id) + R"(, "amount": 1.5})");
            check(status == 202 || status == 503, "POST /api/bar gets 202 or 503");
            accepted["bar"] += status == 202 ? 1 : 0;
            unavailable += status == 503 ? 1 : 0;
        }
        check(unavailable > 0, "a full bounded topic in fail mode gets 503");
        check(accepted["bar"] >= 8, "topic-bar accepted at least its capacity");

        // The consumers catch up: consumed == accepted for every topic.
        nlohmann::json stats;
        for (int attempt = 0; attempt < 500; ++attempt) {
            stats = nlohmann::json::parse(send(port, http::verb::get, "/api/stats").body());
            if (stats["consumed"] == stats["accepted"]) {
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        for (const auto& [topic, count] : accepted) {
            check(stats["accepted"][topic] == count, "the server accepted what the driver counted for " + topic);
            check(stats["consumed"][topic] == count, "the consumers saw every accepted item of " + topic);
        }

#if BUFFERQUEUE_EXAMPLE_PROMETHEUS
        // Prometheus: group-audit never consumes, so it lags every accepted foo1; group-foo1 is caught up.
        const auto scraped = send(port, http::verb::get, "/metrics");
        check(static_cast<int>(scraped.result()) == 200, "GET /metrics gets 200");
        const std::string& metrics = scraped.body();
        const std::string foo1 = R"(topic="topic-foo1")";
        if (!kafka) {
            check(sum_samples(metrics, "bufferqueue_group_lag_items", {foo1, R"(group="group-audit")"}) ==
                      accepted["foo1"],
                  "the lag of group-audit in /metrics is every foo1 accepted (" + std::to_string(accepted["foo1"]) +
                      ")");
            check(sum_samples(metrics, "bufferqueue_group_lag_items", {foo1, R"(group="group-foo1")"}) == 0,
                  "group-foo1 has no lag in /metrics");
            check(sum_samples(metrics, "bufferqueue_partition_end_items", {foo1, R"(backend="memory")"}) ==
                      accepted["foo1"],
                  "bufferqueue_partition_end_items sums to the foo1 accepted");
        }
        check(sum_samples(metrics, "bufferqueue_produced_items_total", {R"(topic="topic-bar")"}) == accepted["bar"],
              "bufferqueue_produced_items_total of topic-bar is the bars accepted");
        check(sum_samples(metrics, "bufferqueue_consumed_items_total", {R"(topic="topic-foo2")"}) == accepted["foo2"],
              "bufferqueue_consumed_items_total of topic-foo2 is the foo2 consumed");
        if (failures != 0) {
            std::printf("http_ingest driver: /metrics said:\n%s", metrics.c_str());
        }
#endif

        // A request that is still being read when the server stops: its headers arrive before the
        // shutdown, its body only after the server closed the queue. The awaited produce fails with
        // errc::closed, which the client learns as 503.
        asio::io_context io;
        tcp::socket late(io);
        late.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
        const std::string late_body = R"({"id": 99, "name": "late"})";
        const std::string late_headers = "POST /api/foo1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                                         "application/json\r\nContent-Length: " +
                                         std::to_string(late_body.size()) + "\r\n\r\n";
        asio::write(late, asio::buffer(late_headers));
        // Accepted before this one, so the server reads the late request's headers first.
        check(status_of(port, http::verb::post, "/shutdown") == 200, "POST /shutdown gets 200");
        bool closed = false;
        while (!closed && std::fgets(line, sizeof line, server) != nullptr) {
            output += line;
            closed = std::string_view(line).starts_with("http_ingest: queue closed");
        }
        check(closed, "the server logs that it closed the queue");
        asio::write(late, asio::buffer(late_body));
        beast::flat_buffer buffer;
        http::response<http::string_body> late_response;
        http::read(late, buffer, late_response);
        check(static_cast<int>(late_response.result()) == 503,
              "a request that arrives while the server stops gets 503");
        check(late_response.body().find("closed") != std::string::npos, "the 503 says the topic is closed");
        boost::system::error_code ignored;
        late.shutdown(tcp::socket::shutdown_both, ignored);
    } catch (const std::exception& failure) {
        check(false, std::string("request failed: ") + failure.what());
    }

    while (std::fgets(line, sizeof line, server) != nullptr) {
        output += line;
    }
    const int status = ::pclose(server);
    std::printf("%s", output.c_str());
    check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the server exits with status 0 after /shutdown");
    check(output.find("http_ingest: shutting down (request)") != std::string::npos, "the server logs the shutdown");
    check(count_lines(output, "[pull foo1]") == static_cast<std::size_t>(accepted["foo1"]),
          "the pull consumer logged every foo1");
    check(count_lines(output, "[push foo2, singleton]") == static_cast<std::size_t>(accepted["foo2"]),
          "the singleton push consumer logged every foo2");
    check(count_lines(output, "[push bar, per batch]") == static_cast<std::size_t>(accepted["bar"]),
          "the per-batch push consumer logged every accepted bar");
    std::printf("http_ingest driver: %d checks, %d failed\n", checks, failures);
    if (failures != 0) {
        return 1;
    }
    std::printf("http_ingest: done (driven over HTTP)\n");
    return 0;
}
