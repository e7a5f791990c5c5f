# The setup of the [tool] tests (tests/tools/inspect_tool_test.cpp): installs the build into PREFIX,
# from scratch, so that the tests run the installed bufferqueue-inspect and a stale copy never passes.
#   cmake -DBUILD=<build dir> -DPREFIX=<prefix> [-DCONFIG=<config>] -P install_inspect.cmake
file(REMOVE_RECURSE "${PREFIX}")
set(config_arguments "")
if(CONFIG)
    set(config_arguments --config "${CONFIG}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD}" --prefix "${PREFIX}" ${config_arguments}
                RESULT_VARIABLE result OUTPUT_QUIET)
if(NOT result EQUAL 0)
    message(FATAL_ERROR "cmake --install ${BUILD} --prefix ${PREFIX} failed (${result})")
endif()
if(NOT EXISTS "${PREFIX}/bin/bufferqueue-inspect")
    message(FATAL_ERROR "the install into ${PREFIX} has no bin/bufferqueue-inspect")
endif()
