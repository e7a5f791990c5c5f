// The function-entry hook of the walk measurement (benchmarks/walk/measure.py): compiled without
// instrumentation, it records every instrumented function entered while `bufferqueue_walking` is
// set, with its call depth, and writes the records out at the end. Not part of the library.
#include <cstdio>

extern "C" {

bool bufferqueue_walking = false;

namespace {

constexpr int max_records = 100000;
struct walk_record {
    int depth;
    void* function;
};
walk_record records[max_records];
int record_count = 0;
int depth = 0;

}  // namespace

__attribute__((no_instrument_function)) void __cyg_profile_func_enter(void* function, void*)
{
    if (bufferqueue_walking && record_count < max_records) {
        records[record_count++] = {depth, function};
    }
    ++depth;
}

__attribute__((no_instrument_function)) void __cyg_profile_func_exit(void*, void*)
{
    --depth;
}

__attribute__((no_instrument_function)) void bufferqueue_walk_dump(const char* path)
{
    std::FILE* file = std::fopen(path, "w");
    if (file == nullptr) {
        return;
    }
    for (int index = 0; index < record_count; ++index) {
        std::fprintf(file, "%d %p\n", records[index].depth, records[index].function);
    }
    std::fclose(file);
}
}
