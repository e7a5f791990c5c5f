// bufferqueue: the umbrella header - everything a program needs.
#pragma once

#include "bufferqueue/serialization/any_serializer.hpp"
#include "bufferqueue/batch.hpp"
#include "bufferqueue/buffer_queue.hpp"
#include "bufferqueue/error.hpp"
#include "bufferqueue/storage/memory/memory_topic.hpp"
#include "bufferqueue/storage/mmap/mmap_topic.hpp"
#include "bufferqueue/options.hpp"
#include "bufferqueue/partition_key.hpp"
#include "bufferqueue/producer.hpp"
#include "bufferqueue/pull_consumer.hpp"
#include "bufferqueue/push_consumer.hpp"
#include "bufferqueue/serialization/serializer.hpp"
#include "bufferqueue/storage/storage.hpp"
