# A 10-second libFuzzer run over the parser, seeded with the test scripts. The test
# fuzz_parser_build (a CTest fixture) builds the fuzzer first; if it is still missing, this
# prints the SKIPPED line that the test's SKIP_REGULAR_EXPRESSION reports as a skip.
if(NOT EXISTS ${FUZZER})
  message("fuzz_parser_smoke: SKIPPED: ${FUZZER} was not built (`cmake --build . --target fuzz_parser`)")
  return()
endif()
execute_process(COMMAND ${FUZZER} -max_total_time=10 -max_len=4096 ${CORPUS}/golden ${CORPUS}/bad ${CORPUS}/malformed
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzz_parser found a crash (exit ${rc})")
endif()
