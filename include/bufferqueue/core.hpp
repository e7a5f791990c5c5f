// bufferqueue/core.hpp: the umbrella header of the core component (CMake target bufferqueue::core,
// pkg-config bufferqueue-core) - the registry, memory topics, producers, pull and push consumers and
// the storage concept. Needs only Boost: nothing below it includes nlohmann_json or msgpack-cxx.
// Persistent topics and the serializers are in <bufferqueue/mmap.hpp>; <bufferqueue/bufferqueue.hpp>
// includes both.
#pragma once

#include "bufferqueue/batch.hpp"
#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/dead_letter.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/memory/memory_topic.hpp"
#include "bufferqueue/options.hpp"
#include "bufferqueue/partition_key.hpp"
#include "bufferqueue/producer.hpp"
#include "bufferqueue/pull_consumer.hpp"
#include "bufferqueue/push_consumer.hpp"
#include "bufferqueue/skipped_record.hpp"
#include "bufferqueue/storage/partition_waker.hpp"
#include "bufferqueue/storage/storage.hpp"
#include "bufferqueue/topic/option_checks.hpp"
#include "bufferqueue/topic/partitioned_topic.hpp"
#include "bufferqueue/topic/topic_context.hpp"
