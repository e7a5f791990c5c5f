# ctest driver for an example: runs EXAMPLE and passes only when it exits with status 0 AND its
# output matches PASS_REGEX. (PASS_REGULAR_EXPRESSION alone ignores the exit status, so it would
# hide, for example, a LeakSanitizer report printed after the example's last line.)
#   cmake -DEXAMPLE=<executable> -DPASS_REGEX=<regex> -P run_example.cmake
execute_process(COMMAND "${EXAMPLE}" OUTPUT_VARIABLE output ERROR_VARIABLE output RESULT_VARIABLE status)
message("${output}")
if(NOT status STREQUAL "0")
    message(FATAL_ERROR "${EXAMPLE} failed: exit status ${status}")
endif()
if(NOT output MATCHES "${PASS_REGEX}")
    message(FATAL_ERROR "${EXAMPLE} output does not match '${PASS_REGEX}'")
endif()
