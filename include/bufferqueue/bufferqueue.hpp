// bufferqueue: the umbrella header - everything a program needs (CMake target bufferqueue::bufferqueue,
// pkg-config bufferqueue): the core component (<bufferqueue/core.hpp>: registry, memory topics, handles)
// and the mmap component (<bufferqueue/mmap.hpp>: persistent topics, serializers).
#pragma once

#include "bufferqueue/core.hpp"
#include "bufferqueue/mmap.hpp"
