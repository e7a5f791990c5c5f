// bufferqueue/mmap.hpp: the umbrella header of the mmap component (CMake target bufferqueue::mmap) -
// persistent (mmap) topics and the serializers. Needs nlohmann_json and msgpack-cxx besides Boost.
// Include <bufferqueue/core.hpp> (or <bufferqueue/bufferqueue.hpp>) for the registry and the handles.
#pragma once

#include "bufferqueue/mmap/mmap_topic.hpp"
#include "bufferqueue/serialization/any_serializer.hpp"
#include "bufferqueue/serialization/serializer.hpp"
