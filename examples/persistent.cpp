// Persistent topics: an mmap topic in a directory given on the command line. Run it twice on one
// directory. The first run produces 100 events, commits the first 60 and reads 20 more without
// committing them (as if the process died before it could). The second run recovers the topic,
// resumes from the committed offset - event 60 - and so replays the 20 uncommitted events before
// the rest. `ctest -R example.persistent` runs it twice on a fresh directory and checks both runs.
//
//   example_persistent <directory>
#include <bufferqueue/bufferqueue.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <span>
#include <string>
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

int main(int argc, char** argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <directory>\n", argv[0]);
        return 2;
    }
    const std::filesystem::path directory = argv[1];
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
        std::printf("persistent: run 1: produced %d events into %s\n", total, (directory / "events").c_str());
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
                std::printf("persistent: run 1: committed events 0..%d, read %d..%d without committing\n",
                            committed - 1, uncommitted.front().id, uncommitted.back().id);
                co_return;  // the process ends before a commit
            }
            // Second run: the group's committed offset survived, the uncommitted batch is replayed.
            std::vector<int> seen;
            while (seen.empty() || seen.back() < total - 1) {
                bq::batch<event> batch = co_await consumer.consume();
                if (seen.empty()) {
                    std::printf("persistent: run 2: resumed at event %d (committed offset %d)\n", batch.front().id,
                                committed_in_first_run);
                }
                for (const event& e : batch) {
                    seen.push_back(e.id);
                }
                co_await consumer.commit();
            }
            for (std::size_t i = 0; i < seen.size(); ++i) {
                ok = ok && seen[i] == committed_in_first_run + static_cast<int>(i);
            }
            // Run 1 read events 60..79 without committing them.
            const auto replayed = std::count_if(seen.begin(), seen.end(), [](int id) {
                return id >= committed_in_first_run && id < committed_in_first_run + static_cast<int>(batch_size);
            });
            std::printf("persistent: run 2: replayed %d uncommitted events and read %d more, events %d..%d in order\n",
                        static_cast<int>(replayed), static_cast<int>(seen.size()) - static_cast<int>(replayed),
                        seen.front(), seen.back());
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
