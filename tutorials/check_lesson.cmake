# Runs one lesson and checks what it taught: it must exit 0 (every `check:` it prints
# passed) and its output must contain, in order, each line of the expected file (literal
# text; blank lines and lines starting with # are skipped). Invoked by tutorials/tests.cmake:
#   cmake -DLESSON=<exe> -DARGS=<args> -DEXPECTED=<file> -P check_lesson.cmake
execute_process(COMMAND ${LESSON} ${ARGS} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${LESSON} exited with ${rc}\nstderr:\n${err}")
endif()
# A lesson with a GPU part has a second expected file (EXPECTED_CUDA, NN_name.cuda.txt). On
# a machine without a usable GPU the lesson prints "CUDA: not available here (why)" and
# EXPECTED applies; otherwise it ran its GPU part and EXPECTED_CUDA applies. With the
# environment variable KILN_REQUIRE_GPU=1 (tests/gpu/run.sh sets it) a lesson that found
# no GPU fails instead, so a GPU machine never passes on the CPU file.
if(EXPECTED_CUDA)
  string(FIND "${out}" "CUDA: not available here" no_gpu)
  if(no_gpu EQUAL -1)
    set(EXPECTED ${EXPECTED_CUDA})
  elseif("$ENV{KILN_REQUIRE_GPU}" STREQUAL "1")
    message(FATAL_ERROR "${LESSON}: KILN_REQUIRE_GPU=1 but the lesson found no usable GPU")
  endif()
endif()
# CMake lists split at ';' and treat '[' ']' as grouping: encode all three in both texts
# before splitting the expected file into lines, so any text can be expected.
file(READ ${EXPECTED} wanted)
foreach(var wanted out)
  string(REPLACE "[" "<lb>" ${var} "${${var}}")
  string(REPLACE "]" "<rb>" ${var} "${${var}}")
  string(REPLACE ";" "<sc>" ${var} "${${var}}")
endforeach()
string(REPLACE "\n" ";" wanted "${wanted}")
set(rest "${out}")
foreach(line IN LISTS wanted)
  if(line STREQUAL "" OR line MATCHES "^#")
    continue()
  endif()
  string(FIND "${rest}" "${line}" at)
  if(at EQUAL -1)
    string(REPLACE "<lb>" "[" line "${line}")
    string(REPLACE "<rb>" "]" line "${line}")
    string(REPLACE "<sc>" ";" line "${line}")
    message(FATAL_ERROR "${LESSON}: expected output line not found (in order, ${EXPECTED}): '${line}'\nstderr:\n${err}")
  endif()
  string(LENGTH "${line}" len)
  math(EXPR at "${at} + ${len}")
  string(SUBSTRING "${rest}" ${at} -1 rest)
endforeach()
