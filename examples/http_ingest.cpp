// HTTP ingest: a Boost.Beast server on 127.0.0.1 that takes JSON items over HTTP and produces them
// into topics that a pull consumer and two push consumers read and log.
//
//   example_http_ingest [--kafka[=<servers>]] <port> [<seconds>]
//                                               port 0 picks a free port; the bound port is printed;
//                                               <seconds> stops the server after that long
//   --kafka            topic-foo1 is a Kafka topic (docs/kafka.md) on an in-process mock cluster
//   --kafka=<servers>  topic-foo1 is a Kafka topic on those brokers ("host:port,..."), which must
//                      have topic-foo1 with 2 partitions; built only with bufferqueue::kafka
//
//   POST /api/foo1  {"id": 1, "name": "x"}   -> topic-foo1, read by a pull consumer (auto commit)
//   POST /api/foo2  {"id": 1, "name": "x"}   -> topic-foo2, singleton push consumer (auto commit)
//   POST /api/bar   {"id": 1, "amount": 2.5} -> topic-bar, per-batch push consumer (manual commit),
//                                               bounded to 8 uncommitted items in fail mode
//   GET  /api/stats                          -> {"accepted": {...}, "consumed": {...}}
//   GET  /metrics                            -> the queue's Prometheus metrics (text format), when
//                                               built with bufferqueue::prometheus; group-audit on
//                                               topic-foo1 never consumes, so it lags every foo1
//   POST /shutdown                           -> stops the server; SIGINT/SIGTERM and <seconds> too
//
// Responses: 202 accepted, 400 malformed JSON or fields (with a message), 404 unknown path,
// 405 wrong method, 413 body over 4 KiB, 503 topic full. One request per connection.
#include <bufferqueue/bufferqueue.hpp>
#if BUFFERQUEUE_EXAMPLE_KAFKA
#include <bufferqueue/kafka.hpp>
#endif
#if BUFFERQUEUE_EXAMPLE_PROMETHEUS
#include <bufferqueue/prometheus.hpp>
#include <prometheus/text_serializer.h>
#endif

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 with sanitizers at -O1 reports a false -Wmismatched-new-delete for Asio's coroutine frames
// here (the frame's operator new is inlined, its matching operator delete is not).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace bq = bufferqueue;
using tcp = asio::ip::tcp;

struct foo {
    int id = 0;
    std::string name;
};
struct bar {
    int id = 0;
    double amount = 0;
};

// A Kafka topic stores its items serialized (json_serializer<foo>, --kafka): to_json and from_json.
void to_json(nlohmann::json& json, const foo& item)
{
    json = nlohmann::json{{"id", item.id}, {"name", item.name}};
}
void from_json(const nlohmann::json& json, foo& item)
{
    json.at("id").get_to(item.id);
    json.at("name").get_to(item.name);
}
void from_json(const nlohmann::json& json, bar& item)
{
    json.at("id").get_to(item.id);
    json.at("amount").get_to(item.amount);
}

constexpr std::size_t body_limit = 4096;
constexpr std::size_t bar_capacity = 8;

/// Counts what was accepted and consumed, per topic; read by /api/stats. One executor thread.
struct counters {
    std::map<std::string, int> accepted{{"foo1", 0}, {"foo2", 0}, {"bar", 0}};
    std::map<std::string, int> consumed{{"foo1", 0}, {"foo2", 0}, {"bar", 0}};
};

// Logs every item and counts it. The server runs on one thread, so the singleton needs no lock.
struct foo2_push_consumer {
    static constexpr bq::push_subscription subscription{.topic = "topic-foo2",
                                                        .group = "group-foo2",
                                                        .batch_size = 100,
                                                        .lifetime = bq::lifetime::singleton,
                                                        .concurrency = 2};

    asio::awaitable<void> consume(bq::batch<foo> items)
    {
        for (const foo& item : items) {
            std::printf("http_ingest: [push foo2, singleton] foo2 id=%d name=%s\n", item.id, item.name.c_str());
        }
        counts->consumed["foo2"] += static_cast<int>(items.size());
        co_return;
    }

    counters* counts = nullptr;
};

// A slow downstream: holds each batch for 100 ms before committing, so a burst fills topic-bar.
struct bar_push_consumer {
    static constexpr bq::push_subscription subscription{.topic = "topic-bar",
                                                        .group = "group-bar",
                                                        .batch_size = 100,
                                                        .lifetime = bq::lifetime::per_batch,
                                                        .concurrency = 2};

    asio::awaitable<void> consume(bq::batch<bar> items, bq::committer& committer)
    {
        asio::steady_timer slow(co_await asio::this_coro::executor, std::chrono::milliseconds(100));
        co_await slow.async_wait(asio::use_awaitable);
        for (const bar& item : items) {
            std::printf("http_ingest: [push bar, per batch] bar id=%d amount=%.2f\n", item.id, item.amount);
        }
        co_await committer.commit();
        counts->consumed["bar"] += static_cast<int>(items.size());
    }

    counters* counts = nullptr;
};

// Where topic-foo1 lives: memory (the default), or Kafka: `servers` empty for an in-process mock cluster.
struct foo1_storage {
    bool kafka = false;
    std::string servers;
};

class server {
public:
    server(asio::io_context& io, unsigned short port, const foo1_storage& foo1)
        : io_(io), queue_(io.get_executor()), acceptor_(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), port)),
          signals_(io, SIGINT, SIGTERM), deadline_(io)
    {
        if (foo1.kafka) {
            add_kafka_foo1(foo1.servers);
        } else {
            queue_.add_topic(bq::memory_topic_options<foo>{.name = "topic-foo1", .partitions = 2});
        }
        queue_.add_topic(bq::memory_topic_options<foo>{.name = "topic-foo2", .partitions = 2});
        queue_.add_topic(bq::memory_topic_options<bar>{
            .name = "topic-bar", .partitions = 2, .bounded_capacity = bar_capacity, .full_mode = bq::full_mode::fail});
        queue_.add_push_consumers<foo2_push_consumer, bar_push_consumer>(
            [this] { return foo2_push_consumer{.counts = &counts_}; },
            [this] { return bar_push_consumer{.counts = &counts_}; });
        foo1_consumer_.emplace(
            queue_.create_pull_consumer<foo>({.topic = "topic-foo1", .group = "group-foo1", .auto_commit = true}));
        // A group nobody reads: its lag is every foo1 accepted (GET /metrics shows it).
        audit_consumer_.emplace(queue_.create_pull_consumer<foo>({.topic = "topic-foo1", .group = "group-audit"}));
    }

    unsigned short port() const { return acceptor_.local_endpoint().port(); }

    void run(std::optional<int> seconds)
    {
        queue_.start();
        asio::co_spawn(io_, pull_foo1(), asio::detached);
        asio::co_spawn(io_, accept(), asio::detached);
        signals_.async_wait([this](boost::system::error_code error, int) {
            if (!error) {
                shutdown("signal");
            }
        });
        if (seconds) {
            deadline_.expires_after(std::chrono::seconds(*seconds));
            deadline_.async_wait([this](boost::system::error_code error) {
                if (!error) {
                    shutdown("time limit");
                }
            });
        }
    }

    const counters& counts() const { return counts_; }

private:
    // The same producers and consumers, with topic-foo1 in a Kafka cluster: on `servers`, or on a
    // mock cluster in this process when none are given.
    void add_kafka_foo1([[maybe_unused]] const std::string& servers)
    {
#if BUFFERQUEUE_EXAMPLE_KAFKA
        // [readme:kafka]
        std::string bootstrap = servers;
        if (bootstrap.empty()) {  // --kafka alone: one broker on loopback, in this process
            kafka_cluster_ = std::make_unique<bq::kafka_mock_cluster>(1);
            kafka_cluster_->create_topic("topic-foo1", 2);
            bootstrap = kafka_cluster_->bootstrap_servers();
        }
        queue_.add_topic(bq::kafka_topic_options<foo>{
            .name = "topic-foo1",
            .partitions = 2,  // must match the brokers' topic
            .bootstrap_servers = bootstrap,
            .serializer = bq::json_serializer<foo>{},
            .properties = {{"linger.ms", "1"}, {"fetch.wait.max.ms", "10"}},  // passed to librdkafka
            .connect_timeout = std::chrono::seconds(5)});
        // [readme:kafka-end]
        std::printf("http_ingest: topic-foo1 is a Kafka topic on %s%s\n", bootstrap.c_str(),
                    servers.empty() ? " (an in-process mock cluster)" : "");
#endif
    }

    asio::awaitable<void> pull_foo1()
    {
        try {
            for (;;) {
                bq::batch<foo> items = co_await foo1_consumer_->consume();
                for (const foo& item : items) {
                    std::printf("http_ingest: [pull foo1] foo1 id=%d name=%s\n", item.id, item.name.c_str());
                }
                counts_.consumed["foo1"] += static_cast<int>(items.size());
            }
        } catch (const boost::system::system_error& failure) {
            if (failure.code() != asio::error::operation_aborted && failure.code() != bq::errc::closed) {
                std::fprintf(stderr, "http_ingest: foo1 consumer failed: %s\n", failure.what());
            }
        }
    }

    asio::awaitable<void> accept()
    {
        for (;;) {
            boost::system::error_code error;
            tcp::socket socket(io_);
            co_await acceptor_.async_accept(socket, asio::redirect_error(asio::use_awaitable, error));
            if (error == asio::error::operation_aborted || !acceptor_.is_open()) {
                co_return;
            }
            if (!error) {
                asio::co_spawn(io_, session(std::move(socket)), asio::detached);
            }
        }
    }

    // One request, one response, then the connection closes. Every failure ends only this session.
    asio::awaitable<void> session(tcp::socket socket)
    {
        beast::tcp_stream stream(std::move(socket));
        try {
            beast::flat_buffer buffer;
            http::request_parser<http::string_body> parser;
            parser.body_limit(body_limit);
            stream.expires_after(std::chrono::seconds(10));
            boost::system::error_code error;
            co_await http::async_read(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, error));
            http::response<http::string_body> response;
            if (error == http::error::body_limit) {
                response = reply(http::status::payload_too_large,
                                 "request body over " + std::to_string(body_limit) + " bytes");
            } else if (error) {
                co_return;  // the client went away or sent no valid HTTP
            } else {
                response = co_await handle(parser.get());
            }
            response.keep_alive(false);
            response.prepare_payload();
            co_await http::async_write(stream, response, asio::redirect_error(asio::use_awaitable, error));
            // Graceful close: send FIN, then discard what the client still sends (the rest of an
            // oversized body) until it closes, so the close does not reset the connection and
            // destroy the response before the client read it.
            stream.socket().shutdown(tcp::socket::shutdown_send, error);
            stream.expires_after(std::chrono::seconds(2));
            char discard[4096];
            while (!error) {
                co_await stream.async_read_some(asio::buffer(discard),
                                                asio::redirect_error(asio::use_awaitable, error));
            }
        } catch (const std::exception& failure) {
            std::fprintf(stderr, "http_ingest: session failed: %s\n", failure.what());
        }
    }

    static http::response<http::string_body> reply(http::status status, const std::string& message)
    {
        http::response<http::string_body> response{status, 11};
        response.set(http::field::content_type, "application/json");
        response.body() = nlohmann::json{{"status", static_cast<int>(status)}, {"message", message}}.dump() + "\n";
        return response;
    }

    asio::awaitable<http::response<http::string_body>> handle(const http::request<http::string_body>& request)
    {
        const std::string target(request.target());
        if (target == "/api/stats" && request.method() == http::verb::get) {
            http::response<http::string_body> response{http::status::ok, 11};
            response.set(http::field::content_type, "application/json");
            response.body() = nlohmann::json{{"accepted", counts_.accepted}, {"consumed", counts_.consumed}}.dump();
            co_return response;
        }
#if BUFFERQUEUE_EXAMPLE_PROMETHEUS
        // [readme:metrics]
        if (target == "/metrics" && request.method() == http::verb::get) {
            // A fresh snapshot of every topic per scrape (with prometheus::Exposer instead:
            // exposer.RegisterCollectable(std::make_shared<bq::prometheus_collector>(queue_))).
            http::response<http::string_body> response{http::status::ok, 11};
            response.set(http::field::content_type, "text/plain; version=0.0.4");
            response.body() = prometheus::TextSerializer{}.Serialize(bq::prometheus_collector(queue_).Collect());
            co_return response;
        }
        // [readme:metrics-end]
#endif
        if (target == "/shutdown" && request.method() == http::verb::post) {
            shutdown("request");
            co_return reply(http::status::ok, "shutting down");
        }
        if (target != "/api/foo1" && target != "/api/foo2" && target != "/api/bar") {
            co_return reply(http::status::not_found, "no such path: " + target);
        }
        if (request.method() != http::verb::post) {
            co_return reply(http::status::method_not_allowed, target + " takes POST");
        }
        nlohmann::json json;
        try {
            json = nlohmann::json::parse(request.body());
        } catch (const nlohmann::json::exception& failure) {
            co_return reply(http::status::bad_request, std::string("malformed JSON: ") + failure.what());
        }
        try {
            if (target == "/api/bar") {
                // Fail mode: a full topic is refused at once instead of making the client wait.
                if (!queue_.producer<bar>("topic-bar").try_produce(json.get<bar>())) {
                    co_return reply(http::status::service_unavailable, "topic-bar is full; retry later");
                }
                ++counts_.accepted["bar"];
            } else {
                const std::string name = target == "/api/foo1" ? "foo1" : "foo2";
                // Unbounded topic: completes at once.
                co_await queue_.producer<foo>("topic-" + name).produce(json.get<foo>());
                ++counts_.accepted[name];
            }
        } catch (const nlohmann::json::exception& failure) {
            co_return reply(http::status::bad_request, std::string("invalid fields: ") + failure.what());
        } catch (const boost::system::system_error& failure) {  // an awaited produce: the queue is closed
            co_return reply(http::status::service_unavailable, failure.what());
        } catch (const bq::error& failure) {  // try_produce: the queue is closed, the server is stopping
            co_return reply(http::status::service_unavailable, failure.what());
        }
        co_return reply(http::status::accepted, "accepted");
    }

    // Stops accepting, lets the push consumers finish their batches, then closes the queue, which
    // ends the pull consumer. The io_context then runs out of work and main() returns.
    void shutdown(const char* reason)
    {
        if (stopping_.exchange(true)) {
            return;
        }
        std::printf("http_ingest: shutting down (%s)\n", reason);
        boost::system::error_code ignored;
        acceptor_.close(ignored);
        signals_.cancel(ignored);
        deadline_.cancel();
        asio::co_spawn(
            io_,
            [this]() -> asio::awaitable<void> {
                // Drain: memory topics die with the process, so wait (up to 5 s) until the consumers
                // have everything that was accepted.
                asio::steady_timer drain(io_);
                for (int waited = 0; waited < 500 && counts_.consumed != counts_.accepted; ++waited) {
                    drain.expires_after(std::chrono::milliseconds(10));
                    co_await drain.async_wait(asio::use_awaitable);
                }
                co_await queue_.stop();  // running handlers finish
                queue_.close();          // ends the pull consumer
                // Closing the handles too: a Kafka consumer leaves its group then (a round trip to
                // the brokers), and until it does its group membership keeps io_context::run() busy.
                foo1_consumer_->close();
                audit_consumer_->close();
                // A request still being read is answered 503 now (the driver checks that).
                std::printf("http_ingest: queue closed\n");
                std::fflush(stdout);
            },
            asio::detached);
    }

    asio::io_context& io_;
#if BUFFERQUEUE_EXAMPLE_KAFKA
    std::unique_ptr<bq::kafka_mock_cluster> kafka_cluster_;  // with --kafka alone; outlives queue_
#endif
    bq::buffer_queue queue_;
    counters counts_;
    std::optional<bq::pull_consumer<foo>> foo1_consumer_;
    std::optional<bq::pull_consumer<foo>> audit_consumer_;  // never consumes
    tcp::acceptor acceptor_;
    asio::signal_set signals_;
    asio::steady_timer deadline_;
    std::atomic<bool> stopping_{false};
};

// Prints the usage line: on stdout for --help, on stderr after a mistake.
void print_usage(std::FILE* to, const char* program)
{
    std::fprintf(to,
                 "usage: %s [--kafka[=<servers>]] <port> [<seconds>]\n"
                 "  Serves HTTP on 127.0.0.1:<port> (0..65535; 0 picks a free port and prints it) and stops\n"
                 "  after <seconds> (1..86400) when given, on POST /shutdown, SIGINT or SIGTERM.\n"
                 "  --kafka puts topic-foo1 in Kafka: on an in-process mock cluster, or with =<servers>\n"
                 "  (\"host:port,...\") on those brokers, which must have topic-foo1 with 2 partitions%s.\n",
                 program,
#if BUFFERQUEUE_EXAMPLE_KAFKA
                 ""
#else
                 " (this build has no bufferqueue::kafka: --kafka is refused)"
#endif
    );
}

// The whole of `text` as a decimal number in [min, max]; nothing for "8080x", "", "+1" or " 1".
std::optional<int> parse_number(std::string_view text, int min, int max)
{
    int value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < min || value > max) {
        return std::nullopt;
    }
    return value;
}

int main(int argc, char** argv)
{
    if (argc == 2 && (std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h")) {
        print_usage(stdout, argv[0]);
        return 0;
    }
    foo1_storage foo1;
    int first = 1;  // the first positional argument
    if (argc > 1 && (std::string_view(argv[1]) == "--kafka" || std::string_view(argv[1]).starts_with("--kafka="))) {
        const std::string_view option(argv[1]);
        foo1.kafka = true;
        foo1.servers = option.size() > 8 ? std::string(option.substr(8)) : "";
        if (option.starts_with("--kafka=") && foo1.servers.empty()) {
            std::fprintf(stderr, "http_ingest: --kafka= names no servers: expected --kafka=host:port,...\n");
            print_usage(stderr, argv[0]);
            return 2;
        }
#if !BUFFERQUEUE_EXAMPLE_KAFKA
        std::fprintf(stderr, "http_ingest: this build has no Kafka topics (bufferqueue::kafka, librdkafka)\n");
        print_usage(stderr, argv[0]);
        return 2;
#endif
        first = 2;
    }
    if (argc - first < 1 || argc - first > 2) {
        print_usage(stderr, argv[0]);
        return 2;
    }
    const std::optional<int> port = parse_number(argv[first], 0, 65535);
    if (!port) {
        std::fprintf(stderr, "http_ingest: bad <port> '%s': expected a number 0..65535\n", argv[first]);
        print_usage(stderr, argv[0]);
        return 2;
    }
    std::optional<int> seconds;
    if (argc - first == 2 && !(seconds = parse_number(argv[first + 1], 1, 86'400))) {
        std::fprintf(stderr, "http_ingest: bad <seconds> '%s': expected a number 1..86400\n", argv[first + 1]);
        print_usage(stderr, argv[0]);
        return 2;
    }
    try {
        asio::io_context io;
        server ingest(io, static_cast<unsigned short>(*port), foo1);
        ingest.run(seconds);
        std::printf("http_ingest: listening on 127.0.0.1:%u\n", static_cast<unsigned>(ingest.port()));
        std::fflush(stdout);
        io.run();
        const counters& counts = ingest.counts();
        bool complete = true;
        for (const auto& [topic, accepted] : counts.accepted) {
            std::printf("http_ingest: %s accepted %d consumed %d\n", topic.c_str(), accepted,
                        counts.consumed.at(topic));
            complete = complete && accepted == counts.consumed.at(topic);
        }
        std::printf("http_ingest: %s\n", complete ? "done" : "FAILED (accepted items were not all consumed)");
        return complete ? 0 : 1;
    } catch (const std::exception& failure) {  // e.g. the port is in use, or no Kafka broker answered
        std::fprintf(stderr, "http_ingest: %s\n", failure.what());
        return 1;
    }
}
