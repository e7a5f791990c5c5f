// The test runner's main(). Catch2 v3 gets it from Catch2::Catch2WithMain, so this file is empty there.
#if defined(BUFFERQUEUE_CATCH2_MAJOR) ? BUFFERQUEUE_CATCH2_MAJOR == 2 : !__has_include(<catch2/catch_test_macros.hpp>)
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#endif
