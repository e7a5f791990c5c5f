// bufferqueue-inspect: describe, verify, dump and edit the data folder of persistent (mmap) topics
// without writing code (docs/inspect.md). This file only parses arguments and prints; the folder
// logic is library code in include/bufferqueue/mmap/inspect/.
//
// Exit status: 0 success (verify: intact), 1 verify found problems, 2 usage error or bad input
// (unknown command or option, missing folder, not a bufferqueue folder, unknown topic, partition or
// group, offset out of range), 3 refused or failed (a queue holds the topic's lock, a damaged
// partition, an I/O error).
#include "bufferqueue/error.hpp"
#include "bufferqueue/mmap/inspect/folder_reader.hpp"
#include "bufferqueue/mmap/inspect/folder_verifier.hpp"
#include "bufferqueue/mmap/inspect/group_editor.hpp"

#include "command_line.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <exception>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace inspect = bufferqueue::inspect;
using namespace bufferqueue_inspect_tool;
using nlohmann::json;

// Names (groups, topics) need not be valid UTF-8; JSON output replaces invalid bytes with U+FFFD.
constexpr auto replace_invalid = json::error_handler_t::replace;

constexpr int exit_problems = 1;
constexpr int exit_usage = 2;
constexpr int exit_failed = 3;

constexpr const char* usage_text =
    "usage: bufferqueue-inspect COMMAND DIR ...   (DIR: the data_directory of the mmap topics)\n"
    "  describe DIR [--json]\n"
    "  verify DIR [--json]\n"
    "  dump DIR TOPIC PARTITION [--from N] [--count N] [--format json|hex]\n"
    "  reset-offsets DIR TOPIC GROUP --to-earliest|--to-latest|--to-offset N [--execute]\n"
    "  delete-group DIR TOPIC GROUP [--execute]\n"
    "Offsets are record numbers (items). Without --execute nothing is written.\n"
    "Exit status: 0 success, 1 verify found problems, 2 usage error or bad input, 3 refused or failed.\n";

std::string status_of(const inspect::partition_summary& summary)
{
    if (summary.problem) {
        return "damaged";
    }
    return summary.tail_bytes > 0 ? "tail-being-written" : "ok";
}

int describe(const arguments& parsed)
{
    require_positional(parsed, 1, "DIR");
    const std::string& folder = parsed.positional[0];
    json topics = json::array();
    std::vector<std::vector<std::string>> partition_rows{
        {"TOPIC", "PARTITION", "SEGMENTS", "BYTES", "RECORDS", "EARLIEST-OFFSET", "LOG-END-OFFSET", "STATUS"}};
    std::vector<std::vector<std::string>> group_rows{
        {"GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"}};
    std::vector<std::vector<std::string>> option_rows{{"TOPIC", "PARTITIONS", "SEGMENT-SIZE", "SERIALIZER"}};
    std::vector<std::string> problems;
    for (const std::string& topic : inspect::list_topics(folder)) {
        json stored_options = nullptr;
        try {
            if (const auto stored = inspect::read_topic_options(folder, topic)) {
                stored_options = {{"partitions", stored->partitions},
                                  {"segment_size", stored->segment_size},
                                  {"serializer", stored->serializer_name}};
                option_rows.push_back({topic, std::to_string(stored->partitions), std::to_string(stored->segment_size),
                                       stored->serializer_name});
            } else {
                option_rows.push_back({topic, "-", "-", "(no topic.options yet: the next open writes it)"});
            }
        } catch (const bufferqueue::error& failure) {
            option_rows.push_back({topic, "-", "-", "(damaged topic.options)"});
            problems.push_back(failure.what());
        }
        json partitions = json::array();
        std::map<std::string, json> groups;
        for (const std::size_t partition : inspect::list_partitions(folder, topic)) {
            const inspect::partition_reader reader(folder, topic, partition);
            const inspect::partition_summary& summary = reader.summary();
            partition_rows.push_back({topic, std::to_string(partition), std::to_string(summary.segments),
                                      std::to_string(summary.bytes), std::to_string(summary.records()),
                                      std::to_string(summary.earliest), std::to_string(summary.end),
                                      status_of(summary)});
            json entry = {{"partition", partition},
                          {"segments", summary.segments},
                          {"bytes", summary.bytes},
                          {"records", summary.records()},
                          {"earliest_offset", summary.earliest},
                          {"log_end_offset", summary.end},
                          {"segment_size", summary.segment_size},
                          {"tail_bytes", summary.tail_bytes},
                          {"status", status_of(summary)},
                          {"problem", nullptr}};
            if (summary.problem) {
                entry["problem"] = *summary.problem;
                problems.push_back(*summary.problem);
            }
            partitions.push_back(entry);
            for (const inspect::group_position& group : summary.groups) {
                const std::uint64_t lag = summary.end - group.committed;
                group_rows.push_back({group.group, topic, std::to_string(partition), std::to_string(group.committed),
                                      std::to_string(summary.end), std::to_string(lag)});
                json& total = groups[group.group];
                if (total.is_null()) {
                    total = {{"group", group.group}, {"lag", 0}, {"partitions", json::array()}};
                }
                total["lag"] = total["lag"].get<std::uint64_t>() + lag;
                total["partitions"].push_back({{"partition", partition},
                                               {"current_offset", group.committed},
                                               {"log_end_offset", summary.end},
                                               {"lag", lag}});
            }
        }
        json group_list = json::array();
        for (auto& [name, group] : groups) {
            group_list.push_back(std::move(group));
        }
        topics.push_back(
            {{"topic", topic}, {"options", stored_options}, {"partitions", partitions}, {"groups", group_list}});
    }
    const std::vector<inspect::unexpected_entry> unexpected = inspect::list_unexpected_entries(folder);
    if (parsed.options.contains("--json")) {
        json entries = json::array();
        for (const inspect::unexpected_entry& each : unexpected) {
            entries.push_back({{"path", each.path}, {"text", each.text}});
        }
        std::cout << json{{"data_directory", folder}, {"topics", topics}, {"unexpected", entries}}.dump(2, ' ', false,
                                                                                                        replace_invalid)
                  << '\n';
        return 0;
    }
    print_table(partition_rows);
    std::cout << '\n';
    print_table(option_rows);
    std::cout << '\n';
    if (group_rows.size() == 1) {
        std::cout << "(no consumer groups)\n";
    } else {
        print_table(group_rows);
    }
    for (const std::string& problem : problems) {
        std::cout << "\ndamaged: " << problem << " (run bufferqueue-inspect verify)\n";
    }
    for (const inspect::unexpected_entry& each : unexpected) {
        std::cout << "\nunexpected: " << each.path << ": " << each.text << '\n';
    }
    return 0;
}

std::string finding_text(const inspect::verify_finding& finding)
{
    return finding.file + (finding.byte ? ": byte " + std::to_string(*finding.byte) : std::string()) + ": " +
           finding.text;
}

int verify(const arguments& parsed)
{
    require_positional(parsed, 1, "DIR");
    const inspect::verify_report report = inspect::verify_data_folder(parsed.positional[0]);
    if (parsed.options.contains("--json")) {
        const auto list = [](const std::vector<inspect::verify_finding>& findings) {
            json out = json::array();
            for (const auto& each : findings) {
                out.push_back(
                    {{"file", each.file}, {"byte", each.byte ? json(*each.byte) : json(nullptr)}, {"text", each.text}});
            }
            return out;
        };
        std::cout << json{{"intact", report.intact()},         {"topics", report.topics},
                          {"partitions", report.partitions},   {"segments", report.segments},
                          {"records", report.records},         {"checkpoints", report.checkpoints},
                          {"problems", list(report.problems)}, {"notes", list(report.notes)}}
                         .dump(2, ' ', false, replace_invalid)
                  << '\n';
    } else {
        for (const auto& each : report.problems) {
            std::cout << "problem: " << finding_text(each) << '\n';
        }
        for (const auto& each : report.notes) {
            std::cout << "note: " << finding_text(each) << '\n';
        }
        std::cout << (report.intact() ? "intact" : "DAMAGED") << ": " << report.topics << " topics, "
                  << report.partitions << " partitions, " << report.segments << " segments, " << report.records
                  << " records, " << report.checkpoints << " checkpoints checked; " << report.problems.size()
                  << " problems, " << report.notes.size() << " notes\n";
    }
    return report.intact() ? 0 : exit_problems;
}

std::string hex(std::span<const std::byte> bytes)
{
    std::ostringstream out;
    out << std::hex << std::setfill('0');
    for (const std::byte each : bytes) {
        out << std::setw(2) << std::to_integer<unsigned>(each);
    }
    return out.str();
}

std::string payload_text(const inspect::record_entry& record, bool as_json)
{
    if (!as_json) {
        return hex(record.payload);
    }
    const auto* first = reinterpret_cast<const char*>(record.payload.data());
    try {
        return json::parse(first, first + record.payload.size()).dump(-1, ' ', false, replace_invalid);
    } catch (const json::exception&) {
        return "(not JSON; hex) " + hex(record.payload);
    }
}

int dump(const arguments& parsed)
{
    require_positional(parsed, 3, "DIR TOPIC PARTITION");
    const std::uint64_t partition = parse_number(parsed.positional[2], "PARTITION");
    std::string format = "json";
    if (const auto given = parsed.options.find("--format"); given != parsed.options.end()) {
        format = given->second;
        if (format != "json" && format != "hex") {
            throw usage_error{"--format must be json or hex, not '" + format + "'"};
        }
    }
    const inspect::partition_reader reader(parsed.positional[0], parsed.positional[1], partition);
    const inspect::partition_summary& summary = reader.summary();
    std::uint64_t from = summary.earliest;
    if (const auto given = parsed.options.find("--from"); given != parsed.options.end()) {
        from = parse_number(given->second, "--from");
    }
    std::uint64_t count = std::numeric_limits<std::uint64_t>::max();
    if (const auto given = parsed.options.find("--count"); given != parsed.options.end()) {
        count = parse_number(given->second, "--count");
    }
    if (summary.problem) {
        std::cout << "damaged: " << *summary.problem
                  << "\n(offsets below are counted from the first readable "
                     "segment and may be lower than the real ones)\n";
        for (const inspect::unreadable_segment& each : summary.unreadable) {
            std::cout << "unreadable: " << each.path << ": " << each.reason << " (its records are not shown)\n";
        }
    }
    reader.read_records(from, count, [&](const inspect::record_entry& record) {
        std::cout << "offset: " << record.item << " position: " << record.log_offset
                  << " segment: " << record.segment_file << ":" << record.position << " size: " << record.size
                  << " isvalid: " << (record.valid ? "true" : "false");
        if (!record.valid) {
            std::cout << " (" << record.problem << ")";
        }
        std::cout << " payload: " << payload_text(record, format == "json" && record.valid) << '\n';
    });
    return 0;
}

std::optional<inspect::reset_target> reset_target_of(const arguments& parsed, std::uint64_t& offset)
{
    std::optional<inspect::reset_target> target;
    const auto choose = [&](const char* option, inspect::reset_target value) {
        if (parsed.options.contains(option)) {
            if (target) {
                throw usage_error{"give exactly one of --to-earliest, --to-latest, --to-offset N"};
            }
            target = value;
        }
    };
    choose("--to-earliest", inspect::reset_target::earliest);
    choose("--to-latest", inspect::reset_target::latest);
    choose("--to-offset", inspect::reset_target::offset);
    if (!target) {
        throw usage_error{"reset-offsets needs one of --to-earliest, --to-latest, --to-offset N"};
    }
    if (*target == inspect::reset_target::offset) {
        offset = parse_number(parsed.options.at("--to-offset"), "--to-offset");
    }
    return target;
}

int edit_group(const arguments& parsed, bool reset)
{
    require_positional(parsed, 3, "DIR TOPIC GROUP");
    const std::string& folder = parsed.positional[0];
    const std::string& topic = parsed.positional[1];
    const std::string& group = parsed.positional[2];
    const bool execute = parsed.options.contains("--execute");
    inspect::group_change_plan plan;
    if (reset) {
        std::uint64_t offset = 0;
        const inspect::reset_target target = *reset_target_of(parsed, offset);
        plan = execute ? inspect::execute_reset(folder, topic, group, target, offset)
                       : inspect::plan_reset(folder, topic, group, target, offset);
    } else {
        plan = execute ? inspect::execute_delete(folder, topic, group) : inspect::plan_delete(folder, topic, group);
    }
    std::vector<std::vector<std::string>> rows{{"GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                                                reset ? "NEW-OFFSET" : "LOG-END-OFFSET", reset ? "NEW-LAG" : "LAG"}};
    for (const inspect::group_change& change : plan.changes) {
        const std::uint64_t shown = reset ? change.target : change.current;
        rows.push_back({plan.group, plan.topic, std::to_string(change.partition), std::to_string(change.current),
                        std::to_string(reset ? change.target : change.end), std::to_string(change.end - shown)});
    }
    print_table(rows);
    if (!execute) {
        std::cout << "dry run: nothing was written; add --execute to "
                  << (reset ? "reset these offsets" : "delete the group") << '\n';
    } else {
        std::cout << (reset ? "offsets reset" : "group deleted") << " in " << plan.changes.size() << " partition"
                  << (plan.changes.size() == 1 ? "" : "s") << '\n';
    }
    return 0;
}

int run(const std::vector<std::string>& words)
{
    if (words.empty()) {
        throw usage_error{"no command given"};
    }
    const std::string& command = words[0];
    const std::vector<std::string> rest(words.begin() + 1, words.end());
    if (command == "help" || command == "--help" || command == "-h") {
        std::cout << usage_text;
        return 0;
    }
    if (command == "describe") {
        return describe(parse(rest, {{"--json", false}}));
    }
    if (command == "verify") {
        return verify(parse(rest, {{"--json", false}}));
    }
    if (command == "dump") {
        return dump(parse(rest, {{"--from", true}, {"--count", true}, {"--format", true}}));
    }
    if (command == "reset-offsets") {
        return edit_group(
            parse(rest,
                  {{"--to-earliest", false}, {"--to-latest", false}, {"--to-offset", true}, {"--execute", false}}),
            true);
    }
    if (command == "delete-group") {
        return edit_group(parse(rest, {{"--execute", false}}), false);
    }
    throw usage_error{"unknown command '" + command + "'"};
}

}  // namespace

int main(int argc, char** argv)
{
    try {
        return run(std::vector<std::string>(argv + 1, argv + argc));
    } catch (const usage_error& failure) {
        std::cerr << "bufferqueue-inspect: " << failure.message << "\n" << usage_text;
        return exit_usage;
    } catch (const bufferqueue::error& failure) {
        std::cerr << "bufferqueue-inspect: " << failure.what() << '\n';
        return failure.code() == bufferqueue::errc::invalid_argument ? exit_usage : exit_failed;
    } catch (const std::exception& failure) {
        std::cerr << "bufferqueue-inspect: " << failure.what() << '\n';
        return exit_failed;
    }
}
