# The out-of-tree build test (tutorials/tests.cmake): `cmake --install` into WORK/prefix,
# then tutorials/standalone (find_package(kiln), kiln::kiln) builds lesson 07 with the
# same compiler, launcher and build type, and the lesson must pass its checks. Lesson 07
# generates and compiles kernels: with a fresh kernel cache and KILN_INCLUDE_DIR pointing
# at the installed headers, that shows an installed kiln's kernels build from the install.
file(REMOVE_RECURSE ${WORK})
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(last_out "${out}" PARENT_SCOPE)
endfunction()
run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK}/prefix)
# One argument holding a list: its semicolons escaped, or execute_process splits it in two.
string(REPLACE "|" "\\;" prefixes "${WORK}/prefix|${PREFIXES}")
run("configuring tutorials/standalone" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tutorials/standalone -B ${WORK}/build
    "-DCMAKE_PREFIX_PATH=${prefixes}" -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}
    -DCMAKE_BUILD_TYPE=${BUILD_TYPE} -DLESSON=07_fusion_and_codegen)
run("building lesson 07 against the installed kiln" ${CMAKE_COMMAND} --build ${WORK}/build)
run("running it" ${CMAKE_COMMAND} -E env KILN_INCLUDE_DIR=${WORK}/prefix/include/kiln KILN_CACHE_DIR=${WORK}/kernel-cache
    ${WORK}/build/lesson)
message("${last_out}")
if(NOT last_out MATCHES "lesson 07: all checks passed")
  message(FATAL_ERROR "the out-of-tree lesson 07 did not pass its checks")
endif()
file(REMOVE_RECURSE ${WORK})
