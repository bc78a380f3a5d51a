// The "inductor" backend end to end: compile() -> AOT halves -> lowered, fused, generated,
// built, cached kernels (codegen/inductor.h). Each test compares with eager.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "codegen/toolchain.h"
#include "kiln.h"
#include "tests/scoped_env.h"

using namespace kiln;
using namespace kiln::codegen;
namespace fs = std::filesystem;

namespace {

using kiln_test::ScopedEnv;

Tensor seed_fn(Tensor x, Tensor y) { return cos(x) + sin(y); }

int schedule_lines(const CompiledGraphInfo& info) {
    std::istringstream in(info.schedule);
    int n = 0;
    for (std::string line; std::getline(in, line);) n += !line.empty();
    return n;
}

fs::path fresh_dir(const std::string& name) {
    fs::path dir = fs::temp_directory_path() / ("kiln-inductor-" + name + "-" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

std::string read_text(const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

int64_t library_builds(const ToolchainStats& s) { return s.compiler_calls - s.pch_builds + s.disk_hits + s.memory_hits; }

Tensor softmax_rows(Tensor x) { return softmax(x, -1); }

Tensor layernorm_rows(Tensor x) {
    Tensor mu = mean(x, {-1}, true);
    Tensor centered = x - mu;
    Tensor var = mean(centered * centered, {-1}, true);
    return centered * rsqrt(var + 1e-5);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(inductor)

BOOST_AUTO_TEST_CASE(seed_cos_plus_sin_is_one_kernel_and_dumps_its_source) {
    fs::path dir = fresh_dir("debug");
    ScopedEnv debug("KILN_DEBUG_DIR", dir.string());
    auto f = compile(seed_fn);  // the default backend: inductor
    Tensor x = randn({1000}), y = randn({1000});
    Tensor out = f(x, y);
    BOOST_TEST(allclose(out, seed_fn(x, y), 1e-5, 1e-6));
    CompiledGraphInfo info = last_compiled();
    BOOST_TEST(!info.interpreted);
    BOOST_TEST(info.generated_kernels == 1);
    BOOST_TEST(schedule_lines(info) == 1);
    std::string source = read_text(dir / ("output_code_" + std::to_string(info.id) + ".cpp"));
    BOOST_TEST(source == info.source);
    BOOST_TEST(source.find("cos(") != std::string::npos);
    BOOST_TEST(source.find("sin(") != std::string::npos);
    BOOST_TEST(read_text(dir / ("graph_" + std::to_string(info.id) + ".3_epilogues.txt")) ==
               info.schedule);
    BOOST_TEST(fs::exists(dir / ("graph_" + std::to_string(info.id) + ".txt")));
    InductorStats before = inductor_stats();
    BOOST_TEST(allclose(f(x, y), seed_fn(x, y), 1e-5, 1e-6));
    BOOST_TEST(inductor_stats().calls_compiled == before.calls_compiled + 1);
    fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(nodes_left_to_eager_kernels_are_reported_with_their_reason) {
    // gather has no generated form: it runs its eager kernel, and says why in the schedule, the
    // generated source (:code) and explain. A sum over the leading dim and an int64 sum are
    // generated (they fell back before reductions over any dims and of any dtype).
    auto fn = [](const Tensor& x, const Tensor& idx) {
        Tensor g = gather(exp(x), 1, idx);
        Tensor cols = sin(x).sum({0});
        Tensor ints = (x * 4.0).to(int64).sum().to(float32);
        return g.sum() + cols.sum() + ints;
    };
    auto f = compile(fn);
    Tensor x = randn({4, 8}), idx = randint(0, 8, {4, 3});
    BOOST_TEST(allclose(f(x, idx), fn(x, idx), 1e-5, 1e-5));
    CompiledGraphInfo info = last_compiled();
    BOOST_TEST(!info.interpreted);
    std::string all;
    for (const std::string& line : info.fallbacks) all += line + "\n";
    BOOST_TEST(info.fallbacks.size() == 1u, all);
    BOOST_TEST(all.find("gather has no generated form") != std::string::npos, all);
    BOOST_TEST(info.schedule.find("(gather has no generated form") != std::string::npos,
               info.schedule);
    BOOST_TEST(
        info.source.find("runs on the host (eager dispatcher): gather has no generated form") !=
        std::string::npos);
    std::ostringstream explained;
    explained << jit::explain_compiled(f);
    BOOST_TEST(explained.str().find("Not fused (the backend runs these nodes' eager kernels):") != std::string::npos, explained.str());
    BOOST_TEST(explained.str().find("gather has no generated form") != std::string::npos);
    // A graph with nothing left to eager kernels reports nothing.
    auto g = compile(seed_fn);
    (void)g(randn({16}), randn({16}));
    std::ostringstream clean;
    clean << jit::explain_compiled(g);
    BOOST_TEST(clean.str().find("Not fused") == std::string::npos, clean.str());
}

BOOST_AUTO_TEST_CASE(softmax_and_layernorm_over_rows_are_one_kernel_each) {
    Tensor x = randn({64, 100}) * 3.0;
    auto sm = compile(softmax_rows);
    BOOST_TEST(allclose(sm(x), softmax_rows(x), 1e-5, 1e-6));
    CompiledGraphInfo info = last_compiled();
    BOOST_TEST(info.generated_kernels == 1);
    BOOST_TEST(schedule_lines(info) == 1, info.schedule);
    auto ln = compile(layernorm_rows);
    BOOST_TEST(allclose(ln(x), layernorm_rows(x), 1e-4, 1e-5));
    info = last_compiled();
    BOOST_TEST(info.generated_kernels == 1);
    BOOST_TEST(schedule_lines(info) == 1, info.schedule);
}

BOOST_AUTO_TEST_CASE(mlp_forward_and_backward_match_eager) {
    manual_seed(7);
    auto model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(20, 32), std::make_shared<nn::ReLU>(),
                                                  std::make_shared<nn::Linear>(32, 10));
    auto loss_fn = [&](Tensor x, Tensor targets) { return nn::F::cross_entropy(model->forward(x), targets); };
    auto f = compile(loss_fn);
    Tensor x = randn({16, 20});
    Tensor targets = randint(0, 10, {16});
    InductorStats before = inductor_stats();
    Tensor loss = f(x, targets);
    loss.backward();
    std::vector<Tensor> compiled_grads;
    for (auto& [name, p] : model->named_parameters()) compiled_grads.push_back(p.grad().clone()), p.zero_grad();
    Tensor want = loss_fn(x, targets);
    want.backward();
    BOOST_TEST(allclose(loss, want, 1e-5, 1e-6));
    size_t i = 0;
    for (auto& [name, p] : model->named_parameters()) BOOST_TEST(allclose(compiled_grads[i++], p.grad(), 1e-4, 1e-6), name);
    InductorStats after = inductor_stats();
    BOOST_TEST(after.graphs - before.graphs == 2);  // the forward and the backward half
    BOOST_TEST(after.graphs_interpreted == before.graphs_interpreted);
    BOOST_TEST(after.calls_compiled - before.calls_compiled == 2);
    CompiledGraphInfo backward = last_compiled();
    BOOST_TEST(!backward.interpreted);
    BOOST_TEST(backward.generated_kernels >= 1);
}

// A transposed 2-D matmul result is the GEMM of the transposed operands (codegen/lower_graph.h,
// transpose_gemm_outputs): the compiled graph returns it contiguous, as a linear layer's weight
// gradient in an AOT backward (the strided one was cloned by the autograd engine, then
// read strided by the optimizer), and batched, as attention's key gradient. Values equal
// eager's; through a reshape too.
BOOST_AUTO_TEST_CASE(a_transposed_matmul_result_comes_out_contiguous) {
    ScopedEnv always_kernels("KILN_CHOOSE", "0");
    auto fn = [](Tensor x, Tensor g, Tensor q, Tensor k) {
        Tensor wgrad = matmul(x.t(), g).t();  // [10, 20]
        Tensor again =
            matmul(g.t(), x).reshape({10, 20}).t().t();  // a transpose of a transpose stays
        Tensor batched =
            matmul(q.permute({0, 2, 1}), k).permute({0, 2, 1});  // [3, 6, 8], as a key gradient
        return std::vector<Tensor>{wgrad, again.t(), x * 2.0, batched};
    };
    auto f = compile(fn);
    Tensor x = randn({16, 20}), g = randn({16, 10}), q = randn({3, 16, 8}), k = randn({3, 16, 6});
    std::vector<Tensor> got = f(x, g, q, k), want = fn(x, g, q, k);
    BOOST_TEST(!last_compiled().interpreted);
    for (size_t i = 0; i < want.size(); ++i) {
        BOOST_TEST(got[i].shape() == want[i].shape());
        BOOST_TEST(allclose(got[i], want[i], 1e-5, 1e-6), i);
    }
    BOOST_TEST(got[0].is_contiguous(), last_compiled().schedule);
    BOOST_TEST(got[3].is_contiguous(), last_compiled().schedule);
    BOOST_TEST(
        (!want[0].is_contiguous() && !want[3].is_contiguous()));  // eager's are strided views
}

// Reshapes of strided views that strides express (codegen/schedule.cpp's strided_regroup)
// are read in place by the generated kernels: values equal eager's, forward and backward, and
// no reshape is left to an eager kernel.
BOOST_AUTO_TEST_CASE(reshapes_of_strided_views_compile_to_index_math_and_equal_eager) {
    ScopedEnv always_kernels("KILN_CHOOSE", "0");
    auto fn = [](Tensor x, Tensor y, Tensor z) {
        Tensor heads = x.reshape({2, 8, 3, 2, 16});
        Tensor k = heads.select(2, 1) * 2.0;                           // [2, 8, 2, 16]
        Tensor v = heads.select(2, 2).transpose(1, 2).exp();            // [2, 2, 8, 16]
        Tensor split = y.narrow(1, 0, 6).reshape({4, 2, 3}).sin();      // a slice split in two
        Tensor merged = z.narrow(2, 1, 4).reshape({24, 4}).softmax(1);  // two dims that chain
        Tensor loss = k.sum() + v.sum() + split.sum() + (merged * merged).sum();
        return std::vector<Tensor>{k, v, split, merged, loss};
    };
    auto f = compile(fn);
    Tensor x = randn({2, 8, 96}).requires_grad_(), y = randn({4, 12}).requires_grad_(),
           z = randn({4, 6, 5}).requires_grad_();
    std::vector<Tensor> got = f(x, y, z);
    BOOST_TEST(!last_compiled().interpreted);
    BOOST_TEST(last_compiled().schedule.find("a view the kernels cannot index") == std::string::npos,
               last_compiled().schedule);
    got.back().backward();
    std::vector<Tensor> grads{x.grad().clone(), y.grad().clone(), z.grad().clone()};
    for (Tensor t : {x, y, z}) t.zero_grad();
    std::vector<Tensor> want = fn(x, y, z);
    want.back().backward();
    for (size_t i = 0; i < want.size(); ++i) BOOST_TEST(allclose(got[i], want[i], 1e-5, 1e-6), i);
    BOOST_TEST(allclose(grads[0], x.grad(), 1e-5, 1e-6));
    BOOST_TEST(allclose(grads[1], y.grad(), 1e-5, 1e-6));
    BOOST_TEST(allclose(grads[2], z.grad(), 1e-5, 1e-6));
}

// The backward of chunk (and of select at every index) is one cat in the compiled graph
// (lower_graph.h's slice_backwards_to_cat); gradients equal eager's, with a narrow that leaves
// a gap beside it (a slice_backward that stays).
BOOST_AUTO_TEST_CASE(the_gradient_of_a_chunked_tensor_is_one_cat_and_equals_eager) {
    ScopedEnv always_kernels("KILN_CHOOSE", "0");
    auto fn = [](Tensor x, Tensor y) {
        std::vector<Tensor> parts = chunk(x, 3, -1);
        Tensor heads = y.reshape({4, 3, 5}), gap = y.narrow(1, 2, 6);
        Tensor loss = (parts[0].sin() * parts[1] + parts[2].exp()).sum() +
                      (heads.select(1, 0) * heads.select(1, 1) - heads.select(1, 2).cos()).sum() +
                      (gap * gap).sum();
        return std::vector<Tensor>{loss};
    };
    auto f = compile(fn);
    Tensor x = randn({4, 9}).requires_grad_(), y = randn({4, 15}).requires_grad_();
    f(x, y)[0].backward();
    Tensor gx = x.grad().clone(), gy = y.grad().clone();
    std::string schedules = last_compiled().schedule;
    x.zero_grad(), y.zero_grad();
    fn(x, y)[0].backward();
    BOOST_TEST(allclose(gx, x.grad(), 1e-5, 1e-6));
    BOOST_TEST(allclose(gy, y.grad(), 1e-5, 1e-6));
    // The backward graph: two cats (chunk's, select's), one slice_backward (the narrow's).
    auto count = [&](const std::string& what) {
        size_t n = 0;
        for (size_t at = schedules.find(what); at != std::string::npos; at = schedules.find(what, at + 1)) ++n;
        return n;
    };
    BOOST_TEST(count("cat_") >= 2u, schedules);
    BOOST_TEST(count("slice_backward_") == 1u, schedules);
}

// The two view rewrites together with in-place ops, a graph break, dynamic shapes and
// backward: a clone changed in place, chunked (its gradient one cat), a chunk's last dim split
// (a reshape of a strided view: index math at a static size, an eager reshape once the batch
// is symbolic), and a data-dependent branch between two graphs. Values and gradients equal
// eager's at the first size and at the next two (the recompiled, symbolic entry).
BOOST_AUTO_TEST_CASE(view_rewrites_with_inplace_breaks_dynamic_shapes_and_backward_equal_eager) {
    ScopedEnv always_kernels("KILN_CHOOSE", "0");
    auto fn = [](Tensor x, Tensor w) {
        Tensor y = x.clone();
        y.mul_(2.0);
        std::vector<Tensor> parts = chunk(y, 2, -1);                // [n, 6] each, strided
        Tensor split = parts[0].reshape({x.size(0), 2, 3}).sin();  // a strided view's reshape
        Tensor z = split.reshape({x.size(0), 6}) * parts[1];
        if (z.sum().item<float>() > 0) z = z * w;                   // a graph break
        else z = z - w;
        return std::vector<Tensor>{(z * z).sum()};
    };
    auto f = compile(fn);
    for (int64_t n : {4, 6, 9}) {
        manual_seed(n);
        Tensor x = randn({n, 12}).requires_grad_(), w = randn({6}).requires_grad_();
        f(x, w)[0].backward();
        Tensor gx = x.grad().clone(), gw = w.grad().clone();
        Tensor got = f(x, w)[0].detach();
        x.zero_grad(), w.zero_grad();
        Tensor want = fn(x, w)[0];
        want.backward();
        BOOST_TEST_CONTEXT("batch " << n) {
            BOOST_TEST(allclose(got, want.detach(), 1e-5, 1e-5));
            BOOST_TEST(allclose(gx, x.grad(), 1e-5, 1e-6));
            BOOST_TEST(allclose(gw, w.grad(), 1e-5, 1e-6));
        }
    }
}

// Cross-entropy's int64 target checks (ignore_index) are per-row values of log_softmax's row
// kernel: scalar code between the passes, so the passes along the row stay vector code (the
// whole kernel was scalar, calling expf per element: GPT's [1024, 1024] logits). Values equal
// eager's.
BOOST_AUTO_TEST_CASE(int64_per_row_values_leave_a_row_kernels_passes_vectorized) {
    ScopedEnv always_kernels("KILN_CHOOSE", "0");
    auto fn = [](Tensor logits, Tensor targets) { return nn::F::cross_entropy(logits, targets); };
    auto f = compile(fn);
    Tensor logits = randn({64, 100}) * 3.0, targets = randint(0, 100, {64});
    BOOST_TEST(allclose(f(logits, targets), fn(logits, targets), 1e-5, 1e-6));
    CompiledGraphInfo info = last_compiled();
    BOOST_TEST(!info.interpreted);
    const std::string row_kernel = "row over 64 rows of 100";
    size_t at = info.source.find(row_kernel);
    BOOST_REQUIRE_MESSAGE(at != std::string::npos, info.source);
    std::string line = info.source.substr(at, info.source.find('\n', at) - at);
    BOOST_TEST(line.find("scalar") == std::string::npos, line);
}

// A training step's halves go to the compiler together at the first call (the backward right
// after the forward, so the numbering stays forward first) and build in the background at
// once: both are built before any backward runs.
BOOST_AUTO_TEST_CASE(a_training_steps_halves_build_together_at_the_first_call) {
    auto fn = [](Tensor x, Tensor w) { return (tanh(x * w) * 2.0).sum(); };
    auto f = compile(fn);
    Tensor x = randn({64}), w = randn({64}, {.requires_grad = true});
    InductorStats i0 = inductor_stats();
    Tensor loss = f(x, w);
    BOOST_TEST(inductor_stats().graphs - i0.graphs == 2);
    wait_for_async_compiles();
    BOOST_TEST(inductor_stats().builds - i0.builds == 2, "both halves built before any backward");
    CompiledGraphInfo backward = last_compiled();
    BOOST_TEST(backward.graph.find("tangent") != std::string::npos, "the backward is numbered after the forward");
    loss.backward();
    Tensor v = w.detach().requires_grad_();
    Tensor want = fn(x, v);
    want.backward();
    BOOST_TEST(allclose(loss, want, 1e-5, 1e-6));
    BOOST_TEST(allclose(w.grad(), v.grad(), 1e-5, 1e-6));
    BOOST_TEST(inductor_stats().calls_compiled - i0.calls_compiled == 2);
}

// The JIT specializes the first call ([8]), recompiles once with s0 at [10], and that
// entry's kernel then serves [1000] with no build at all.
BOOST_AUTO_TEST_CASE(one_kernel_serves_sizes_8_10_and_1000) {
    auto fn = [](Tensor x) { return exp(tanh(x)) * 3.0 - x; };
    auto f = compile(fn);
    ToolchainStats t0 = toolchain_stats();
    InductorStats i0 = inductor_stats();
    for (int64_t n : {8, 10}) {
        Tensor x = randn({n});
        BOOST_TEST(allclose(f(x), fn(x), 1e-5, 1e-6));
    }
    BOOST_TEST(last_compiled().graph.find("s0") != std::string::npos);
    ToolchainStats t1 = toolchain_stats();
    InductorStats i1 = inductor_stats();
    BOOST_TEST(library_builds(t1) - library_builds(t0) == 2);  // static [8], then symbolic
    BOOST_TEST(i1.builds - i0.builds == 2);
    Tensor big = randn({1000});
    BOOST_TEST(allclose(f(big), fn(big), 1e-5, 1e-6));
    BOOST_TEST(library_builds(toolchain_stats()) == library_builds(t1));
    BOOST_TEST(inductor_stats().builds == i1.builds);
    BOOST_TEST(inductor_stats().calls_compiled == i1.calls_compiled + 1);
}

// Run as a child process by the next test: prints what its compile cost.
BOOST_AUTO_TEST_CASE(child_process_helper) {
    if (!std::getenv("KILN_INDUCTOR_CHILD")) return;  // only meaningful as the child
    auto f = compile(seed_fn);
    Tensor x = ones({777}), y = ones({777});
    ToolchainStats before = toolchain_stats();
    auto start = std::chrono::steady_clock::now();
    Tensor out = f(x, y);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    ToolchainStats after = toolchain_stats();
    std::cout << "compiler_calls=" << after.compiler_calls - before.compiler_calls
              << " disk_hits=" << after.disk_hits - before.disk_hits << " ok=" << allclose(out, seed_fn(x, y), 1e-5, 1e-6)
              << " first_call_ms=" << ms << "\n";
}

BOOST_AUTO_TEST_CASE(second_process_loads_the_kernel_from_disk) {
    auto f = compile(seed_fn);
    Tensor x = ones({777}), y = ones({777});
    auto start = std::chrono::steady_clock::now();
    f(x, y);  // built here (or found on disk from an earlier run)
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::string cmd = "KILN_INDUCTOR_CHILD=1 /proc/" + std::to_string(getpid()) +
                      "/exe --run_test=inductor/child_process_helper --log_level=nothing --report_level=no 2>&1";
    FILE* pipe = popen(cmd.c_str(), "r");
    BOOST_REQUIRE(pipe);
    std::string output;
    char buffer[256];
    while (fgets(buffer, sizeof buffer, pipe)) output += buffer;
    BOOST_TEST(pclose(pipe) == 0, output);
    std::cout << "parent first call " << ms << " ms; child: " << output;
    BOOST_TEST(output.find("compiler_calls=0 disk_hits=1 ok=1") != std::string::npos, output);
}

BOOST_AUTO_TEST_CASE(missing_compiler_warns_once_and_interprets) {
    ScopedEnv cxx("CXX", "/nonexistent/c++");
    std::ostringstream captured;
    std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
    auto fn = [](Tensor x) { return sigmoid(x) * 5.0 + cos(x); };
    auto f = compile(fn);
    auto g = compile([](Tensor x) { return sin(x) - 1.0; });
    ToolchainStats t0 = toolchain_stats();
    InductorStats i0 = inductor_stats();
    Tensor x = randn({100});
    Tensor a = f(x), b = g(x);
    std::cerr.rdbuf(old);
    BOOST_TEST(allclose(a, fn(x), 1e-5, 1e-6));
    BOOST_TEST(allclose(b, sin(x) - 1.0, 1e-5, 1e-6));
    std::string text = captured.str();
    size_t at = text.find("no C++ compiler");
    BOOST_TEST(at != std::string::npos, text);
    BOOST_TEST(text.find("no C++ compiler", at + 1) == std::string::npos);  // once per process
    BOOST_TEST(toolchain_stats().compiler_calls == t0.compiler_calls);
    BOOST_TEST(inductor_stats().graphs_interpreted - i0.graphs_interpreted == 2);
    BOOST_TEST(last_compiled().why_interpreted == "no C++ compiler");
}

BOOST_AUTO_TEST_CASE(graphs_without_kernels_never_call_the_compiler) {
    auto views = [](Tensor x) { return x.transpose(0, 1); };
    auto mm = [](Tensor a, Tensor b) { return matmul(a, b); };
    auto f = compile(views);
    auto g = compile(mm);
    ToolchainStats t0 = toolchain_stats();
    Tensor a = randn({4, 6}), b = randn({6, 3});
    BOOST_TEST(allclose(f(a), views(a)));
    BOOST_TEST(allclose(g(a, b), mm(a, b), 1e-5, 1e-6));
    BOOST_TEST(library_builds(toolchain_stats()) == library_builds(t0));
    BOOST_TEST(last_compiled().interpreted);
}

// The first call never waits for the compiler: the interpreter serves it; once the
// background build is done, later calls run the generated kernel.
BOOST_AUTO_TEST_CASE(async_compile_interprets_until_the_kernel_is_ready) {
    // A kernel already on disk loads in microseconds and could be ready before the first
    // call is served; an empty cache makes the background build a real compile.
    ScopedEnv cache("KILN_CACHE_DIR", fresh_dir("async").string());
    auto fn = [](Tensor x) { return tanh(x) * sigmoid(x) + 0.25; };
    auto f = compile(fn, {.async_compile = true});
    Tensor x = randn({3, 333});
    InductorStats i0 = inductor_stats();
    BOOST_TEST(allclose(f(x), fn(x), 1e-5, 1e-6));
    InductorStats i1 = inductor_stats();
    BOOST_TEST(i1.calls_interpreted - i0.calls_interpreted == 1);
    BOOST_TEST(i1.calls_compiled == i0.calls_compiled);
    wait_for_async_compiles();
    BOOST_TEST(inductor_stats().builds - i0.builds == 1);
    BOOST_TEST(allclose(f(x), fn(x), 1e-5, 1e-6));
    InductorStats i2 = inductor_stats();
    BOOST_TEST(i2.calls_compiled - i1.calls_compiled == 1);
    BOOST_TEST(i2.calls_interpreted == i1.calls_interpreted);
}

BOOST_AUTO_TEST_SUITE_END()
