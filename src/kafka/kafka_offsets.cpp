// A Kafka topic's offsets from the brokers (ListOffsets, OffsetFetch) and a group's committed
// offsets moved back to the earliest records (a member's commit), over librdkafka.
#include "bufferqueue/error.hpp"
#include "bufferqueue/kafka/detail/kafka_producer.hpp"
#include "kafka_client_setup.hpp"
#include "kafka_offset_queries.hpp"

#include "bufferqueue/detail/message.hpp"

#include <algorithm>
#include <array>
#include <memory>

namespace bufferqueue::detail {

namespace {

using clock = std::chrono::steady_clock;

// At least 1 ms: librdkafka reads 0 as "do not wait".
int remaining_ms(clock::time_point deadline) noexcept
{
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
    return static_cast<int>(std::clamp<long long>(left, 1, 1'000'000'000));
}

std::string where(const std::string& topic, const std::string& group, const std::string& servers)
{
    if (group.empty()) {
        return detail::format_message("kafka topic '{}' (brokers {})", topic, servers);
    }
    return detail::format_message("kafka topic '{}' group '{}' (brokers {})", topic, group, servers);
}

[[noreturn]] void fail(rd_kafka_resp_err_t code, const std::string& context, const std::string& what)
{
    const boost::system::error_code mapped = kafka_error_code(code);
    throw error(static_cast<errc>(mapped.value()),
                detail::format_message("{}: {}: {}", context, what, rd_kafka_err2str(code)));
}

struct partition_list_deleter {
    void operator()(rd_kafka_topic_partition_list_t* list) const noexcept
    {
        rd_kafka_topic_partition_list_destroy(list);
    }
};
using partition_list = std::unique_ptr<rd_kafka_topic_partition_list_t, partition_list_deleter>;

partition_list every_partition(const std::string& topic, std::size_t partitions)
{
    partition_list list(rd_kafka_topic_partition_list_new(static_cast<int>(partitions)));
    for (std::size_t partition = 0; partition < partitions; ++partition) {
        rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), static_cast<std::int32_t>(partition));
    }
    return list;
}

// ListOffsets with the special timestamps: latest (-1) is the end offset, earliest (-2) the first
// record's. rd_kafka_offsets_for_times, not rd_kafka_query_watermark_offsets: in 2.0.2 the latter
// does not return within its timeout while the partition's leader is down (seen on the mock).
void read_watermarks(rd_kafka_t* client, const std::string& topic, std::size_t partitions, clock::time_point deadline,
                     const std::string& context, kafka_topic_offsets& into)
{
    const auto ask = [&](std::int64_t which, std::vector<std::int64_t>& offsets) {
        const partition_list list = every_partition(topic, partitions);
        for (int each = 0; each < list->cnt; ++each) {
            list->elems[each].offset = which;
        }
        const rd_kafka_resp_err_t result = rd_kafka_offsets_for_times(client, list.get(), remaining_ms(deadline));
        if (result != RD_KAFKA_RESP_ERR_NO_ERROR) {
            fail(result, context, "cannot read the partitions' offsets");
        }
        offsets.assign(partitions, 0);
        for (int each = 0; each < list->cnt; ++each) {
            const rd_kafka_topic_partition_t& entry = list->elems[each];
            if (entry.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
                fail(entry.err, context,
                     detail::format_message("cannot read the offsets of partition {}", entry.partition));
            }
            if (entry.partition >= 0 && static_cast<std::size_t>(entry.partition) < partitions) {
                offsets[static_cast<std::size_t>(entry.partition)] = std::max<std::int64_t>(entry.offset, 0);
            }
        }
    };
    ask(RD_KAFKA_OFFSET_END, into.end);
    ask(RD_KAFKA_OFFSET_BEGINNING, into.earliest);
}

struct queue_deleter {
    void operator()(rd_kafka_queue_t* queue) const noexcept { rd_kafka_queue_destroy(queue); }
};
struct event_deleter {
    void operator()(rd_kafka_event_t* event) const noexcept { rd_kafka_event_destroy(event); }
};
struct options_deleter {
    void operator()(rd_kafka_AdminOptions_t* options) const noexcept { rd_kafka_AdminOptions_destroy(options); }
};

// The group's committed offsets through ListConsumerGroupOffsets (OffsetFetch), -1 for none.
std::vector<std::int64_t> read_committed(rd_kafka_t* client, const std::string& topic, std::size_t partitions,
                                         const std::string& group, clock::time_point deadline,
                                         const std::string& context)
{
    const std::unique_ptr<rd_kafka_queue_t, queue_deleter> queue(rd_kafka_queue_new(client));
    const std::unique_ptr<rd_kafka_AdminOptions_t, options_deleter> options(
        rd_kafka_AdminOptions_new(client, RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPOFFSETS));
    std::array<char, 512> reason{};
    rd_kafka_AdminOptions_set_request_timeout(options.get(), remaining_ms(deadline), reason.data(), reason.size());
    const partition_list wanted = every_partition(topic, partitions);
    rd_kafka_ListConsumerGroupOffsets_t* request = rd_kafka_ListConsumerGroupOffsets_new(group.c_str(), wanted.get());
    rd_kafka_ListConsumerGroupOffsets(client, &request, 1, options.get(), queue.get());
    rd_kafka_ListConsumerGroupOffsets_destroy(request);
    // The request times out on its own (request timeout above); wait a little longer for its event.
    const std::unique_ptr<rd_kafka_event_t, event_deleter> event(
        rd_kafka_queue_poll(queue.get(), remaining_ms(deadline) + 1000));
    if (event == nullptr) {
        fail(RD_KAFKA_RESP_ERR__TIMED_OUT, context, "no answer to the committed-offsets request");
    }
    if (rd_kafka_event_error(event.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        fail(rd_kafka_event_error(event.get()), context, "cannot read the committed offsets");
    }
    std::vector<std::int64_t> committed(partitions, -1);
    const rd_kafka_ListConsumerGroupOffsets_result_t* result =
        rd_kafka_event_ListConsumerGroupOffsets_result(event.get());
    std::size_t count = 0;
    const rd_kafka_group_result_t** groups = rd_kafka_ListConsumerGroupOffsets_result_groups(result, &count);
    for (std::size_t index = 0; index < count; ++index) {
        if (const rd_kafka_error_t* failure = rd_kafka_group_result_error(groups[index]); failure != nullptr) {
            fail(rd_kafka_error_code(failure), context, "cannot read the committed offsets");
        }
        const rd_kafka_topic_partition_list_t* listed = rd_kafka_group_result_partitions(groups[index]);
        for (int each = 0; listed != nullptr && each < listed->cnt; ++each) {
            const rd_kafka_topic_partition_t& entry = listed->elems[each];
            if (entry.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
                fail(entry.err, context,
                     detail::format_message("cannot read the committed offset of partition {}", entry.partition));
            }
            if (entry.partition >= 0 && static_cast<std::size_t>(entry.partition) < partitions && entry.offset >= 0) {
                committed[static_cast<std::size_t>(entry.partition)] = entry.offset;
            }
        }
    }
    return committed;
}

// The reset's consumer leaves its group explicitly (rd_kafka_consumer_close) where it joined one;
// destroying it must not try again (that waits for the coordinator, also while brokers are down).
struct client_deleter {
    void operator()(rd_kafka_t* client) const noexcept
    {
        rd_kafka_destroy_flags(client, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
    }
};

// What the reset's member was given by its group's rebalances (rebalance callback, on the thread
// that polls the consumer: the calling thread).
struct reset_member_state {
    int assigned = -1;  // partitions of the last assignment; -1 before the first
};

void on_rebalance(rd_kafka_t* client, rd_kafka_resp_err_t event, rd_kafka_topic_partition_list_t* partitions,
                  void* opaque)
{
    auto& state = *static_cast<reset_member_state*>(opaque);
    if (event == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        rd_kafka_assign(client, partitions);
        state.assigned = partitions->cnt;
    } else {
        rd_kafka_assign(client, nullptr);
        state.assigned = -1;
    }
}

}  // namespace

kafka_topic_offsets query_topic_offsets(rd_kafka_t* client, const std::string& topic, std::size_t partitions,
                                        const std::vector<std::string>& groups, std::chrono::milliseconds timeout,
                                        const std::string& servers)
{
    const clock::time_point deadline = clock::now() + timeout;
    kafka_topic_offsets offsets;
    read_watermarks(client, topic, partitions, deadline, where(topic, {}, servers), offsets);
    for (const std::string& group : groups) {
        offsets.committed[group] =
            read_committed(client, topic, partitions, group, deadline, where(topic, group, servers));
    }
    return offsets;
}

bool reset_kafka_group_offsets(const kafka_group_reset_settings& settings)
{
    const clock::time_point deadline = clock::now() + settings.timeout;
    const std::string context = where(settings.topic, settings.group, settings.bootstrap_servers);
    std::map<std::string, std::string> properties = settings.properties;
    properties["group.id"] = settings.group;
    properties["enable.auto.commit"] = "false";
    properties["enable.auto.offset.store"] = "false";
    rd_kafka_conf_t* configuration = make_client_configuration(settings.topic, settings.bootstrap_servers, properties);
    reset_member_state state;
    rd_kafka_conf_set_opaque(configuration, &state);
    rd_kafka_conf_set_rebalance_cb(configuration, &on_rebalance);
    std::array<char, 512> reason{};
    const std::unique_ptr<rd_kafka_t, client_deleter> client(
        rd_kafka_new(RD_KAFKA_CONSUMER, configuration, reason.data(), reason.size()));
    if (client == nullptr) {
        rd_kafka_conf_destroy(configuration);
        throw error(errc::invalid_argument,
                    detail::format_message("{}: librdkafka refused the configuration: {}", context, reason.data()));
    }
    rd_kafka_poll_set_consumer(client.get());

    kafka_topic_offsets offsets;
    read_watermarks(client.get(), settings.topic, settings.partitions, deadline, context, offsets);
    const std::vector<std::int64_t> committed =
        read_committed(client.get(), settings.topic, settings.partitions, settings.group, deadline, context);
    bool beyond = false;
    for (std::size_t partition = 0; partition < settings.partitions; ++partition) {
        beyond = beyond || committed[partition] > offsets.earliest[partition];
    }
    if (!beyond) {
        return false;  // nothing committed past the earliest records: a new group starts there anyway
    }

    // Join the group and wait until this member owns every partition (eager rebalances: the first
    // assignment of a generation is the member's whole share).
    const partition_list subscription = [&] {
        partition_list list(rd_kafka_topic_partition_list_new(1));
        rd_kafka_topic_partition_list_add(list.get(), settings.topic.c_str(), RD_KAFKA_PARTITION_UA);
        return list;
    }();
    if (const rd_kafka_resp_err_t result = rd_kafka_subscribe(client.get(), subscription.get());
        result != RD_KAFKA_RESP_ERR_NO_ERROR) {
        fail(result, context, "cannot join the group");
    }
    const auto leave = [&] { rd_kafka_consumer_close(client.get()); };
    while (state.assigned < static_cast<int>(settings.partitions) && clock::now() < deadline) {
        if (state.assigned >= 0) {
            leave();
            throw error(
                errc::group_in_use,
                detail::format_message("{}: cannot remove the group: other members hold {} of its {} partitions (close "
                                       "them first)",
                                       context, settings.partitions - static_cast<std::size_t>(state.assigned),
                                       settings.partitions));
        }
        if (rd_kafka_message_t* message = rd_kafka_consumer_poll(client.get(), std::min(remaining_ms(deadline), 100));
            message != nullptr) {
            rd_kafka_message_destroy(message);  // records or errors: this member reads nothing
        }
    }
    if (state.assigned < static_cast<int>(settings.partitions)) {
        leave();
        throw error(errc::timed_out,
                    detail::format_message("{}: cannot remove the group: joining it took longer than {} ms", context,
                                           settings.timeout.count()));
    }
    const partition_list reset = every_partition(settings.topic, settings.partitions);
    for (int each = 0; each < reset->cnt; ++each) {
        reset->elems[each].offset = offsets.earliest[static_cast<std::size_t>(each)];
    }
    const rd_kafka_resp_err_t result = rd_kafka_commit(client.get(), reset.get(), 0);
    leave();
    if (result != RD_KAFKA_RESP_ERR_NO_ERROR) {
        fail(result, context, "cannot move the committed offsets back to the earliest records");
    }
    for (int each = 0; each < reset->cnt; ++each) {
        if (reset->elems[each].err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            fail(reset->elems[each].err, context,
                 detail::format_message("cannot move the committed offset of partition {} back", each));
        }
    }
    return true;
}

}  // namespace bufferqueue::detail
