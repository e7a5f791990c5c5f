// Power-loss simulation: the file layer's hooks report every flush (msync, fsync, directory fsync)
// and every rename and removal, from which the test keeps a model of what stable storage holds.
// At random moments of a produce/consume/commit workload it builds disk images from that durable
// state plus a random subset of the pages that were written but not yet flushed (the page cache may
// have written any of them back), optionally with one torn page (only some of its 512-byte sectors
// new), and opens a topic on each image. Recovery must yield exactly a prefix of what was produced
// that contains every flushed record, and a committed group must never resume before its last
// acknowledged commit. Power-loss images whose flushed data is damaged must fail fast with
// corrupt_data or cut exactly at the damaged record when nothing durable vouches for it; crash images
// that kept the page cache (SIGKILL) whose flushed data is damaged must fail with corrupt_data.
#include "bufferqueue/mmap/mmap_topic.hpp"

#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/mmap/detail/file.hpp"
#include "bufferqueue/mmap/detail/segment_format.hpp"

#include "catch.hpp"
#include "queue_test_support.hpp"
#include "test_support.hpp"

#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

// In a namespace of its own: the test files are compiled several at a time (tests/CMakeLists.txt).
namespace mmap_power_loss_test {

namespace {

using bufferqueue::test::memory_backed_temporary_path;
using bufferqueue::test::string_bytes_serializer;
using bufferqueue::test::temporary_directory;

namespace bq = bufferqueue;
namespace detail = bufferqueue::detail;
namespace fs = std::filesystem;
using detail::file_operation;

using bytes = std::vector<std::byte>;
using file_map = std::map<std::string, bytes>;  // path relative to the data directory -> contents

constexpr std::size_t sector = 512;

bytes read_bytes(const fs::path& path)
{
    std::ifstream in(path, std::ios::binary);
    const std::vector<char> chars{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    bytes result(chars.size());
    std::transform(chars.begin(), chars.end(), result.begin(), [](char c) { return static_cast<std::byte>(c); });
    return result;
}

void write_bytes(const fs::path& path, const bytes& contents)
{
    fs::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(contents.data()), static_cast<std::streamsize>(contents.size()));
    REQUIRE(out);
}

// Every regular file under `root`, by path relative to it.
file_map read_tree(const fs::path& root)
{
    file_map files;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
        if (entry.is_regular_file()) {
            files.emplace(fs::relative(entry.path(), root).string(), read_bytes(entry.path()));
        }
    }
    return files;
}

// What stable storage holds, kept from the flush reports: a file's contents become durable when it
// is fsynced (whole file) or msynced (the synced pages); a rename or removal becomes durable when
// its directory is fsynced.
class durability_model {
public:
    explicit durability_model(fs::path root) : root_(std::move(root)) {}

    detail::file_hooks hooks()
    {
        return {
            .before_operation =
                [this](file_operation operation, const std::string& path) {
                    std::lock_guard lock(mutex_);
                    const std::string relative = relative_path(path);
                    if (operation == file_operation::rename) {
                        // The file layer renames `x.tmp` (a file or a folder) to `x`.
                        pending_[parent(relative)].push_back({relative + ".tmp", relative});
                    } else if (operation == file_operation::remove) {
                        pending_[parent(relative)].push_back({relative, ""});
                    }
                    if (on_operation_) {
                        on_operation_();
                    }
                    return 0;
                },
            .after_flush =
                [this](file_operation operation, const std::string& path, std::uint64_t offset, std::uint64_t length) {
                    std::lock_guard lock(mutex_);
                    const std::string relative = relative_path(path);
                    if (operation == file_operation::fsync) {
                        durable_[relative] = read_bytes(path);
                    } else if (operation == file_operation::msync) {
                        const bytes current = read_bytes(path);
                        bytes& stored = durable_[relative];
                        stored.resize(current.size());
                        const std::uint64_t page = detail::page_size();
                        const std::uint64_t end =
                            std::min<std::uint64_t>(current.size(), (offset + length + page - 1) / page * page);
                        std::copy(current.begin() + static_cast<std::ptrdiff_t>(offset),
                                  current.begin() + static_cast<std::ptrdiff_t>(end),
                                  stored.begin() + static_cast<std::ptrdiff_t>(offset));
                    } else if (operation == file_operation::fsync_directory) {
                        apply_pending(relative);
                    }
                }};
    }

    // Called (under the model's lock) before every file operation: a moment a power loss can hit.
    void on_operation(std::function<void()> callback) { on_operation_ = std::move(callback); }

    const file_map& durable() const { return durable_; }

private:
    struct change {
        std::string from;
        std::string to;  // empty: removal
    };

    std::string relative_path(const std::string& path) const
    {
        return fs::path(path).lexically_relative(root_).lexically_normal().string();
    }

    static std::string parent(const std::string& relative) { return fs::path(relative).parent_path().string(); }

    void apply_pending(const std::string& directory)
    {
        const std::string folder = directory == "." ? "" : directory;
        for (const change& each : pending_[folder]) {
            // Move (or drop) the entry and everything below it.
            file_map moved;
            for (auto it = durable_.begin(); it != durable_.end();) {
                const bool inside = it->first == each.from || it->first.starts_with(each.from + "/");
                if (!inside) {
                    ++it;
                    continue;
                }
                if (!each.to.empty()) {
                    moved.emplace(each.to + it->first.substr(each.from.size()), std::move(it->second));
                }
                it = durable_.erase(it);
            }
            for (auto& [path, contents] : moved) {
                durable_[path] = std::move(contents);
            }
        }
        pending_.erase(folder);
    }

    fs::path root_;
    std::mutex mutex_;
    file_map durable_;
    std::map<std::string, std::vector<change>> pending_;
    std::function<void()> on_operation_;
};

// A moment captured during the workload.
struct snapshot {
    file_map durable;
    file_map current;
    std::size_t acknowledged = 0;  // items whose produce call had returned
    std::size_t attempted = 0;     // items whose produce call had started
    std::size_t committed = 0;     // items the group's last acknowledged commit covered
    std::size_t committing = 0;    // items a commit in flight covers (== committed when none)
};

std::string item_text(std::size_t index, std::mt19937& random)
{
    return "item-" + std::to_string(index) + ":" + std::string(8 + random() % 300, static_cast<char>('a' + index % 26));
}

std::size_t item_index(const std::string& item)
{
    REQUIRE(item.starts_with("item-"));
    return std::stoul(item.substr(5));
}

// The records of the partition in the image, walked independently of recovery: from the oldest
// retained segment, valid records in order, into the next segment after a complete one. Returns the
// payloads and, per payload, the segment file and the byte range of its record.
struct walked_record {
    std::string payload;
    std::string file;
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
};

std::vector<walked_record> walk(const file_map& files, const std::string& partition, std::uint64_t segment_size)
{
    std::uint64_t index = 0;
    if (const auto earliest = files.find(partition + "/earliest.offset");
        earliest != files.end() && earliest->second.size() == detail::checkpoint_size) {
        const std::uint64_t offset = detail::load_u64_little_endian(earliest->second.data());
        index = offset == 0 ? 0 : offset / segment_size;
    }
    std::vector<walked_record> records;
    for (;; ++index) {
        const std::string name = partition + "/" + detail::segment_file_name(index);
        const auto found = files.find(name);
        if (found == files.end() || found->second.size() != segment_size ||
            detail::validate_segment_header(found->second, index, segment_size)) {
            break;
        }
        std::uint64_t position = detail::segment_header_size;
        while (const auto record = detail::read_record(found->second, position)) {
            records.push_back(
                {std::string(reinterpret_cast<const char*>(record->payload.data()), record->payload.size()), name,
                 position, record->next_position});
            position = record->next_position;
        }
        if (!detail::is_segment_end(found->second, position)) {
            break;
        }
    }
    return records;
}

std::optional<std::uint64_t> checkpoint_in(const file_map& files, const std::string& path)
{
    const auto found = files.find(path);
    if (found == files.end() || found->second.size() != detail::checkpoint_size) {
        return std::nullopt;
    }
    return detail::load_u64_little_endian(found->second.data());
}

// The durable state plus a random subset of the dirty pages of every file that is durable, and
// optionally one dirty page torn (a random subset of its sectors new).
file_map build_image(const snapshot& moment, std::mt19937& random, bool torn)
{
    file_map image = moment.durable;
    const std::size_t page = detail::page_size();
    std::vector<std::pair<std::string, std::size_t>> dirty;
    for (auto& [path, contents] : image) {
        const auto current = moment.current.find(path);
        if (current == moment.current.end() || current->second.size() != contents.size()) {
            continue;  // replaced or removed since: the durable version stays
        }
        for (std::size_t at = 0; at < contents.size(); at += page) {
            const std::size_t end = std::min(contents.size(), at + page);
            if (!std::equal(contents.begin() + static_cast<std::ptrdiff_t>(at),
                            contents.begin() + static_cast<std::ptrdiff_t>(end),
                            current->second.begin() + static_cast<std::ptrdiff_t>(at))) {
                dirty.emplace_back(path, at);
            }
        }
    }
    for (const auto& [path, at] : dirty) {
        if (random() % 2 == 0) {
            continue;
        }
        const bytes& current = moment.current.at(path);
        bytes& contents = image[path];
        const std::size_t end = std::min(contents.size(), at + page);
        std::copy(current.begin() + static_cast<std::ptrdiff_t>(at), current.begin() + static_cast<std::ptrdiff_t>(end),
                  contents.begin() + static_cast<std::ptrdiff_t>(at));
    }
    if (torn && !dirty.empty()) {
        const auto& [path, at] = dirty[random() % dirty.size()];
        const bytes& current = moment.current.at(path);
        bytes& contents = image[path];
        const bytes& durable = moment.durable.at(path);
        for (std::size_t s = at; s < std::min(contents.size(), at + page); s += sector) {
            const bytes& source = random() % 2 == 0 ? current : durable;
            const std::size_t end = std::min(contents.size(), s + sector);
            std::copy(source.begin() + static_cast<std::ptrdiff_t>(s),
                      source.begin() + static_cast<std::ptrdiff_t>(end),
                      contents.begin() + static_cast<std::ptrdiff_t>(s));
        }
    }
    return image;
}

struct opened {
    std::vector<std::string> fresh;    // what a new group reads
    std::vector<std::string> resumed;  // what group "g" reads
    std::optional<bq::error> failure;
};

opened open_image(const file_map& image, const bq::mmap_topic_options<std::string>& base)
{
    const temporary_directory directory("bufferqueue-power-loss", memory_backed_temporary_path());
    for (const auto& [path, contents] : image) {
        write_bytes(directory.path() / path, contents);
    }
    auto options = base;
    options.data_directory = directory.path();
    opened result;
    try {
        boost::asio::io_context io;
        bq::buffer_queue queue(io.get_executor());
        queue.add_topic(options);
        // The new group first: it pins the retained segments, so retention after the commits of
        // "g" deletes nothing it has not read.
        auto fresh = queue.create_pull_consumer<std::string>({.topic = "events", .group = "new", .batch_size = 1000});
        auto resumed = queue.create_pull_consumer<std::string>({.topic = "events", .group = "g", .batch_size = 1000});
        while (auto batch = resumed.try_consume()) {
            result.resumed.insert(result.resumed.end(), batch->begin(), batch->end());
            REQUIRE_FALSE(bufferqueue::test::commit_now(resumed, io));
        }
        while (auto batch = fresh.try_consume()) {
            result.fresh.insert(result.fresh.end(), batch->begin(), batch->end());
            REQUIRE_FALSE(bufferqueue::test::commit_now(fresh, io));
        }
        // The recovered topic accepts and returns a new record.
        auto producer = queue.producer<std::string>("events");
        REQUIRE(producer.try_produce(std::string("after-recovery")));
        const auto after = fresh.try_consume();
        REQUIRE(after);
        CHECK((*after)[after->size() - 1] == "after-recovery");
    } catch (const bq::error& failure) {
        result.failure = failure;
    }
    return result;
}

// Checks the items a group read form one contiguous run of the produced items.
void check_contiguous(const std::vector<std::string>& items, const std::vector<std::string>& produced)
{
    for (std::size_t i = 0; i < items.size(); ++i) {
        const std::size_t index = item_index(items[i]);
        REQUIRE(index < produced.size());
        REQUIRE(items[i] == produced[index]);
        if (i > 0) {
            REQUIRE(index == item_index(items[i - 1]) + 1);
        }
    }
}

struct power_loss_figures {
    std::size_t images = 0;
    std::size_t torn = 0;
    std::size_t damaged = 0;
    std::size_t damaged_rejected = 0;
    std::size_t killed_damaged = 0;
};

void run_power_loss(bq::flush_strategy flush, std::optional<std::size_t> retention, unsigned seed,
                    power_loss_figures& figures)
{
    const temporary_directory directory("bufferqueue-power-loss-source", memory_backed_temporary_path());
    const bq::mmap_topic_options<std::string> options{.name = "events",
                                                      .partitions = 1,
                                                      .data_directory = directory.path(),
                                                      .segment_size = 16384,
                                                      .max_retained_consumed_segments = retention,
                                                      .flush = flush,
                                                      .flush_batch_size = 4,
                                                      .serializer = string_bytes_serializer{}};
    const std::string partition = "events/partition-00000";
    std::mt19937 random(seed);
    std::vector<std::string> produced;
    for (std::size_t i = 0; i < 240; ++i) {
        produced.push_back(item_text(i, random));
    }

    durability_model model(directory.path());
    std::vector<snapshot> moments;
    snapshot progress;
    model.on_operation([&] {
        if (random() % 6 == 0) {
            snapshot moment = progress;
            moment.durable = model.durable();
            moment.current = read_tree(directory.path());
            moments.push_back(std::move(moment));
        }
    });
    {
        const detail::scoped_file_hooks hooks(model.hooks());
        boost::asio::io_context io;
        bq::buffer_queue queue(io.get_executor());
        queue.add_topic(options);
        auto producer = queue.producer<std::string>("events");
        auto consumer = queue.create_pull_consumer<std::string>({.topic = "events", .group = "g", .batch_size = 13});
        std::size_t consumed = 0;
        for (std::size_t i = 0; i < produced.size(); ++i) {
            progress.attempted = i + 1;
            REQUIRE(producer.try_produce(produced[i]));
            progress.acknowledged = i + 1;
            if (i % 9 == 8) {
                while (auto batch = consumer.try_consume()) {
                    consumed += batch->size();
                    progress.committing = consumed;
                    REQUIRE_FALSE(bufferqueue::test::commit_now(consumer, io));
                    progress.committed = consumed;
                }
            }
        }
        model.on_operation({});
    }
    REQUIRE(moments.size() > 20);

    for (const snapshot& moment : moments) {
        // Flushed records: those in the durable state, walked independently of recovery.
        const std::vector<walked_record> flushed = walk(moment.durable, partition, options.segment_size);
        const std::size_t first = flushed.empty() ? 0 : item_index(flushed.front().payload);
        const std::optional<std::uint64_t> vouched_offset =
            checkpoint_in(moment.durable, partition + "/producer.offset");

        for (int variant = 0; variant < 3; ++variant) {
            const bool torn = variant == 2;
            const file_map image = variant == 0 ? moment.durable : build_image(moment, random, torn);
            const opened result = open_image(image, options);
            ++figures.images;
            figures.torn += torn ? 1 : 0;
            INFO("variant " << variant << ", moment with " << moment.attempted << " items attempted, " << flushed.size()
                            << " flushed records, first " << first);
            if (result.failure) {
                FAIL("a power-loss image failed to open: " << result.failure->what());
            }
            check_contiguous(result.fresh, produced);
            // A prefix of what was produced from the oldest retained record on, containing every
            // flushed record (and, with flush immediate, every acknowledged one).
            const std::size_t end = result.fresh.empty() ? first : item_index(result.fresh.back()) + 1;
            if (!result.fresh.empty() && retention) {
                // Retention runs at open, before the new group exists: segments "g" had committed
                // past may be reclaimed first, so the new group may start at a later segment.
                CHECK(item_index(result.fresh.front()) >= first);
            } else if (!result.fresh.empty()) {
                CHECK(item_index(result.fresh.front()) == first);
            }
            CHECK(end >= first + flushed.size());
            CHECK(end <= moment.attempted);
            if (variant == 0) {
                CHECK(end == first + flushed.size());
            }
            if (flush == bq::flush_strategy::immediate) {
                CHECK(end >= moment.acknowledged);
            }
            // The group resumes at (or, for a commit in flight, after) its last acknowledged commit.
            check_contiguous(result.resumed, produced);
            const std::size_t resumed_at = result.resumed.empty() ? end : item_index(result.resumed.front());
            CHECK(resumed_at >= moment.committed);
            CHECK(resumed_at <= std::max(moment.committing, moment.committed));
            if (!result.resumed.empty()) {
                CHECK(item_index(result.resumed.back()) + 1 == end);
            }
        }

        // Damage inside flushed data after a crash that kept the page cache (SIGKILL: the image is
        // what the files held at that moment): every flushed record is vouched for (by flush.mark,
        // stored after each msync, by producer.offset or by a later segment), so damage in any of
        // them is corrupt_data naming the partition, never a cut.
        {
            // The flushed records still in the log of the image (retention may have moved on since).
            std::vector<walked_record> intact;
            for (const walked_record& each : walk(moment.current, partition, options.segment_size)) {
                if (std::any_of(flushed.begin(), flushed.end(), [&](const walked_record& durable) {
                        return durable.file == each.file && durable.begin == each.begin && durable.end == each.end;
                    })) {
                    intact.push_back(each);
                }
            }
            if (!intact.empty()) {
                const walked_record& victim = intact[random() % intact.size()];
                file_map image = moment.current;
                bytes& contents = image.at(victim.file);
                const std::uint64_t position = victim.begin + random() % (victim.end - victim.begin);
                contents[position] ^= static_cast<std::byte>(1U << (random() % 8));
                const opened result = open_image(image, options);
                ++figures.killed_damaged;
                INFO("SIGKILL image: flipped byte " << position << " of " << victim.file << " (record of item "
                                                    << item_index(victim.payload) << ")");
                REQUIRE(result.failure);
                CHECK(result.failure->code() == bq::errc::corrupt_data);
                CHECK(std::string(result.failure->what()).find(partition) != std::string::npos);
            }
        }

        // Damage inside the flushed data after a power loss (the durable image, in which flush.mark,
        // never synced, is absent): fail fast, or cut exactly at the damaged record when nothing
        // durable vouches for it.
        if (!flushed.empty()) {
            const walked_record& victim = flushed[random() % flushed.size()];
            const std::size_t victim_index = item_index(victim.payload);
            file_map image = moment.durable;
            bytes& contents = image.at(victim.file);
            const std::uint64_t position = victim.begin + random() % (victim.end - victim.begin);
            contents[position] ^= static_cast<std::byte>(1U << (random() % 8));
            const opened result = open_image(image, options);
            ++figures.damaged;
            INFO("flipped byte " << position << " of " << victim.file << " (record of item " << victim_index << ")");
            if (result.failure) {
                ++figures.damaged_rejected;
                CHECK(result.failure->code() == bq::errc::corrupt_data);
                CHECK(std::string(result.failure->what()).find(partition) != std::string::npos);
            } else {
                // Only a record producer.offset does not vouch for may be cut, and exactly there.
                check_contiguous(result.fresh, produced);
                const std::size_t end = result.fresh.empty() ? first : item_index(result.fresh.back()) + 1;
                CHECK(end == victim_index);
                if (vouched_offset) {
                    const std::string segment_name = victim.file.substr(victim.file.rfind('/') + 1);
                    const std::uint64_t segment = *detail::parse_segment_file_name(segment_name);
                    CHECK(detail::logical_offset(segment, victim.end, options.segment_size) > *vouched_offset);
                }
            }
        }
    }
}

}  // namespace

TEST_CASE("mmap power loss: every image of flushed state plus random dirty pages recovers to a prefix holding every "
          "flushed record",
          "[mmap][power_loss]")
{
    power_loss_figures figures;
    const unsigned seed = std::random_device{}();
    INFO("seed " << seed);
    SECTION("flush immediate, no retention")
    {
        run_power_loss(bq::flush_strategy::immediate, std::nullopt, seed, figures);
    }
    SECTION("flush batch, retention keeping one consumed segment")
    {
        run_power_loss(bq::flush_strategy::batch, 1, seed, figures);
    }
    CHECK(figures.images > 60);
    WARN("power loss: " << figures.images << " images (" << figures.torn << " with a torn page), " << figures.damaged
                        << " with damaged flushed data (" << figures.damaged_rejected << " rejected as corrupt_data), "
                        << figures.killed_damaged << " SIGKILL images with damaged flushed data");
    CHECK(figures.killed_damaged > 10);
}

}  // namespace mmap_power_loss_test
