// The assignments' grader (assignments/grader/): names read from demangled symbols, the
// manifest's format and errors, and Gradescope's results.json. The whole path (objects,
// relocations, forbidden calls) is covered by the planted cheats (assignments.cmake).
#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "assignments/grader/calls.h"
#include "assignments/grader/grader.h"
#include "assignments/grader/manifest.h"

using namespace kiln::assignments;

BOOST_AUTO_TEST_SUITE(grader_names)

BOOST_AUTO_TEST_CASE(qualified_names_drop_return_types_templates_and_parameters) {
    BOOST_TEST(
        qualified_name("kiln::jit::aot::partition(std::vector<kiln::jit::aot::PartitionNode, "
                       "std::allocator<kiln::jit::aot::PartitionNode> > const&)") ==
        "kiln::jit::aot::partition");
    BOOST_TEST(
        qualified_name("kiln::jit::ExportedProgram kiln::jit::export_graph<student::trace("
                       "std::function<kiln::Tensor (int)> const&)::{lambda(int)#1}&>(int&)") ==
        "kiln::jit::export_graph");
    BOOST_TEST(
        qualified_name("student::CompiledFunction::operator()(std::vector<kiln::Tensor> const&)") ==
        "student::CompiledFunction::operator()");
    BOOST_TEST(qualified_name("(anonymous namespace)::helper(int)") ==
               "{...}::helper");  // as lambdas
    BOOST_TEST(qualified_name("student::min_cut(int) [clone .cold]") == "student::min_cut");
    BOOST_TEST(qualified_name("kiln::operator<<(std::ostream&, kiln::Tensor const&)") ==
               "kiln::operator<<");
    BOOST_TEST(qualified_name("_Exit") == "_Exit");
}

BOOST_AUTO_TEST_CASE(a_spec_covers_itself_and_its_members_not_longer_names) {
    BOOST_TEST(name_matches("kiln::jit::aot::partition", "kiln::jit::aot::partition"));
    BOOST_TEST(!name_matches("kiln::jit::aot::partition_input", "kiln::jit::aot::partition"));
    BOOST_TEST(name_matches("student::Recorder::call", "student::Recorder"));
    BOOST_TEST(!name_matches("kiln::jit::CompiledCore", "kiln::jit::Compiled"));
    BOOST_TEST(name_matches("kiln::jit::Compiled::operator()", "kiln::jit::Compiled"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(grader_manifest)

namespace {
std::string write_temp(const std::string& text) {
    char name[] = "/tmp/kiln_manifest_XXXXXX";
    int fd = mkstemp(name);
    BOOST_REQUIRE(fd >= 0);
    std::ofstream(name) << text;
    return name;
}
}  // namespace

BOOST_AUTO_TEST_CASE(a_spec_ending_in_a_star_covers_every_name_it_starts) {
    BOOST_TEST(name_matches("kiln::backward_exp", "kiln::backward_*"));
    BOOST_TEST(name_matches("defines kiln::jit::aot::copied_min_cut", "defines*"));
    BOOST_TEST(!name_matches("kiln::forward_exp", "kiln::backward_*"));
    BOOST_TEST(!name_matches("kiln::backward", "kiln::backward_*"));
}

BOOST_AUTO_TEST_CASE(tasks_points_and_forbidden_calls_are_read) {
    std::string path = write_temp(
        "# comment\ntask 4.3 4 student::partition\ntask 4.2 3 student::min_cut student::Cut\n"
        "forbid 4.2,4.3 kiln::jit::aot::min_cut : the reference\nforbid * dlsym : by name\n");
    Manifest m = load_manifest(path);
    std::remove(path.c_str());
    BOOST_TEST_REQUIRE(m.tasks.size() == 2u);
    BOOST_TEST(m.tasks[1].id == "4.2");
    BOOST_TEST(m.tasks[1].points == 3);
    BOOST_TEST(m.tasks[1].functions.size() == 2u);
    BOOST_TEST_REQUIRE(m.forbidden.size() == 2u);
    BOOST_TEST((m.forbidden[0].tasks == std::vector<std::string>{"4.2", "4.3"}));
    BOOST_TEST(m.forbidden[0].why == "the reference");
    BOOST_TEST(m.forbidden[1].tasks.front() == "*");
}

BOOST_AUTO_TEST_CASE(a_bad_line_names_the_file_and_line) {
    for (std::string bad : {"task 4.3 x student::partition\n", "task 4.3 4\n",
                            "task 4.3 4 student::p\nforbid 9.9 kiln::f : why\n",
                            "task 4.3 4 student::p\nforbid 4.3 kiln::f why\n", "grade 4.3\n"}) {
        std::string path = write_temp(bad);
        try {
            load_manifest(path);
            BOOST_ERROR("accepted: " << bad);
        } catch (const std::runtime_error& e) {
            BOOST_TEST(std::string(e.what()).find(path + ":") != std::string::npos, e.what());
        }
        std::remove(path.c_str());
    }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(grader_results_json)

BOOST_AUTO_TEST_CASE(strings_are_escaped_and_the_score_is_the_sum) {
    std::ostringstream out;
    write_results_json({{"task 1.1", 3, 3, "a \"quoted\"\nline\twith a tab", true},
                        {"task 1.2", 0, 2, "back\\slash", false}},
                       "total", "visible", out);
    std::string json = out.str();
    BOOST_TEST(json.find("\"score\": 3,") != std::string::npos, json);
    BOOST_TEST(json.find(R"(a \"quoted\"\nline\u0009with a tab)") != std::string::npos, json);
    BOOST_TEST(json.find(R"(back\\slash)") != std::string::npos, json);
    BOOST_TEST(json.find("\"max_score\": 2") != std::string::npos, json);
    BOOST_TEST(json.find("\"visibility\": \"visible\"") != std::string::npos, json);
}

BOOST_AUTO_TEST_SUITE_END()
