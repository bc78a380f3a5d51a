# Course assignments (assignments/README.md). Each assignments/aN builds against the student's
# file (assignment_N_student) and, where assignments/solutions/ exists, against the reference
# solution (assignment_N_solution); where tests/assignments/cheats/ exists, against each planted
# cheat (assignment_N_cheat_NAME); where assignments/heldout/aN exists, with the held-out tests
# too (assignment_N_heldout, instructor mode). CTest checks every direction: the solution passes
# every task, the stubs fail every task, each cheat fails the task it dodges with the message
# that names the forbidden call or the unobserved work.
set(kiln_grader_sources assignments/grader/grader.cpp assignments/grader/manifest.cpp
                        assignments/grader/calls.cpp)
add_library(kiln_grader STATIC ${kiln_grader_sources})
target_include_directories(kiln_grader PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
add_executable(assignment_grader assignments/grader/main.cpp)
target_link_libraries(assignment_grader PRIVATE kiln_grader)
# `kiln grade N` (cli/grade.cpp) runs the same grader.
target_sources(kiln_cli PRIVATE cli/grade.cpp)
target_link_libraries(kiln_cli PRIVATE kiln_grader)

# One student file (or given code) as objects the grader reads: one section per function and
# per datum, so each relocation says which function refers to what (assignments/grader/calls.h).
function(kiln_assignment_objects target)
  add_library(${target} OBJECT ${ARGN})
  target_link_libraries(${target} PRIVATE kiln)
  target_include_directories(${target} PRIVATE ${Boost_INCLUDE_DIRS})
  target_compile_options(${target} PRIVATE -ffunction-sections -fdata-sections)
endfunction()

# assignment_N_FLAVOUR from the test objects TESTS (object libraries), the given code and the
# object library CODE, and BINARY.grading beside it: the manifest and the objects to inspect.
function(kiln_assignment_binary n flavour code)
  set(target assignment_${n}_${flavour})
  set(objects $<TARGET_OBJECTS:${code}> $<TARGET_OBJECTS:kiln_test_main>)
  foreach(lib ${ARGN})
    list(APPEND objects $<TARGET_OBJECTS:${lib}>)
  endforeach()
  set(grading "manifest ${CMAKE_CURRENT_SOURCE_DIR}/assignments/a${n}/manifest.txt\nstudent $<TARGET_OBJECTS:${code}>\n")
  if(TARGET assignment_${n}_given)
    list(APPEND objects $<TARGET_OBJECTS:assignment_${n}_given>)
    string(APPEND grading "object $<JOIN:$<TARGET_OBJECTS:assignment_${n}_given>,\nobject >\n")
  endif()
  add_executable(${target} ${objects})
  target_link_libraries(${target} PRIVATE kiln)
  add_dependencies(${target} assignment_grader)
  file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/${target}.grading CONTENT "${grading}")
endfunction()

function(kiln_assignment n)
  set(dir ${CMAKE_CURRENT_SOURCE_DIR}/assignments/a${n})
  set(solution ${CMAKE_CURRENT_SOURCE_DIR}/assignments/solutions/a${n}/student.cpp)
  file(GLOB tests CONFIGURE_DEPENDS ${dir}/test_*.cpp)
  file(GLOB given CONFIGURE_DEPENDS ${dir}/given*.cpp)
  file(GLOB heldout CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/assignments/heldout/a${n}/*.cpp)
  file(GLOB cheats CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/tests/assignments/cheats/a${n}_*.cpp)
  kiln_assignment_objects(assignment_${n}_tests ${tests})
  if(given)
    kiln_assignment_objects(assignment_${n}_given ${given})
  endif()
  kiln_assignment_objects(assignment_${n}_student_code ${dir}/student.cpp)
  kiln_assignment_binary(${n} student assignment_${n}_student_code assignment_${n}_tests)
  if(heldout)
    kiln_assignment_objects(assignment_${n}_heldout_tests ${heldout})
    kiln_assignment_binary(${n} heldout assignment_${n}_student_code assignment_${n}_tests
                           assignment_${n}_heldout_tests)
  endif()
  if(NOT EXISTS ${solution})
    return()
  endif()
  kiln_assignment_objects(assignment_${n}_solution_code ${solution})
  kiln_assignment_binary(${n} solution assignment_${n}_solution_code assignment_${n}_tests)
  add_test(NAME assignment_${n}_solution COMMAND assignment_grader --solution ${n})
  add_test(NAME assignment_${n}_stubs_fail COMMAND assignment_grader --expect-fail ${n})
  set(entries assignment_${n}_solution assignment_${n}_stubs_fail)
  if(heldout)
    kiln_assignment_binary(${n} heldout_solution assignment_${n}_solution_code
                           assignment_${n}_tests assignment_${n}_heldout_tests)
    add_test(NAME assignment_${n}_heldout_solution COMMAND assignment_grader --held-out --solution ${n})
    add_test(NAME assignment_${n}_heldout_stubs_fail COMMAND assignment_grader --held-out --expect-fail ${n})
    list(APPEND entries assignment_${n}_heldout_solution assignment_${n}_heldout_stubs_fail)
  endif()
  # A planted cheat names each task it dodges and what the grader must say, one line each:
  #   // grader-expects: 4.3 | kiln::jit::aot::partition
  foreach(cheat ${cheats})
    get_filename_component(name ${cheat} NAME_WE)
    string(REGEX REPLACE "^a[0-9]+_" "" name ${name})
    kiln_assignment_objects(assignment_${n}_cheat_${name}_code ${cheat})
    kiln_assignment_binary(${n} cheat_${name} assignment_${n}_cheat_${name}_code assignment_${n}_tests)
    file(STRINGS ${cheat} expects REGEX "^// grader-expects: ")
    if(NOT expects)
      message(FATAL_ERROR "${cheat}: no `// grader-expects: TASK | MESSAGE` line")
    endif()
    # `// grader-env: NAME=VALUE`: the grader's environment for this cheat's checks.
    file(STRINGS ${cheat} cheat_envs REGEX "^// grader-env: ")
    list(TRANSFORM cheat_envs REPLACE "^// grader-env: " "")
    set(index 0)
    foreach(expect ${expects})
      if(NOT expect MATCHES "^// grader-expects: ([0-9.]+) \\| (.+)$")
        message(FATAL_ERROR "${cheat}: expected `// grader-expects: TASK | MESSAGE`: ${expect}")
      endif()
      set(test assignment_${n}_cheat_${name})
      if(index GREATER 0)
        set(test ${test}_${index})
      endif()
      add_test(NAME ${test} COMMAND assignment_grader --flavour cheat_${name}
                                    --expect-cheat ${CMAKE_MATCH_1} "${CMAKE_MATCH_2}" ${n})
      list(APPEND entries ${test})
      if(cheat_envs)
        list(APPEND env_tests ${test})
        set(env_of_${test} ${cheat_envs})
      endif()
      math(EXPR index "${index} + 1")
    endforeach()
  endforeach()
  set_tests_properties(${entries} PROPERTIES ENVIRONMENT "${KILN_TEST_ENV}")
  foreach(test ${env_tests})
    set_tests_properties(${test} PROPERTIES ENVIRONMENT "${KILN_TEST_ENV};${env_of_${test}}")
  endforeach()
endfunction()

file(GLOB kiln_assignment_dirs LIST_DIRECTORIES true CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/assignments/a*)
foreach(dir ${kiln_assignment_dirs})
  get_filename_component(name ${dir} NAME)
  if(EXISTS ${dir}/student.cpp AND name MATCHES "^a([0-9]+)$")
    kiln_assignment(${CMAKE_MATCH_1})
  endif()
endforeach()

# Gradescope's results.json from `assignment_grader --json`, checked against its shape.
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/assignments/solutions/a1/student.cpp)
  add_test(NAME assignment_results_json
           COMMAND ${CMAKE_COMMAND} -DGRADER=$<TARGET_FILE:assignment_grader> -DASSIGNMENT=1
                   -DMANIFEST=${CMAKE_CURRENT_SOURCE_DIR}/assignments/a1/manifest.txt
                   -DOUT=${CMAKE_BINARY_DIR}/assignment_results_json
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/assignments/grader/check_results_json.cmake)
  set_tests_properties(assignment_results_json PROPERTIES ENVIRONMENT "${KILN_TEST_ENV}")
endif()
