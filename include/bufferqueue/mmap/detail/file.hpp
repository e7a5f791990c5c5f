// bufferqueue: the POSIX file layer of persistent topics (this header includes all of it).
//
// This is the only code that calls the operating system for persistent topics: opening, sizing,
// preallocating, mapping, flushing, renaming and removing files, locking directories and writing
// checkpoints. Every failure throws `bufferqueue::error` with `errc::io_error` (or `corrupt_data`
// for a checkpoint that fails validation, `invalid_argument` for a misuse) and a message naming the
// full path, the operation, where relevant the offset, and the operating system's error text.
//
// Fault injection: `file_hooks` installed with `install_file_hooks` (tests only) see every
// operation before it runs and may make it fail with an errno of their choice, and they are told
// which byte ranges each successful msync/fsync made durable. When no hooks are installed the
// seam costs one relaxed atomic load per operation.
//
// Its parts: file_hooks.hpp (the fault-injection seam), file_handle.hpp (descriptors and single
// files), file_directory.hpp (directories and the directory lock), file_mapping.hpp (mappings) and
// file_checkpoint.hpp (small files written atomically: checkpoints, topic.options). Code: src/mmap/file_*.cpp;
// src/mmap/file_system_call.hpp is the one place that runs a system call through the hooks.
#pragma once

#include "bufferqueue/mmap/detail/file_checkpoint.hpp"
#include "bufferqueue/mmap/detail/file_directory.hpp"
#include "bufferqueue/mmap/detail/file_handle.hpp"
#include "bufferqueue/mmap/detail/file_hooks.hpp"
#include "bufferqueue/mmap/detail/file_mapping.hpp"
