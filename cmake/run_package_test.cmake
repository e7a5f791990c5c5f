# ctest driver of the package tests: builds and runs tests/package/ against this checkout as
# add_subdirectory, FetchContent (SOURCE_DIR, no network) or find_package after `cmake --install`
# of the library to a staging prefix, then checks the program's output.
#   cmake -DMODE=<add_subdirectory|fetchcontent|find_package> -DSOURCE=<checkout> -DWORK=<directory>
#         -DGENERATOR=<generator> -DCOMPILER=<c++ compiler> [-DLAUNCHER=<ccache>] [-DBUILD_TYPE=<type>]
#         -P run_package_test.cmake
# The library and the consumer are built with the calling build's compiler, launcher (ccache) and type.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(common -G "${GENERATOR}" "-DCMAKE_CXX_COMPILER=${COMPILER}" "-DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}"
           "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}")

function(run)
    execute_process(COMMAND ${ARGN} OUTPUT_VARIABLE output ERROR_VARIABLE output RESULT_VARIABLE status)
    if(NOT status STREQUAL "0")
        message(FATAL_ERROR "failed (${status}): ${ARGN}\n${output}")
    endif()
    set(output "${output}" PARENT_SCOPE)
endfunction()

set(consumer_options "-DBUFFERQUEUE_CONSUME_AS=${MODE}")
if(MODE STREQUAL "find_package")
    set(prefix "${WORK}/staging")
    run("${CMAKE_COMMAND}" -S "${SOURCE}" -B "${WORK}/library" ${common} -DBUFFERQUEUE_BUILD_TESTS=OFF
        -DBUFFERQUEUE_BUILD_EXAMPLES=OFF -DBUFFERQUEUE_INSTALL=ON)
    run("${CMAKE_COMMAND}" --build "${WORK}/library")
    run("${CMAKE_COMMAND}" --install "${WORK}/library" --prefix "${prefix}")
    foreach(installed IN ITEMS include/bufferqueue/bufferqueue.hpp include/bufferqueue/push_consumer.hpp
                               include/bufferqueue/push/detail/push_loop.hpp lib/libbufferqueue.a
                               lib/cmake/bufferqueue/bufferqueueConfig.cmake
                               lib/cmake/bufferqueue/bufferqueueConfigVersion.cmake
                               lib/cmake/bufferqueue/bufferqueueTargets.cmake)
        if(NOT EXISTS "${prefix}/${installed}")
            file(GLOB_RECURSE present RELATIVE "${prefix}" "${prefix}/*")
            message(FATAL_ERROR "cmake --install did not install ${installed}; installed:\n${present}")
        endif()
    endforeach()
    list(APPEND consumer_options "-DCMAKE_PREFIX_PATH=${prefix}")
elseif(MODE STREQUAL "add_subdirectory" OR MODE STREQUAL "fetchcontent")
    list(APPEND consumer_options "-DBUFFERQUEUE_SOURCE=${SOURCE}")
else()
    message(FATAL_ERROR "MODE must be add_subdirectory, fetchcontent or find_package, not '${MODE}'")
endif()

run("${CMAKE_COMMAND}" -S "${SOURCE}/tests/package" -B "${WORK}/consumer" ${common} ${consumer_options})
run("${CMAKE_COMMAND}" --build "${WORK}/consumer")
file(GLOB_RECURSE targets_in_consumer "${WORK}/consumer/*bufferqueue_tests*")
if(targets_in_consumer)
    message(FATAL_ERROR "the consumer build built bufferqueue's own tests: ${targets_in_consumer}")
endif()
run("${WORK}/consumer/package_consumer")
message("${output}")
if(NOT output MATCHES "package consumer \\(${MODE}\\): pulled sum 6, pushed 3 items")
    message(FATAL_ERROR "unexpected output of the package consumer")
endif()
