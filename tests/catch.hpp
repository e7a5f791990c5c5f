// Include as "catch.hpp": the Catch2 test macros and Catch::Approx, from Catch2 v3 or v2.
#pragma once

#if defined(BUFFERQUEUE_CATCH2_MAJOR) ? BUFFERQUEUE_CATCH2_MAJOR == 3 : __has_include(<catch2/catch_test_macros.hpp>)
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#else
#include <catch2/catch.hpp>
namespace Catch {
using Detail::Approx;  // v3 spells it Catch::Approx
}  // namespace Catch
#endif
