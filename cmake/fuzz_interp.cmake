# The interpreter fuzzer (cli/fuzz_interp.cpp). clang 14 cannot compile kiln's C++20
# (std::source_location with libstdc++ 12), so this builds the standalone driver with the
# project's compiler and AddressSanitizer + UBSan on the interpreter's sources (the kiln
# library is linked as built). It forks one child per script.
#   make fuzz_interp && ./fuzz_interp -max_total_time=600 -timeout=10 ../tests/cli/{golden,bad,malformed}
# ctest's fuzz_interp_smoke runs it for 20 s; it reports SKIP (77) when it was not built.
file(GLOB kiln_fuzz_interp_sources CONFIGURE_DEPENDS cli/script/*.cpp cli/interp/*.cpp)
add_executable(fuzz_interp EXCLUDE_FROM_ALL cli/fuzz_interp.cpp ${kiln_fuzz_interp_sources})
target_compile_definitions(fuzz_interp PRIVATE KILN_FUZZ_STANDALONE)
target_compile_options(fuzz_interp PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer -O1 -g)
target_link_options(fuzz_interp PRIVATE -fsanitize=address,undefined)
target_link_libraries(fuzz_interp PRIVATE kiln)
# Registered always, so a machine without the fuzzer shows a skip, never a silent pass.
add_test(NAME fuzz_interp_smoke
  COMMAND sh -c "test -x '${CMAKE_BINARY_DIR}/fuzz_interp' || { echo 'fuzz_interp not built (make fuzz_interp)'; exit 77; }
                 exec '${CMAKE_BINARY_DIR}/fuzz_interp' -max_total_time=20 -timeout=10
                 '${CMAKE_CURRENT_SOURCE_DIR}/tests/cli/golden' '${CMAKE_CURRENT_SOURCE_DIR}/tests/cli/bad' '${CMAKE_CURRENT_SOURCE_DIR}/tests/cli/malformed'")
set_tests_properties(fuzz_interp_smoke PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
                     ENVIRONMENT "KILN_CACHE_DIR=${CMAKE_BINARY_DIR}/kernel-cache")
