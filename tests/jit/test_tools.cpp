// Seeing inside: print_tabular, DOT, KILN_LOGS, KILN_DEBUG_DIR; export and its text format.
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "jit/explain.h"
#include "jit/export.h"
#include "jit/log.h"

using namespace kiln;

namespace {

Tensor bar(Tensor a, Tensor b) {
    Tensor x = a / (abs(a) + 1);
    if (b.sum() < 0) b = b * -1;
    return x * b;
}

Tensor mlp_like(Tensor x, Tensor w) { return relu(matmul(x, w)).sum({1}) * 0.5 + 1; }

// Captures std::cerr for a scope.
struct CerrCapture {
    std::ostringstream out;
    std::streambuf* old = std::cerr.rdbuf(out.rdbuf());
    ~CerrCapture() { std::cerr.rdbuf(old); }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(jit_tools)

BOOST_AUTO_TEST_CASE(print_tabular_like_fx) {
    jit::reset();
    std::string table, dot;
    auto f = compile(bar, {.backend = jit::BackendFn([&](const jit::Graph& g, std::span<const Tensor>) -> jit::CompiledFn {
                               if (table.empty()) table = g.tabular(), dot = g.to_dot();
                               return [&g](std::span<const Tensor> in) { return jit::interpret(g, in); };
                           }),
                           .arg_names = {"a", "b"}});
    f(randn({10}), randn({10}));
    BOOST_TEST_MESSAGE(table);
    BOOST_CHECK(table.rfind("opcode", 0) == 0);
    BOOST_CHECK(table.find("placeholder    a ") != std::string::npos);
    BOOST_CHECK(table.find("call_function  abs ") != std::string::npos);
    BOOST_CHECK(table.find("(abs, 1)") != std::string::npos);
    BOOST_CHECK(table.find("output") != std::string::npos);
    BOOST_CHECK(dot.rfind("digraph", 0) == 0);
    BOOST_CHECK(dot.find("->") != std::string::npos);
}

// KILN_LOGS=compile says where a first call's time goes: the whole first call, and under the
// inductor each graph's kernels (from the kernel cache or the compiler) and any wait for a
// background build. A source no test compiled before (a fresh constant) makes the compiler run.
BOOST_AUTO_TEST_CASE(kiln_logs_compile_times_the_first_call_and_each_build) {
    jit::reset();
    setenv("KILN_LOGS", "compile", 1);
    log_reload();
    std::string log;
    const double fresh = 1.0 + double(std::chrono::steady_clock::now().time_since_epoch().count() % 1000003) / 1e7;
    {
        CerrCapture cap;
        auto f = compile([fresh](Tensor a) { return (a * fresh).sin() * 2.0; }, {.backend = "inductor", .name = "timed"});
        Tensor x = randn({10}).requires_grad_();
        f(x).sum().backward();
        f(x);  // not a first call: nothing more
        log = cap.out.str();
    }
    unsetenv("KILN_LOGS");
    log_reload();
    BOOST_TEST_MESSAGE(log);
    BOOST_CHECK(log.find("[kiln:compile] timed entry 1: first call ") != std::string::npos);
    BOOST_CHECK(log.find("[kiln:compile] the C++ compiler built ") != std::string::npos);
    BOOST_CHECK(log.find(" nodes, kernels ready in ") != std::string::npos);
    BOOST_CHECK(log.find("first call", log.find("first call") + 1) == std::string::npos);
}

// The per-stage totals that KILN_LOGS=compile prints at exit: a compiled function's first
// call is split into tracing, planning, compiling (a fresh source: the compiler runs),
// loading and the first run of each compiled graph; later calls add nothing.
BOOST_AUTO_TEST_CASE(first_call_stage_totals_split_the_first_call) {
    jit::reset();
    reset_stage_totals();
    const double fresh =
        2.0 + double(std::chrono::steady_clock::now().time_since_epoch().count() % 1000003) / 1e7;
    auto f = compile([fresh](Tensor a) { return (a * fresh).relu() + 1.0; },
                     {.backend = "inductor", .name = "staged"});
    Tensor x = randn({64});
    auto start = std::chrono::steady_clock::now();
    f(x);
    double first_call =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    f(x);  // the compiled graph's first run, if the first call ran eagerly while tracing
    StageTotals t = stage_totals();
    BOOST_TEST_MESSAGE("first call " << first_call << " s; " << stage_totals_text());
    for (Stage s :
         {Stage::tracing, Stage::planning, Stage::compiling, Stage::loading, Stage::first_run})
        BOOST_TEST_CONTEXT(stage_name(s)) {
            BOOST_TEST(t.events[int(s)] >= 1);
            BOOST_TEST(t.seconds[int(s)] > 0.0);
        }
    double in_first_call = t.seconds[int(Stage::tracing)] + t.seconds[int(Stage::planning)] +
                           t.seconds[int(Stage::compiling)] + t.seconds[int(Stage::loading)];
    BOOST_TEST(in_first_call <= first_call + t.seconds[int(Stage::first_run)] + 1e-3);
    f(x);
    f(x);
    StageTotals later = stage_totals();
    BOOST_TEST(later.events[int(Stage::first_run)] == t.events[int(Stage::first_run)]);
    BOOST_TEST(later.events[int(Stage::tracing)] == t.events[int(Stage::tracing)]);
    std::string text = stage_totals_text();
    for (const char* part :
         {"tracing ", "planning ", "compiling ", "loading ", "first run ", "total "})
        BOOST_TEST_CONTEXT(part) { BOOST_TEST(text.find(part) != std::string::npos); }
}

BOOST_AUTO_TEST_CASE(kiln_logs_prints_graphs_guards_breaks_recompiles) {
    jit::reset();
    setenv("KILN_LOGS", "graphs,guards,breaks,recompiles", 1);
    log_reload();
    std::string log;
    {
        CerrCapture cap;
        auto f = compile(bar, {.backend = "eager", .dynamic = jit::Dynamic::never, .arg_names = {"a", "b"}});
        f(randn({10}), randn({10}));
        f(randn({12}), randn({12}));
        log = cap.out.str();
    }
    unsetenv("KILN_LOGS");
    log_reload();
    BOOST_CHECK(log.find("[kiln:graphs]") != std::string::npos);
    BOOST_CHECK(log.find("[kiln:guards]") != std::string::npos);
    BOOST_CHECK(log.find("a: float32[10] cpu") != std::string::npos);
    BOOST_CHECK(log.find("[kiln:breaks]") != std::string::npos);
    BOOST_CHECK(log.find("[kiln:recompiles]") != std::string::npos);
    BOOST_CHECK(log.find("size mismatch at a.size(0): expected 10, got 12") != std::string::npos);
    BOOST_CHECK(!log_enabled("graphs"));
}

BOOST_AUTO_TEST_CASE(explain_shows_what_a_backend_reporter_says) {
    jit::reset();
    auto compiled_uid = std::make_shared<uint64_t>(0);  // the reporter outlives this test
    auto backend = jit::BackendFn(
        [compiled_uid](const jit::Graph& g, std::span<const Tensor>) -> jit::CompiledFn {
            *compiled_uid = g.uid();
            return [&g](std::span<const Tensor> in) { return jit::interpret(g, in); };
        });
    jit::register_backend_reporter([compiled_uid](const jit::Graph& g) {
        jit::BackendReport r;
        if (g.uid() == *compiled_uid)
            r.notes = {"node x: kept eager"}, r.choices = {"eager, measured"};
        return r;
    });
    auto f = compile(mlp_like, {.backend = backend});
    f(randn({4, 3}), randn({3, 5}));
    std::ostringstream os;
    os << jit::explain_compiled(f);
    BOOST_CHECK(os.str().find("Not fused (the backend runs these nodes' eager kernels):\n  Graph "
                              "1: node x: kept eager\n") != std::string::npos);
    BOOST_CHECK(os.str().find("measured on the first calls):\n  Graph 1: eager, measured\n") !=
                std::string::npos);
    *compiled_uid = 0;
    std::ostringstream other;
    other << jit::explain_compiled(f);  // the reporter says nothing about other graphs
    BOOST_CHECK(other.str().find("kept eager") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(kiln_debug_dir_dumps_graphs) {
    jit::reset();
    auto dir = std::filesystem::temp_directory_path() / ("kiln-jit-debug-" + std::to_string(::getpid()));
    setenv("KILN_DEBUG_DIR", dir.c_str(), 1);
    auto f = compile(bar, {.backend = "eager", .name = "bar"});
    f(randn({10}), randn({10}));
    unsetenv("KILN_DEBUG_DIR");
    int txt = 0, dot = 0;
    for (const auto& p : std::filesystem::directory_iterator(dir)) (p.path().extension() == ".dot" ? dot : txt)++;
    BOOST_CHECK_EQUAL(txt, 2);
    BOOST_CHECK_EQUAL(dot, 2);
    std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(export_saves_loads_and_runs) {
    Tensor x = randn({4, 3}), w = randn({3, 5});
    jit::ExportedProgram p = jit::export_graph(mlp_like, x, w);
    auto path = std::filesystem::temp_directory_path() / ("kiln-export-" + std::to_string(::getpid()) + ".kg");
    p.save(path.string());
    jit::ExportedProgram loaded = jit::ExportedProgram::load(path.string());
    std::filesystem::remove(path);
    Tensor x2 = randn({4, 3}), w2 = randn({3, 5});
    BOOST_CHECK(allclose(loaded.run({x2, w2}).at(0), mlp_like(x2, w2)));
    BOOST_CHECK_EQUAL(loaded.to_text(), p.to_text());
    // Lifted constants travel in the file.
    Tensor c = randn({5});
    jit::ExportedProgram withc = jit::export_graph([&c](Tensor x) { return x * c; }, randn({5}));
    jit::ExportedProgram back = jit::ExportedProgram::from_text(withc.to_text());
    Tensor x3 = randn({5});
    BOOST_CHECK(allclose(back.run({x3}).at(0), x3 * c));
}

BOOST_AUTO_TEST_CASE(export_refuses_a_graph_break_and_names_it) {
    BOOST_CHECK_EXCEPTION(jit::export_graph(bar, randn({10}), randn({10})), Error, [](const Error& e) {
        std::string m = e.what();
        return m.find("graph break") != std::string::npos && m.find("operator bool") != std::string::npos;
    });
}

BOOST_AUTO_TEST_CASE(unknown_backend_and_mode_are_errors) {
    BOOST_CHECK_THROW(compile(bar, {.backend = "nope"}), Error);
    BOOST_CHECK_THROW(compile(bar, {.mode = "fastest"}), Error);
    jit::register_backend("my_eager", [](const jit::Graph& g, std::span<const Tensor>) -> jit::CompiledFn {
        return [&g](std::span<const Tensor> in) { return jit::interpret(g, in); };
    });
    Tensor a = randn({3}), b = randn({3});
    BOOST_CHECK(allclose(compile(bar, {.backend = "my_eager"})(a, b), bar(a, b)));
}

BOOST_AUTO_TEST_SUITE_END()
