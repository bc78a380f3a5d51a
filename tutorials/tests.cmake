# Every lesson is a CTest test (tutorial.NN_name): check_lesson.cmake runs it, requires
# exit status 0 (its own checks) and the lines of expected/NN_name.txt in its output.
# Lessons that build kernels share the tests' kernel cache (KILN_TEST_ENV).
foreach(src ${kiln_tutorials})
  get_filename_component(name ${src} NAME_WE)
  set(args "")
  if(name STREQUAL "08_speedups")
    set(args "--iters;2")  # make demo-all runs it with N_ITERS = 10
  endif()
  # Lessons with a GPU part also have expected/NN_name.cuda.txt (check_lesson.cmake).
  set(cuda_expected "")
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/tutorials/expected/${name}.cuda.txt)
    set(cuda_expected -DEXPECTED_CUDA=${CMAKE_CURRENT_SOURCE_DIR}/tutorials/expected/${name}.cuda.txt)
  endif()
  add_test(NAME tutorial.${name}
           COMMAND ${CMAKE_COMMAND} -DLESSON=$<TARGET_FILE:tutorial_${name}> "-DARGS=${args}"
                   -DEXPECTED=${CMAKE_CURRENT_SOURCE_DIR}/tutorials/expected/${name}.txt ${cuda_expected}
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/tutorials/check_lesson.cmake)
  set_tests_properties(tutorial.${name} PROPERTIES ENVIRONMENT "${KILN_TEST_ENV}")
endforeach()

# The checker itself must fail when a lesson misses an expected line or exits non-zero:
# these two pass only when check_lesson.cmake reports exactly that failure.
add_test(NAME tutorial.checker_rejects_missing_output
         COMMAND ${CMAKE_COMMAND} -DLESSON=${CMAKE_COMMAND} "-DARGS=-E;echo;lesson 01: all checks passed"
                 -DEXPECTED=${CMAKE_CURRENT_SOURCE_DIR}/tutorials/expected/01_jit_basics.txt
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/tutorials/check_lesson.cmake)
add_test(NAME tutorial.checker_rejects_failed_exit
         COMMAND ${CMAKE_COMMAND} -DLESSON=${CMAKE_COMMAND} "-DARGS=-E;false"
                 -DEXPECTED=${CMAKE_CURRENT_SOURCE_DIR}/tutorials/expected/01_jit_basics.txt
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/tutorials/check_lesson.cmake)
# A lesson with a GPU part: without the "not available" line the CUDA file applies; with
# it and KILN_REQUIRE_GPU=1 (tests/gpu/run.sh) the lesson fails.
add_test(NAME tutorial.checker_uses_cuda_file_on_a_gpu
         COMMAND ${CMAKE_COMMAND} -DLESSON=${CMAKE_COMMAND} "-DARGS=-E;echo;lesson 07: all checks passed"
                 -DEXPECTED=${CMAKE_CURRENT_SOURCE_DIR}/tutorials/expected/07_fusion_and_codegen.txt
                 -DEXPECTED_CUDA=${CMAKE_CURRENT_SOURCE_DIR}/tutorials/expected/07_fusion_and_codegen.cuda.txt
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/tutorials/check_lesson.cmake)
add_test(NAME tutorial.checker_requires_gpu_when_asked
         COMMAND ${CMAKE_COMMAND} -E env KILN_REQUIRE_GPU=1
                 ${CMAKE_COMMAND} -DLESSON=${CMAKE_COMMAND} "-DARGS=-E;echo;CUDA: not available here (no GPU)"
                 -DEXPECTED=${CMAKE_CURRENT_SOURCE_DIR}/tutorials/expected/07_fusion_and_codegen.txt
                 -DEXPECTED_CUDA=${CMAKE_CURRENT_SOURCE_DIR}/tutorials/expected/07_fusion_and_codegen.cuda.txt
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/tutorials/check_lesson.cmake)
set_tests_properties(tutorial.checker_uses_cuda_file_on_a_gpu PROPERTIES
                     PASS_REGULAR_EXPRESSION "07_fusion_and_codegen\\.cuda\\.txt")
set_tests_properties(tutorial.checker_requires_gpu_when_asked PROPERTIES
                     PASS_REGULAR_EXPRESSION "found[ \n]+no[ \n]+usable[ \n]+GPU")
# (CMake wraps long messages, so the words may be split by a newline.)
set_tests_properties(tutorial.checker_rejects_missing_output PROPERTIES
                     PASS_REGULAR_EXPRESSION "expected[ \n]+output[ \n]+line[ \n]+not[ \n]+found")
set_tests_properties(tutorial.checker_rejects_failed_exit PROPERTIES PASS_REGULAR_EXPRESSION "exited[ \n]+with[ \n]+1")

# A lesson built the way a student's own project builds it: install kiln to a temporary
# prefix, configure tutorials/standalone with find_package(kiln), build lesson 07, run it.
# The standalone project finds kiln's dependencies where this build found them (a GPU host
# with dependencies outside /usr): CMAKE_PREFIX_PATH travels, '|'-joined.
string(REPLACE ";" "|" KILN_PREFIXES_BAR "${CMAKE_PREFIX_PATH}")
add_test(NAME tutorial.out_of_tree_build
         COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR} -DWORK=${CMAKE_BINARY_DIR}/tutorial-out-of-tree
                 -DSOURCE_DIR=${CMAKE_CURRENT_SOURCE_DIR} -DCXX=${CMAKE_CXX_COMPILER}
                 "-DLAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}" -DBUILD_TYPE=${CMAKE_BUILD_TYPE}
                 "-DPREFIXES=${KILN_PREFIXES_BAR}"
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/tutorials/out_of_tree.cmake)
set_tests_properties(tutorial.out_of_tree_build PROPERTIES ENVIRONMENT "${KILN_TEST_ENV}")

# The script versions (script/NN_name.kn), run by `kiln run`, checked the same way.
file(GLOB kiln_tutorial_scripts CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/tutorials/script/*.kn)
foreach(kn ${kiln_tutorial_scripts})
  get_filename_component(name ${kn} NAME_WE)
  add_test(NAME tutorial.script.${name}
           COMMAND ${CMAKE_COMMAND} -DLESSON=$<TARGET_FILE:kiln_cli> "-DARGS=run;${kn}"
                   -DEXPECTED=${CMAKE_CURRENT_SOURCE_DIR}/tutorials/script/expected/${name}.txt
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/tutorials/check_lesson.cmake)
  set_tests_properties(tutorial.script.${name} PROPERTIES ENVIRONMENT "${KILN_TEST_ENV}")
endforeach()
