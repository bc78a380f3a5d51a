# docs/adding-an-op.md, "A reduction", in a test build of its own: the library, kiln script and
# tests/docs/test_adding_a_reduction.cpp compiled with one more line of tensor/reductions.def
# (through its KILN_REDUCTION_EXTRA hook). Not part of `all` (it compiles the library a second
# time): the CTest entry docs.adding_a_reduction builds it first, through a fixture.
set(KILN_DOC_REDUCTION_LINE "KILN_REDUCTION(prod, x * y, one, product)")

# A copy of a library target (sources, options, links) whose code sees the extra line.
function(kiln_doc_reduction_copy name of sources)
  add_library(${name} STATIC EXCLUDE_FROM_ALL ${sources})
  foreach(property INCLUDE_DIRECTORIES INTERFACE_INCLUDE_DIRECTORIES COMPILE_DEFINITIONS
                   INTERFACE_COMPILE_DEFINITIONS COMPILE_OPTIONS LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
    get_target_property(value ${of} ${property})
    if(value)
      set_target_properties(${name} PROPERTIES ${property} "${value}")
    endif()
  endforeach()
  target_compile_definitions(${name} PUBLIC "KILN_REDUCTION_EXTRA=${KILN_DOC_REDUCTION_LINE}")
  # what the line gives is checked, not speed: -O1 builds faster (xsimd needs __OPTIMIZE__)
  target_compile_options(${name} PRIVATE -O1)
endfunction()

kiln_doc_reduction_copy(kiln_doc_reduction kiln "${kiln_sources}")
kiln_doc_reduction_copy(kiln_script_doc_reduction kiln_script "${kiln_script_sources}")
# kiln script's copy links the library's copy, not kiln
set_target_properties(kiln_script_doc_reduction PROPERTIES LINK_LIBRARIES kiln_doc_reduction
                      INTERFACE_LINK_LIBRARIES kiln_doc_reduction)

add_executable(test_adding_a_reduction EXCLUDE_FROM_ALL tests/docs/test_adding_a_reduction.cpp
               $<TARGET_OBJECTS:kiln_test_main>)
target_link_libraries(test_adding_a_reduction PRIVATE kiln_script_doc_reduction)
target_include_directories(test_adding_a_reduction PRIVATE ${Boost_INCLUDE_DIRS})

# on every core: the copy is a whole library, and its test waits for it
cmake_host_system_information(RESULT kiln_doc_reduction_jobs QUERY NUMBER_OF_LOGICAL_CORES)
add_test(NAME docs.adding_a_reduction_build
         COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target test_adding_a_reduction
                 --parallel ${kiln_doc_reduction_jobs})
set_tests_properties(docs.adding_a_reduction_build PROPERTIES FIXTURES_SETUP doc_reduction)
add_test(NAME docs.adding_a_reduction
         COMMAND test_adding_a_reduction --report_level=short --log_level=warning)
set_tests_properties(docs.adding_a_reduction PROPERTIES FIXTURES_REQUIRED doc_reduction
                     ENVIRONMENT "${KILN_TEST_ENV}")
