# A 10-second libFuzzer run over the parser, seeded with the test scripts. The test
# fuzz_parser_build (a CTest fixture) builds the fuzzer first; if it is still missing, this
# prints the SKIPPED line that the test's SKIP_REGULAR_EXPRESSION reports as a skip.
if(NOT EXISTS ${FUZZER})
  message("fuzz_parser_smoke: SKIPPED: ${FUZZER} was not built (`cmake --build . --target fuzz_parser`)")
  return()
endif()
# libFuzzer writes new inputs into the first corpus directory: a scratch one, never the sources.
get_filename_component(scratch ${FUZZER} DIRECTORY)
set(scratch ${scratch}/fuzz_parser_corpus)
file(REMOVE_RECURSE ${scratch})
file(MAKE_DIRECTORY ${scratch})
execute_process(COMMAND ${FUZZER} -max_total_time=10 -max_len=4096 ${scratch} ${CORPUS}/golden ${CORPUS}/bad ${CORPUS}/malformed
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzz_parser found a crash (exit ${rc})")
endif()
