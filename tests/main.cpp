// The test runner's main(). Catch2 v3 gets it from Catch2::Catch2WithMain, so this file is empty there.
#if defined(BUFFERQUEUE_CATCH2_MAJOR) ? BUFFERQUEUE_CATCH2_MAJOR == 2 : !__has_include(<catch2/catch_test_macros.hpp>)
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#endif

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
// ThreadSanitizer's built-in suppressions for this binary, whatever TSAN_OPTIONS says. One only:
// libstdc++.so is not built with TSan, so the atomic reference count of an exception_ptr
// (_M_addref/_M_release, rethrow_exception, __cxa_end_catch in eh_ptr.cc) is invisible to it. An
// exception that a std::future rethrows on one thread and whose promise is destroyed on another
// (use_future completions on Asio's system executor) is then reported as a race between the catch
// block's reads and the free - e.g. tests/registry/buffer_queue_test.cpp's use_future case in 3
// of 6 runs of "[registry]". The pattern names only that reference count's functions.
extern "C" const char* __tsan_default_suppressions()  // NOLINT(bugprone-reserved-identifier)
{
    return "race:std::__exception_ptr::exception_ptr::_M_release\n";
}
#endif
#endif
