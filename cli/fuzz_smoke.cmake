# A 10-second libFuzzer run over the parser, seeded with the test scripts; skipped (passes)
# when the fuzzer was not built (`make fuzz_parser`).
if(NOT EXISTS ${FUZZER})
  message(STATUS "fuzz_parser not built: skipping")
  return()
endif()
execute_process(COMMAND ${FUZZER} -max_total_time=10 -max_len=4096 ${CORPUS}/golden ${CORPUS}/bad ${CORPUS}/malformed
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzz_parser found a crash (exit ${rc})")
endif()
