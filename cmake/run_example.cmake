# ctest driver for an example: runs EXAMPLE and passes only when every run exits with status 0 AND
# its output matches PASS_REGEX (and PASS_REGEX_<run>, when given). PASS_REGULAR_EXPRESSION alone
# ignores the exit status, so it would hide, for example, a LeakSanitizer report printed after the
# example's last line.
#   cmake -DEXAMPLE=<executable> -DPASS_REGEX=<regex>
#         [-DARGS=<arg>|<arg>...] [-DRUNS=<n>] [-DPASS_REGEX_<run>=<regex>] [-DFRESH_DIRECTORY=<dir>]
#         -P run_example.cmake
# ARGS are separated by '|'. FRESH_DIRECTORY is deleted and created again before the first run.
if(NOT DEFINED RUNS)
    set(RUNS 1)
endif()
set(arguments "")
if(DEFINED ARGS AND NOT ARGS STREQUAL "")
    string(REPLACE "|" ";" arguments "${ARGS}")
endif()
if(DEFINED FRESH_DIRECTORY)
    file(REMOVE_RECURSE "${FRESH_DIRECTORY}")
    file(MAKE_DIRECTORY "${FRESH_DIRECTORY}")
endif()
foreach(run RANGE 1 ${RUNS})
    execute_process(COMMAND "${EXAMPLE}" ${arguments} OUTPUT_VARIABLE output ERROR_VARIABLE output
                    RESULT_VARIABLE status)
    message("---- run ${run} of ${RUNS}: ${EXAMPLE} ${arguments}\n${output}")
    if(NOT status STREQUAL "0")
        message(FATAL_ERROR "${EXAMPLE} failed in run ${run}: exit status ${status}")
    endif()
    if(NOT output MATCHES "${PASS_REGEX}")
        message(FATAL_ERROR "${EXAMPLE} output of run ${run} does not match '${PASS_REGEX}'")
    endif()
    if(DEFINED PASS_REGEX_${run} AND NOT output MATCHES "${PASS_REGEX_${run}}")
        message(FATAL_ERROR "${EXAMPLE} output of run ${run} does not match '${PASS_REGEX_${run}}'")
    endif()
endforeach()
