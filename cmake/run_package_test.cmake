# ctest driver of the package tests: builds and runs tests/package/ against this checkout as
# add_subdirectory, FetchContent (SOURCE_DIR, no network) or find_package after `cmake --install`
# of the library to a staging prefix, then checks the programs' output: package_consumer (everything)
# and package_core_consumer (the core component, which must compile without nlohmann_json and
# msgpack-cxx). In find_package mode it also builds the consumer project asking for the core
# component alone (with nlohmann_json and msgpack disabled for find_package), and compiles both
# programs with the flags of the installed pkg-config files (bufferqueue.pc, bufferqueue-core.pc), and
# builds and runs the programs of the optional components the library was built with (prometheus,
# kafka: find_package(bufferqueue COMPONENTS kafka) gives bufferqueue::kafka).
#   cmake -DMODE=<add_subdirectory|fetchcontent|find_package> -DSOURCE=<checkout> -DWORK=<directory>
#         -DGENERATOR=<generator> -DCOMPILER=<c++ compiler> [-DLAUNCHER=<ccache>] [-DBUILD_TYPE=<type>]
#         [-DBUILD_FLAGS=<flags of that type>] [-DINSTALL_FROM=<built build tree>]
#         [-DPRECOMPILE_HEADERS=<ON|OFF>] -P run_package_test.cmake
# The library and the consumer are built with the calling build's compiler and launcher (ccache), and
# the given build type and flags (tests/CMakeLists.txt passes Debug with -O0). With INSTALL_FROM
# (find_package only), `cmake --install` installs that build tree - the calling build, which
# tests/CMakeLists.txt passes - instead of configuring and building the library once more.
# PRECOMPILE_HEADERS (add_subdirectory, fetchcontent) sets BUFFERQUEUE_PRECOMPILE_HEADERS in the
# consumer's build; the test checks that the library's files were compiled with its precompiled
# header or, with OFF, without it.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(common -G "${GENERATOR}" "-DCMAKE_CXX_COMPILER=${COMPILER}" "-DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}"
           "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}")
if(BUILD_TYPE AND DEFINED BUILD_FLAGS)
    string(TOUPPER "${BUILD_TYPE}" type)
    list(APPEND common "-DCMAKE_CXX_FLAGS_${type}=${BUILD_FLAGS}")
endif()

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
    if(INSTALL_FROM)
        # The calling build, already built, installed as its user would install it.
        set(library "${INSTALL_FROM}")
    else()
        set(library "${WORK}/library")
        run("${CMAKE_COMMAND}" -S "${SOURCE}" -B "${library}" ${common} -DBUFFERQUEUE_BUILD_TESTS=OFF
            -DBUFFERQUEUE_BUILD_EXAMPLES=OFF -DBUFFERQUEUE_INSTALL=ON)
        run("${CMAKE_COMMAND}" --build "${library}")
    endif()
    run("${CMAKE_COMMAND}" --install "${library}" --prefix "${prefix}")
    foreach(installed IN ITEMS include/bufferqueue/bufferqueue.hpp include/bufferqueue/core.hpp
                               include/bufferqueue/mmap.hpp include/bufferqueue/push_consumer.hpp
                               include/bufferqueue/push/detail/push_loop.hpp lib/libbufferqueue_core.a
                               lib/libbufferqueue_mmap.a lib/cmake/bufferqueue/bufferqueueConfig.cmake
                               lib/cmake/bufferqueue/bufferqueueConfigVersion.cmake
                               lib/cmake/bufferqueue/bufferqueue-core-targets.cmake
                               lib/cmake/bufferqueue/bufferqueue-mmap-targets.cmake
                               lib/cmake/bufferqueue/bufferqueue-bufferqueue-targets.cmake
                               lib/pkgconfig/bufferqueue.pc lib/pkgconfig/bufferqueue-core.pc)
        if(NOT EXISTS "${prefix}/${installed}")
            file(GLOB_RECURSE present RELATIVE "${prefix}" "${prefix}/*")
            message(FATAL_ERROR "cmake --install did not install ${installed}; installed:\n${present}")
        endif()
    endforeach()
    # {fmt} is private to the library's compiled parts: the installed package must not look for it.
    list(APPEND consumer_options "-DCMAKE_PREFIX_PATH=${prefix}" -DCMAKE_DISABLE_FIND_PACKAGE_fmt=ON)
elseif(MODE STREQUAL "add_subdirectory" OR MODE STREQUAL "fetchcontent")
    list(APPEND consumer_options "-DBUFFERQUEUE_SOURCE=${SOURCE}")
    if(DEFINED PRECOMPILE_HEADERS)
        list(APPEND consumer_options "-DBUFFERQUEUE_PRECOMPILE_HEADERS=${PRECOMPILE_HEADERS}")
    endif()
else()
    message(FATAL_ERROR "MODE must be add_subdirectory, fetchcontent or find_package, not '${MODE}'")
endif()

# Runs `program` and checks that it reports the three items for `label` ("<mode>, <component>").
function(check_consumer program label)
    run("${program}")
    message("${output}")
    string(REPLACE "+" "\\+" pattern "${label}")
    if(NOT output MATCHES "package consumer \\(${pattern}\\): pulled sum 6, pushed 3 items")
        message(FATAL_ERROR "unexpected output of ${program}")
    endif()
endfunction()

run("${CMAKE_COMMAND}" -S "${SOURCE}/tests/package" -B "${WORK}/consumer" ${common} ${consumer_options})
if(MODE STREQUAL "find_package")
    run("${CMAKE_COMMAND}" --build "${WORK}/consumer")
else()
    # The two programs and the library parts they link: the subproject's other targets (the Kafka
    # component) are compiled by the calling build already.
    run("${CMAKE_COMMAND}" --build "${WORK}/consumer" --target package_consumer package_core_consumer)
endif()
file(GLOB_RECURSE targets_in_consumer "${WORK}/consumer/*bufferqueue_tests*")
if(targets_in_consumer)
    message(FATAL_ERROR "the consumer build built bufferqueue's own tests: ${targets_in_consumer}")
endif()
if(NOT MODE STREQUAL "find_package")
    # The library's files compiled with their precompiled header unless BUFFERQUEUE_PRECOMPILE_HEADERS=OFF.
    set(expect_precompiled ON)
    if(DEFINED PRECOMPILE_HEADERS)
        set(expect_precompiled ${PRECOMPILE_HEADERS})
    endif()
    file(GLOB_RECURSE precompiled "${WORK}/consumer/*cmake_pch.hxx")
    list(FILTER precompiled INCLUDE REGEX "/bufferqueue_core\\.dir/")
    if(expect_precompiled AND NOT precompiled)
        message(FATAL_ERROR "the library was built without its precompiled header")
    elseif(NOT expect_precompiled AND precompiled)
        message(FATAL_ERROR "BUFFERQUEUE_PRECOMPILE_HEADERS=OFF, yet the library was built with ${precompiled}")
    endif()
endif()
check_consumer("${WORK}/consumer/package_consumer" "${MODE}, bufferqueue")
check_consumer("${WORK}/consumer/package_core_consumer" "${MODE}, core")

if(MODE STREQUAL "find_package")
    # find_package(bufferqueue COMPONENTS core) must not look for nlohmann_json or msgpack: here it
    # could not find them.
    run("${CMAKE_COMMAND}" -S "${SOURCE}/tests/package" -B "${WORK}/core-consumer" ${common} ${consumer_options}
        -DBUFFERQUEUE_CONSUME_COMPONENT=core -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON
        -DCMAKE_DISABLE_FIND_PACKAGE_msgpack=ON -DCMAKE_DISABLE_FIND_PACKAGE_msgpack-cxx=ON)
    run("${CMAKE_COMMAND}" --build "${WORK}/core-consumer")
    if(EXISTS "${WORK}/core-consumer/package_consumer")
        message(FATAL_ERROR "the core-only consumer build built package_consumer")
    endif()
    check_consumer("${WORK}/core-consumer/package_core_consumer" "find_package, core")

    # The optional prometheus component, when the library was built with prometheus-cpp:
    # find_package(bufferqueue COMPONENTS prometheus) loads it (and prometheus-cpp).
    if(EXISTS "${prefix}/lib/cmake/bufferqueue/bufferqueue-prometheus-targets.cmake")
        run("${CMAKE_COMMAND}" -S "${SOURCE}/tests/package" -B "${WORK}/prometheus-consumer" ${common}
            ${consumer_options} -DBUFFERQUEUE_CONSUME_COMPONENT=prometheus)
        run("${CMAKE_COMMAND}" --build "${WORK}/prometheus-consumer")
        run("${WORK}/prometheus-consumer/package_prometheus_consumer")
        message("${output}")
        if(NOT output MATCHES "package consumer \\(find_package, prometheus\\): group idle lags 3 items")
            message(FATAL_ERROR "unexpected output of package_prometheus_consumer")
        endif()
    else()
        message("bufferqueue was built without prometheus-cpp: the prometheus component is not checked")
    endif()

    # The optional kafka component, when the library was built with librdkafka:
    # find_package(bufferqueue COMPONENTS kafka) loads it (and finds librdkafka with pkg-config).
    if(EXISTS "${prefix}/lib/cmake/bufferqueue/bufferqueue-kafka-targets.cmake")
        if(NOT EXISTS "${prefix}/include/bufferqueue/kafka.hpp")
            message(FATAL_ERROR "the kafka component is installed without <bufferqueue/kafka.hpp>")
        endif()
        run("${CMAKE_COMMAND}" -S "${SOURCE}/tests/package" -B "${WORK}/kafka-consumer" ${common}
            ${consumer_options} -DBUFFERQUEUE_CONSUME_COMPONENT=kafka)
        run("${CMAKE_COMMAND}" --build "${WORK}/kafka-consumer")
        run("${WORK}/kafka-consumer/package_kafka_consumer")
        message("${output}")
        if(NOT output MATCHES "package consumer \\(find_package, kafka\\): 3 items acknowledged by the broker")
            message(FATAL_ERROR "unexpected output of package_kafka_consumer")
        endif()
    else()
        if(EXISTS "${prefix}/include/bufferqueue/kafka.hpp")
            message(FATAL_ERROR "<bufferqueue/kafka.hpp> is installed without the kafka component")
        endif()
        message("bufferqueue was built without librdkafka: the kafka component is not checked")
    endif()

    # pkg-config: `pkg-config --cflags --libs bufferqueue` (and bufferqueue-core) against the staging prefix.
    find_program(pkg_config NAMES pkg-config pkgconf REQUIRED)
    set(ENV{PKG_CONFIG_PATH} "${prefix}/lib/pkgconfig")
    set(launcher "")
    if(LAUNCHER)
        set(launcher "${LAUNCHER}")
    endif()
    foreach(package IN ITEMS bufferqueue bufferqueue-core)
        run("${pkg_config}" --cflags --libs ${package})
        string(STRIP "${output}" flags)
        separate_arguments(flags UNIX_COMMAND "${flags}")
        message("pkg-config --cflags --libs ${package}: ${flags}")
        set(extra "-I${SOURCE}/tests/package/poisoned_fmt")
        set(component bufferqueue)
        if(package STREQUAL "bufferqueue-core")
            list(APPEND extra "-I${SOURCE}/tests/package/poisoned" -DBUFFERQUEUE_PACKAGE_CORE_ONLY)
            set(component core)
            if(flags MATCHES "-lbufferqueue_mmap")
                message(FATAL_ERROR "pkg-config bufferqueue-core links the mmap component: ${flags}")
            endif()
        endif()
        run(${launcher} "${COMPILER}" -std=c++20 ${extra} "-DBUFFERQUEUE_CONSUME_AS=\"pkg-config\""
            "${SOURCE}/tests/package/main.cpp" ${flags} -o "${WORK}/pkg-config-${package}")
        check_consumer("${WORK}/pkg-config-${package}" "pkg-config, ${component}")
    endforeach()
endif()
