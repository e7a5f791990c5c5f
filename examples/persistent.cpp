// Persistent topics: an mmap topic in a directory given on the command line. Run it several times on
// one directory. The first run produces 100 events, commits the first 60 and reads 20 more without
// committing them (as if the process died before it could). The next run recovers the topic,
// resumes from the committed offset - event 60 - and so replays the 20 uncommitted events before
// the rest, committing as it goes. A run after that finds nothing left to read and says so.
// `ctest -R example.persistent` runs it three times on a fresh directory and checks every run.
//
//   example_persistent <directory>
#include <bufferqueue/bufferqueue.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace asio = boost::asio;
namespace bq = bufferqueue;

struct event {
    int id = 0;
    std::string text;
};

// The default serializer, bq::json_serializer<event>, stores items as JSON through nlohmann_json.
void to_json(nlohmann::json& json, const event& e)
{
    json = {{"id", e.id}, {"text", e.text}};
}
void from_json(const nlohmann::json& json, event& e)
{
    json.at("id").get_to(e.id);
    json.at("text").get_to(e.text);
}

constexpr int total = 100;
constexpr int committed_in_first_run = 60;
constexpr std::size_t batch_size = 20;

// One run on `directory`: the first one creates the topic, every later one resumes it.
int run(const std::filesystem::path& directory)
{
    const bool resuming = std::filesystem::exists(directory / "events");

    asio::io_context io;
    bq::buffer_queue queue{io.get_executor()};
    // [readme:persistent]
    // Data and committed offsets live under `directory` and survive restarts. The default serializer
    // is bq::json_serializer<event>; flush_strategy::immediate (the default) makes every produce
    // durable before it returns.
    queue.add_topic(bq::mmap_topic_options<event>{
        .name = "events", .partitions = 1, .data_directory = directory, .segment_size = 64 * 1024});
    // [readme:persistent-end]
    bq::pull_consumer<event> consumer =
        queue.create_pull_consumer<event>({.topic = "events", .group = "archiver", .batch_size = batch_size});

    if (!resuming) {
        std::vector<event> events;
        for (int id = 0; id < total; ++id) {
            events.push_back({.id = id, .text = "event " + std::to_string(id)});
        }
        queue.producer<event>("events").try_produce(std::span<const event>(events));
        std::printf("persistent: new topic: produced %d events into %s\n", total, (directory / "events").c_str());
    }

    bool ok = true;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            if (!resuming) {
                int committed = 0;
                while (committed < committed_in_first_run) {
                    bq::batch<event> batch = co_await consumer.consume();
                    co_await consumer.commit();  // forces the offset to disk
                    committed += static_cast<int>(batch.size());
                }
                bq::batch<event> uncommitted = co_await consumer.consume();
                std::printf("persistent: new topic: committed events 0..%d, read %d..%d without committing\n",
                            committed - 1, uncommitted.front().id, uncommitted.back().id);
                co_return;  // the process ends before a commit
            }
            // A later run: the group's committed offset survived, an uncommitted batch is delivered
            // again. No run produces more, so this one reads what is there - try_consume() never
            // waits - and ends. (A consume() here would wait for events that nobody will produce.)
            std::vector<int> seen;
            while (std::optional<bq::batch<event>> batch = consumer.try_consume()) {
                if (seen.empty()) {
                    std::printf("persistent: reopened: resumed at event %d, the first one group archiver had not "
                                "committed\n",
                                batch->front().id);
                }
                for (const event& e : *batch) {
                    seen.push_back(e.id);
                }
                co_await consumer.commit();
            }
            if (seen.empty()) {
                std::printf("persistent: reopened: nothing left to read: group archiver has committed all %d "
                            "events\n",
                            total);
                co_return;
            }
            // In order, without a gap, up to the last event.
            for (std::size_t i = 0; i < seen.size(); ++i) {
                ok = ok && seen[i] == seen.front() + static_cast<int>(i);
            }
            ok = ok && seen.back() == total - 1;
            // The first run read events 60..79 without committing them.
            const auto replayed = std::count_if(seen.begin(), seen.end(), [](int id) {
                return id >= committed_in_first_run && id < committed_in_first_run + static_cast<int>(batch_size);
            });
            std::printf("persistent: reopened: replayed %d uncommitted events and read %d more, events %d..%d %s\n",
                        static_cast<int>(replayed), static_cast<int>(seen.size()) - static_cast<int>(replayed),
                        seen.front(), seen.back(), ok ? "in order" : "OUT OF ORDER");
        },
        [&](std::exception_ptr error) {
            if (error) {
                ok = false;
                try {
                    std::rethrow_exception(error);
                } catch (const std::exception& failure) {
                    std::fprintf(stderr, "persistent: %s\n", failure.what());
                }
            }
        });
    io.run();
    std::printf("persistent: %s\n", ok ? "done" : "FAILED");
    return ok ? 0 : 1;
}

// Prints the usage line: on stdout for --help, on stderr after a mistake.
void print_usage(std::FILE* to, const char* program)
{
    std::fprintf(to,
                 "usage: %s <directory>\n"
                 "  Keeps the persistent topic 'events' under <directory>/events; run it again on the same\n"
                 "  directory to resume where the last run committed.\n",
                 program);
}

int main(int argc, char** argv)
{
    const std::string_view first = argc > 1 ? argv[1] : "";
    if (argc == 2 && (first == "--help" || first == "-h")) {
        print_usage(stdout, argv[0]);
        return 0;
    }
    if (argc != 2 || first.empty() || first.front() == '-') {  // a directory, not an option
        print_usage(stderr, argv[0]);
        return 2;
    }
    const std::filesystem::path directory = argv[1];
    try {
        return run(directory);
    } catch (const std::exception& failure) {  // e.g. the directory cannot be created or is damaged
        std::fprintf(stderr, "persistent: %s\n", failure.what());
        std::printf("persistent: FAILED\n");
        return 1;
    }
}
