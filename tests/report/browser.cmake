# The report in headless Chromium (tests/report/browser_check.py): report.browser_fixture
# renders tests/report/traces/basic; report.browser_lesson renders the trace of lessons 03, 07
# and 06 run with KILN_TRACE. Screenshots go to build/report-screens/. Without chromium (make
# test-deps installs it) each is reported as skipped with the reason, never as passed.
find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  foreach(t report.browser_fixture report.browser_lesson)
    add_test(NAME ${t} COMMAND sh -c "echo '${t}: SKIPPED: no python3 to drive the browser'; exit 77")
    set_tests_properties(${t} PROPERTIES SKIP_RETURN_CODE 77)
  endforeach()
  return()
endif()
set(kiln_browser_check ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/tests/report/browser_check.py --kiln $<TARGET_FILE:kiln_cli>)
add_test(NAME report.browser_fixture
         COMMAND ${kiln_browser_check} --trace ${CMAKE_CURRENT_SOURCE_DIR}/tests/report/traces/basic
                 --out ${CMAKE_BINARY_DIR}/report-browser/fixture --shots ${CMAKE_BINARY_DIR}/report-screens/fixture)
set(kiln_browser_tests report.browser_fixture)
# The lessons write a trace only where the trace log (jit/trace_log.h, issue 29's collector) is built in.
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/jit/trace_log.h)
  add_test(NAME report.browser_lesson
           COMMAND ${kiln_browser_check} --lesson $<TARGET_FILE:tutorial_03_graph_breaks>
                   --lesson $<TARGET_FILE:tutorial_07_fusion_and_codegen> --lesson $<TARGET_FILE:tutorial_06_aot_autograd>
                   --out ${CMAKE_BINARY_DIR}/report-browser/lesson --shots ${CMAKE_BINARY_DIR}/report-screens/lesson)
  list(APPEND kiln_browser_tests report.browser_lesson)
else()
  add_test(NAME report.browser_lesson
           COMMAND sh -c "echo 'report.browser_lesson: SKIPPED: this build has no trace log (jit/trace_log.h), so lessons write no trace'; exit 77")
endif()
set_tests_properties(report.browser_lesson PROPERTIES SKIP_RETURN_CODE 77)
set_tests_properties(${kiln_browser_tests} PROPERTIES SKIP_RETURN_CODE 77 ENVIRONMENT "${KILN_TEST_ENV}" TIMEOUT 300)
