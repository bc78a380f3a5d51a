// The inductor's pipeline (codegen/pipeline.h): each stage runs once per graph, in order;
// KILN_LOGS=passes prints each stage's output and time; KILN_DEBUG_DIR gets one file per
// stage; fuse_epilogues is a stage of its own, not part of schedule.
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "codegen/pipeline.h"
#include "jit/log.h"
#include "kiln.h"
#include "tests/codegen/lgraph_builder.h"
#include "tests/scoped_env.h"

using namespace kiln;
using namespace kiln::codegen;
namespace fs = std::filesystem;

namespace {

using kiln_test::ScopedEnv;
using testing::GraphBuilder;

// A linear layer with bias and relu: the matmul's reader becomes its epilogue in stage 3.
Tensor linear_relu(Tensor x, Tensor w, Tensor bias) { return relu(matmul(x, w) + bias); }

const std::vector<std::string> all_stages = {"0_lowered",   "1_conv_fused", "2_schedule",
                                             "3_epilogues", "4_emit",       "5_build"};

std::vector<std::string> stage_names(const CompiledGraphInfo& info) {
    std::vector<std::string> names;
    for (const StageTime& s : info.stages) names.push_back(s.stage);
    return names;
}

// Compiles linear_relu with the inductor and runs it once; returns its graph's info.
CompiledGraphInfo compile_linear_relu() {
    jit::reset();  // a fresh compile each time, not the entry of an earlier test
    auto f = compile(linear_relu, {.arg_names = {"x", "w", "bias"}});
    Tensor x = randn({32, 16}), w = randn({16, 24}), bias = randn({24});
    BOOST_TEST(allclose(f(x, w, bias), linear_relu(x, w, bias), 1e-5, 1e-5));
    return last_compiled();
}

size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

std::string read_text(const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

struct CerrCapture {
    std::ostringstream out;
    std::streambuf* old = std::cerr.rdbuf(out.rdbuf());
    ~CerrCapture() { std::cerr.rdbuf(old); }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(pipeline)

BOOST_AUTO_TEST_CASE(each_stage_runs_once_in_order_and_is_timed) {
    CompiledGraphInfo info = compile_linear_relu();
    BOOST_REQUIRE(!info.interpreted);
    BOOST_TEST(stage_names(info) == all_stages, info.schedule);
    for (const StageTime& s : info.stages) BOOST_TEST(s.ms >= 0.0, s.stage);
}

BOOST_AUTO_TEST_CASE(kiln_logs_passes_prints_each_stage_its_output_and_time) {
    std::string log;
    CompiledGraphInfo info;
    {
        ScopedEnv logs("KILN_LOGS", "passes");
        log_reload();
        CerrCapture capture;
        info = compile_linear_relu();
        log = capture.out.str();
    }
    log_reload();
    std::string head = "[kiln:passes] inductor graph " + std::to_string(info.id) + ", stage ";
    size_t last = 0;
    for (const std::string& stage : all_stages) {  // each once, in order, with its time
        BOOST_TEST(count(log, head + stage + ": ") == 1u, stage << "\n" << log);
        size_t at = log.find(head + stage + ": ");
        BOOST_TEST((at != std::string::npos && at >= last), stage);
        BOOST_TEST(log.find(" ms (", at) != std::string::npos, stage);
        last = at == std::string::npos ? last : at;
    }
    // Each stage's output follows its line: the lowered matmul, the schedule before the
    // epilogue (a blas kernel, then a pointwise one) and after it (one step), the source.
    auto section = [&](const std::string& stage) {
        size_t at = log.find(head + stage + ": ");
        size_t end = log.find("[kiln:passes]", at + 1);
        return at == std::string::npos
                   ? std::string()
                   : log.substr(at, end == std::string::npos ? std::string::npos : end - at);
    };
    BOOST_TEST(section("0_lowered").find("= matmul(") != std::string::npos, section("0_lowered"));
    BOOST_TEST(section("2_schedule").find("blas+epilogue") == std::string::npos,
               section("2_schedule"));
    BOOST_TEST(section("2_schedule").find("pointwise") != std::string::npos, section("2_schedule"));
    BOOST_TEST(section("3_epilogues").find("blas+epilogue") != std::string::npos,
               section("3_epilogues"));
    BOOST_TEST(section("3_epilogues").find(info.schedule) != std::string::npos,
               section("3_epilogues"));
    BOOST_TEST(section("4_emit").find(info.source) != std::string::npos);
}

BOOST_AUTO_TEST_CASE(without_kiln_logs_passes_nothing_is_printed) {
    ScopedEnv logs("KILN_LOGS", "");
    log_reload();
    CerrCapture capture;
    compile_linear_relu();
    BOOST_TEST(capture.out.str().find("[kiln:passes]") == std::string::npos, capture.out.str());
}

BOOST_AUTO_TEST_CASE(kiln_debug_dir_gets_one_file_per_stage) {
    fs::path dir = fs::temp_directory_path() / ("kiln-pipeline-debug-" + std::to_string(getpid()));
    fs::remove_all(dir);
    CompiledGraphInfo info;
    {
        ScopedEnv debug("KILN_DEBUG_DIR", dir.string());
        info = compile_linear_relu();
    }
    std::string n = "graph_" + std::to_string(info.id);
    BOOST_TEST(read_text(dir / (n + ".txt")) == info.graph);  // the pipeline's input
    std::string lowered = read_text(dir / (n + ".0_lowered.txt"));
    BOOST_TEST(lowered.find("inputs: x_0 float32[32, 16]") != std::string::npos, lowered);
    BOOST_TEST(lowered.find("= relu(") != std::string::npos, lowered);
    BOOST_TEST(fs::exists(dir / (n + ".1_conv_fused.txt")));
    std::string scheduled = read_text(dir / (n + ".2_schedule.txt"));
    BOOST_TEST(scheduled.find("blas") != std::string::npos, scheduled);
    BOOST_TEST(scheduled.find("epilogue") == std::string::npos, scheduled);
    BOOST_TEST(read_text(dir / (n + ".3_epilogues.txt")) == info.schedule);
    BOOST_TEST(read_text(dir / ("output_code_" + std::to_string(info.id) + ".cpp")) == info.source);
    BOOST_TEST(fs::exists(dir / (n + ".5_build.txt")));
    fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_graph_with_nothing_to_generate_stops_after_the_schedule) {
    auto f = compile([](Tensor x, Tensor w) { return matmul(x, w); });
    Tensor x = randn({8, 4}), w = randn({4, 3});
    BOOST_TEST(allclose(f(x, w), matmul(x, w), 1e-5, 1e-6));
    CompiledGraphInfo info = last_compiled();
    BOOST_TEST(info.interpreted);
    std::vector<std::string> want(all_stages.begin(), all_stages.begin() + 4);
    BOOST_TEST(stage_names(info) == want);
}

BOOST_AUTO_TEST_CASE(schedule_leaves_epilogues_to_fuse_epilogues) {
    GraphBuilder b;
    int x = b.input({16, 8}, "x"), w = b.input({8, 4}, "w"), bias = b.input({4}, "bias");
    b.output(b.unary(OpId::relu, b.binary(OpId::add, b.matmul(x, w), bias)));
    auto epilogues = [](const Schedule& s) {
        int n = 0;
        for (const Kernel& k : s.kernels) n += k.epilogue_of >= 0;
        return n;
    };
    Schedule s = schedule(b.graph);
    BOOST_TEST(epilogues(s) == 0);
    BOOST_TEST(epilogues(fuse_epilogues(s)) == 1);
    ScopedEnv off("KILN_EPILOGUE", "0");  // the switch is the stage's
    BOOST_TEST(epilogues(fuse_epilogues(s)) == 0);
}

BOOST_AUTO_TEST_SUITE_END()
