# Tests: one Boost.Test executable per folder of tests/ (test_tensor, test_autograd, ...),
# built from every tests/<folder>/test_*.cpp, sharing one precompiled Boost.Test main.
# Each folder is one CTest entry, except tests/robustness: there each test case is its own
# CTest entry (its own process), so a case that crashes fails alone and the rest still run;
# and the folders of KILN_TESTS_SPLIT_BY_SUITE (tests/jit): one entry per top-level suite.
find_package(Boost REQUIRED)
add_library(kiln_test_main OBJECT tests/main.cpp)
target_include_directories(kiln_test_main PUBLIC ${Boost_INCLUDE_DIRS} ${CMAKE_CURRENT_SOURCE_DIR})

# The "suite/case" paths of the Boost.Test cases in `sources`, read from the macros
# BOOST_AUTO_TEST_SUITE(s) ... BOOST_AUTO_TEST_SUITE_END() and BOOST_AUTO_TEST_CASE(c) /
# BOOST_FIXTURE_TEST_CASE(c, F). Editing a source re-runs CMake, so the list stays current;
# the test robustness.all_cases_registered checks it against the binary's own list.
function(kiln_boost_test_cases out_var)
  set(cases)
  set(top_suites)
  foreach(src ${ARGN})
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${src})
    file(STRINGS ${src} lines REGEX "^[ \t]*BOOST_(AUTO_TEST_SUITE|AUTO_TEST_SUITE_END|AUTO_TEST_CASE|FIXTURE_TEST_CASE)[ \t]*\\(")
    set(suites)
    foreach(line ${lines})
      # A macro's body line ends with a backslash, which escapes the list separator: it comes
      # joined to the next matching line by a ';'. Only that last line counts (the macro's
      # cases have the names of its uses, which no scan of the text can know).
      if(line MATCHES ";([^;]*)$")
        set(line "${CMAKE_MATCH_1}")
      endif()
      if(line MATCHES "BOOST_AUTO_TEST_SUITE_END")
        list(POP_BACK suites)
      elseif(line MATCHES "BOOST_AUTO_TEST_SUITE[ \t]*\\([ \t]*([A-Za-z0-9_]+)")
        if(NOT suites)
          list(APPEND top_suites ${CMAKE_MATCH_1})
        endif()
        list(APPEND suites ${CMAKE_MATCH_1})
      elseif(line MATCHES "BOOST_(AUTO|FIXTURE)_TEST_CASE[ \t]*\\([ \t]*([A-Za-z0-9_]+)")
        list(JOIN suites "/" path)
        if(path)
          list(APPEND cases "${path}/${CMAKE_MATCH_2}")
        else()
          list(APPEND cases "${CMAKE_MATCH_2}")
        endif()
      endif()
    endforeach()
  endforeach()
  set(${out_var} ${cases} PARENT_SCOPE)
  list(REMOVE_DUPLICATES top_suites)
  set(${out_var}_top_suites ${top_suites} PARENT_SCOPE)  # the suites at the top level
endfunction()

set(KILN_TEST_ENV "KILN_CACHE_DIR=${CMAKE_BINARY_DIR}/kernel-cache")
# kiln script frees by reference counting: a cyclic list or dict (a.append(a)) is never
# freed (CPython's cycle collector has no counterpart yet). These cases build cycles on
# purpose, so under `make sanitize` LeakSanitizer is off for them alone.
set(KILN_ROBUSTNESS_BUILDS_CYCLES script_resources.cyclic_containers_print_like_python
    script_resources.compiled_functions_refuse_deep_and_cyclic_arguments)
# tests/robustness also covers kiln script (tests/robustness/test_script_*.cpp).
set(KILN_TEST_LIBS_robustness kiln_script)
# tests/assignments covers the assignments' grader (assignments/assignments.cmake).
set(KILN_TEST_LIBS_assignments kiln_grader)

# Folders whose Boost.Test binary is split into one CTest entry per top-level suite: the
# longest ones, which otherwise end a parallel run alone (tests/gpu/run.sh on a 64-core host
# waited on `jit` for minutes after every other entry had passed).
set(KILN_TESTS_SPLIT_BY_SUITE jit)

file(GLOB kiln_test_dirs LIST_DIRECTORIES true ${CMAKE_CURRENT_SOURCE_DIR}/tests/*)
foreach(dir ${kiln_test_dirs})
  if(NOT IS_DIRECTORY ${dir})
    continue()
  endif()
  get_filename_component(name ${dir} NAME)
  file(GLOB sources CONFIGURE_DEPENDS ${dir}/test_*.cpp)
  # It adds an op, so it builds against a library of its own (tests/docs/adding_a_reduction.cmake).
  list(FILTER sources EXCLUDE REGEX "/tests/docs/test_adding_a_reduction\\.cpp$")
  if(NOT sources)
    continue()
  endif()
  add_executable(test_${name} ${sources} $<TARGET_OBJECTS:kiln_test_main>)
  target_link_libraries(test_${name} PRIVATE kiln ${KILN_TEST_LIBS_${name}})
  target_include_directories(test_${name} PRIVATE ${Boost_INCLUDE_DIRS})
  target_compile_definitions(test_${name} PRIVATE KILN_TEST_DIR="${dir}")
  if(name STREQUAL "robustness")
    kiln_boost_test_cases(cases ${sources})
    foreach(case ${cases})
      string(REPLACE "/" "." test_name "${case}")
      add_test(NAME robustness.${test_name} COMMAND test_${name} --run_test=${case} --report_level=short --log_level=warning)
      set(env "${KILN_TEST_ENV}")
      if(test_name IN_LIST KILN_ROBUSTNESS_BUILDS_CYCLES)
        list(APPEND env "ASAN_OPTIONS=detect_leaks=0")
      endif()
      set_tests_properties(robustness.${test_name} PROPERTIES ENVIRONMENT "${env}")
    endforeach()
    add_test(NAME robustness.all_cases_registered
             COMMAND ${CMAKE_COMMAND} -DBINARY=$<TARGET_FILE:test_${name}> "-DEXPECTED=${cases}"
                     -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/check_test_cases.cmake)
  elseif(name IN_LIST KILN_TESTS_SPLIT_BY_SUITE)
    # One CTest entry per top-level suite (jit.<suite>), so `ctest -j` spreads the folder's
    # minutes over the cores instead of one process holding the run's end, plus the check
    # that the source scan found every top-level suite and case the binary has (none left
    # without an entry; a suite's cases may come from macros, test_soundness_streams.cpp).
    kiln_boost_test_cases(cases ${sources})
    set(suites ${cases_top_suites})
    set(loose)
    foreach(case ${cases})
      if(NOT case MATCHES "/")
        list(APPEND loose ${case})
      endif()
    endforeach()
    foreach(suite ${suites})
      add_test(NAME ${name}.${suite} COMMAND test_${name} --run_test=${suite} --report_level=short --log_level=warning)
      set_tests_properties(${name}.${suite} PROPERTIES ENVIRONMENT "${KILN_TEST_ENV}")
    endforeach()
    if(loose)
      list(JOIN loose ":" loose_cases)
      add_test(NAME ${name}.cases COMMAND test_${name} --run_test=${loose_cases} --report_level=short --log_level=warning)
      set_tests_properties(${name}.cases PROPERTIES ENVIRONMENT "${KILN_TEST_ENV}")
    endif()
    add_test(NAME ${name}.all_suites_registered
             COMMAND ${CMAKE_COMMAND} -DBINARY=$<TARGET_FILE:test_${name}> "-DEXPECTED=${suites};${loose}"
                     -DTOP_LEVEL=ON -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/check_test_cases.cmake)
  else()
    add_test(NAME ${name} COMMAND test_${name} --report_level=short --log_level=warning)
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "${KILN_TEST_ENV}")
  endif()
endforeach()

# CUDA libraries hidden (LD_LIBRARY_PATH pointing nowhere): kiln still starts and says why
# CUDA is unavailable (tests/cuda/hidden_libraries.sh).
add_test(NAME cuda.hidden_libraries COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/tests/cuda/hidden_libraries.sh $<TARGET_FILE:kiln_cli>)

# tests/tensor/test_cudnn_api.cpp checks tensor/cudnn_api.h against cuDNN's own headers where
# they are installed (cudnn_graph.h, and CUDA's cuda_runtime_api.h that it includes).
find_path(KILN_CUDNN_INCLUDE_DIR cudnn_graph.h PATHS /usr/local/cuda/include)
find_path(KILN_CUDART_INCLUDE_DIR cuda_runtime_api.h PATHS /usr/local/cuda/include)
if(KILN_CUDNN_INCLUDE_DIR AND KILN_CUDART_INCLUDE_DIR)
  set_property(SOURCE tests/tensor/test_cudnn_api.cpp APPEND PROPERTY INCLUDE_DIRECTORIES
               ${KILN_CUDNN_INCLUDE_DIR} ${KILN_CUDART_INCLUDE_DIR})
  set_property(SOURCE tests/tensor/test_cudnn_api.cpp APPEND PROPERTY COMPILE_DEFINITIONS
               KILN_HAVE_CUDNN_HEADERS)
endif()
