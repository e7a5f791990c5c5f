# ctest driver for an example: runs EXAMPLE and passes only when every run exits with status
# EXPECT_STATUS (default 0) AND its output matches PASS_REGEX (and PASS_REGEX_<run>, when given).
# PASS_REGULAR_EXPRESSION alone ignores the exit status, so it would hide, for example, a
# LeakSanitizer report printed after the example's last line.
#   cmake -DEXAMPLE=<executable> -DPASS_REGEX=<regex>
#         [-DARGS=<arg>|<arg>...] [-DRUNS=<n>] [-DPASS_REGEX_<run>=<regex>] [-DFRESH_DIRECTORY=<dir>]
#         [-DEXPECT_STATUS=<n>] [-DWORKING_DIRECTORY=<dir>] [-DRUN_TIMEOUT=<seconds>]
#         -P run_example.cmake
# ARGS are separated by '|'. FRESH_DIRECTORY is deleted and created again before the first run.
# WORKING_DIRECTORY is made fresh and empty too; the runs start in it and must leave it empty (an
# example that only prints its usage creates no files). A run that takes longer than RUN_TIMEOUT
# (default 60) seconds fails: an example that hangs fails with a message naming the run.
if(NOT DEFINED RUNS)
    set(RUNS 1)
endif()
if(NOT DEFINED EXPECT_STATUS)
    set(EXPECT_STATUS 0)
endif()
if(NOT DEFINED RUN_TIMEOUT)
    set(RUN_TIMEOUT 60)
endif()
set(arguments "")
if(DEFINED ARGS AND NOT ARGS STREQUAL "")
    string(REPLACE "|" ";" arguments "${ARGS}")
endif()
if(DEFINED FRESH_DIRECTORY)
    file(REMOVE_RECURSE "${FRESH_DIRECTORY}")
    file(MAKE_DIRECTORY "${FRESH_DIRECTORY}")
endif()
set(directory_option "")
if(DEFINED WORKING_DIRECTORY)
    file(REMOVE_RECURSE "${WORKING_DIRECTORY}")
    file(MAKE_DIRECTORY "${WORKING_DIRECTORY}")
    set(directory_option WORKING_DIRECTORY "${WORKING_DIRECTORY}")
endif()
foreach(run RANGE 1 ${RUNS})
    execute_process(COMMAND "${EXAMPLE}" ${arguments} OUTPUT_VARIABLE output ERROR_VARIABLE output
                    RESULT_VARIABLE status TIMEOUT ${RUN_TIMEOUT} ${directory_option})
    message("---- run ${run} of ${RUNS}: ${EXAMPLE} ${arguments}\n${output}")
    if(NOT status STREQUAL "${EXPECT_STATUS}")
        message(FATAL_ERROR "${EXAMPLE} failed in run ${run}: exit status ${status}, expected ${EXPECT_STATUS}")
    endif()
    if(NOT output MATCHES "${PASS_REGEX}")
        message(FATAL_ERROR "${EXAMPLE} output of run ${run} does not match '${PASS_REGEX}'")
    endif()
    if(DEFINED PASS_REGEX_${run} AND NOT output MATCHES "${PASS_REGEX_${run}}")
        message(FATAL_ERROR "${EXAMPLE} output of run ${run} does not match '${PASS_REGEX_${run}}'")
    endif()
    if(DEFINED WORKING_DIRECTORY)
        file(GLOB left_behind LIST_DIRECTORIES true "${WORKING_DIRECTORY}/*" "${WORKING_DIRECTORY}/.*")
        if(left_behind)
            message(FATAL_ERROR "${EXAMPLE} ${arguments} created files in its working directory: ${left_behind}")
        endif()
    endif()
endforeach()
