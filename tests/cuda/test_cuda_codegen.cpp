// The CUDA emitter and backend. Compile-only cases need NVRTC and no GPU, so they run in CI:
// the emitter's source for 256 seeded random programs (forward and backward halves, the same
// generator as the CPU differential test) and for softmax, layernorm and symbolic sizes is
// compiled to PTX for compute_90. On a GPU machine the same programs run on the device and
// must equal eager CPU autograd, and compile() with CUDA tensors goes through the generated
// kernels (the seed programs, a training step, softmax and layernorm one kernel each).
#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>

#include "codegen/cpu_backend.h"
#include "codegen/cuda_backend.h"
#include "codegen/emit_cpp.h"
#include "codegen/emit_cuda.h"
#include "codegen/inductor.h"
#include "codegen/lower_graph.h"
#include "jit/aot/aot.h"
#include "kiln.h"
#include "tensor/cuda.h"
#include "tensor/cuda_runtime.h"
#include "tests/codegen/compare.h"
#include "tests/codegen/lgraph_builder.h"
#include "tests/codegen/random_programs.h"
#include "tests/cuda/needs_gpu.h"
#include "tests/scoped_env.h"

using namespace kiln;
using namespace kiln::codegen;
namespace utf = boost::unit_test;

namespace {

using kiln_test::kCuda;

bool have_nvrtc() { return kiln_test::have_nvrtc("cuda codegen"); }

int count(const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

// The random programs, each split by AOT into forward and backward halves, lowered.
struct Programs {
    std::vector<kiln_test::Program> programs;
    std::vector<jit::aot::AotPlan> plans;
    std::vector<LGraph> halves;  // program i: 2i (forward), 2i+1 (backward)
};
Programs random_programs(int n, uint32_t seed, Device device) {
    Programs out;
    manual_seed(seed);
    kiln_test::ProgramGenerator generator(seed);
    for (int i = 0; i < n; ++i) {
        out.programs.push_back(generator.make());
        out.plans.push_back(jit::aot::plan(*out.programs.back().graph, out.programs.back().inputs));
        for (const auto& half : {out.plans.back().forward, out.plans.back().backward}) {
            Lowered lowered = lower(*half);
            BOOST_REQUIRE_MESSAGE(lowered.graph, lowered.why_not);
            lowered.graph->device = device;
            for (LNode& n : lowered.graph->nodes)  // as if recorded on the device: factories make their tensors there
                if (op_info(n.op).kind == OpKind::factory || op_info(n.op).kind == OpKind::random) n.attrs.device = device;
            out.halves.push_back(*lowered.graph);
        }
    }
    return out;
}

// A graph recorded from eager calls (the random programs' recorder).
LGraph record(const std::function<int(kiln_test::Recorder&, int)>& body, const Shape& shape) {
    kiln_test::Recorder r;
    int x = r.input(randn(shape), "x");
    int out = body(r, x);
    Lowered lowered = lower(*r.b.build({out}));
    BOOST_REQUIRE(lowered.graph);
    return *lowered.graph;
}

int softmax_graph(kiln_test::Recorder& r, int x) {
    int m = r.call(OpId::amax, {x}, {.dims = {-1}, .keepdim = true});
    int e = r.call(OpId::exp, {r.call(OpId::sub, {x, m})});
    return r.call(OpId::div, {e, r.call(OpId::sum, {e}, {.dims = {-1}, .keepdim = true})});
}

int layernorm_graph(kiln_test::Recorder& r, int x) {
    double inv_n = 1.0 / double(r.shape(x).back());
    int mean = r.call(OpId::mul, {r.call(OpId::sum, {x}, {.dims = {-1}, .keepdim = true})}, {.scalar = inv_n, .scalar_pos = ScalarPos::right});
    int centered = r.call(OpId::sub, {x, mean});
    int var = r.call(OpId::mul, {r.call(OpId::sum, {r.call(OpId::mul, {centered, centered})}, {.dims = {-1}, .keepdim = true})},
                     {.scalar = inv_n, .scalar_pos = ScalarPos::right});
    int rstd = r.call(OpId::div, {r.call(OpId::sqrt, {r.call(OpId::add, {var}, {.scalar = 1e-5, .scalar_pos = ScalarPos::right})})},
                      {.scalar = 1.0, .scalar_pos = ScalarPos::left});
    return r.call(OpId::mul, {centered, rstd});
}

std::string compile_ptx(const std::string& source) { return cuda::detail::compile_cubin(source, "generated", 90, /*ptx_only=*/true); }

}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_codegen)

// 256 programs -> 512 halves in 4 NVRTC programs; a failing batch is retried graph by graph
// so that the failure names the program.
BOOST_AUTO_TEST_CASE(the_emitted_source_of_random_programs_compiles_with_nvrtc) {
    if (!have_nvrtc()) return;
    Programs p = random_programs(256, 20251124, kCuda);
    auto start = std::chrono::steady_clock::now();
    size_t compiled = 0, float4_kernels = 0, row_kernels = 0;
    const size_t batch = 128;
    for (size_t first = 0; first < p.halves.size(); first += batch) {
        std::vector<LGraph> graphs(p.halves.begin() + first, p.halves.begin() + std::min(p.halves.size(), first + batch));
        std::string source = emit_cuda_many(schedule_many(graphs));
        float4_kernels += count(source, "float4 when aligned");
        row_kernels += count(source, "one block per row");
        try {
            BOOST_TEST(compile_ptx(source).size() > 100u);
            compiled += graphs.size();
        } catch (const Error&) {
            for (size_t i = 0; i < graphs.size(); ++i)
                BOOST_TEST_CONTEXT("program " << (first + i) / 2 << (i % 2 ? " backward" : " forward") << "\n" << schedule(graphs[i]).print()) {
                    try {
                        compile_ptx(emit_cuda(schedule(graphs[i])));
                    } catch (const Error& e) {
                        BOOST_ERROR(std::string(e.what()).substr(0, 4000));
                    }
                }
        }
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    BOOST_TEST(compiled == p.halves.size());
    BOOST_TEST(float4_kernels > 50u);  // both loop shapes are exercised
    BOOST_TEST(row_kernels > 50u);
    std::cout << "cuda codegen: " << compiled << " random graphs (" << float4_kernels << " float4 pointwise, " << row_kernels
              << " row kernels) compiled with NVRTC to PTX in " << seconds << " s\n";
}

BOOST_AUTO_TEST_CASE(softmax_and_layernorm_are_one_cuda_kernel_each) {
    for (auto [name, body] : {std::pair{"softmax", &softmax_graph}, std::pair{"layernorm", &layernorm_graph}}) {
        BOOST_TEST_CONTEXT(name) {
            LGraph g = record(body, {64, 1024});
            g.device = kCuda;
            Schedule s = schedule(g);
            int generated = 0;
            for (const Kernel& k : s.kernels) generated += k.kind == KernelKind::pointwise || k.kind == KernelKind::row;
            BOOST_TEST(generated == 1);
            std::string source = emit_cuda(s);
            BOOST_TEST(count(source, "__global__ void") == 1);
            // Two block-wide combines in each variant: the row kept in registers, and a long row read again.
            BOOST_TEST(count(source, "= block_sum(") + count(source, "= block_amax(") == 4);
            size_t other = source.find("} else {  // a long row");
            BOOST_REQUIRE(other != std::string::npos);
            std::string cached = source.substr(0, other);
            // The register variant reads the row in its fill loop alone (a float4, or one
            // element at a time where the row is not aligned), all of a thread's loads first:
            // all in flight at once. Passes read registers
            // (tests/cuda/test_cuda_register_rows.cpp).
            size_t fill = cached.find("// the row's loads, all in flight");
            BOOST_REQUIRE(fill != std::string::npos);
            size_t first_pass = cached.find("// pass along the row", fill);
            BOOST_TEST(count(cached.substr(0, first_pass), "x_0_ptr[") == 2);
            BOOST_TEST(count(cached.substr(first_pass), "x_0_ptr[") == 0);
            BOOST_TEST(count(cached, "x_0_c[g * 4 + c] = x_0;") == 1);
            BOOST_TEST(count(source.substr(other), "x_0_ptr[") >= 2);
            if (have_nvrtc()) BOOST_CHECK_NO_THROW(compile_ptx(source));
        }
    }
}

// One emitter core, two dialects (codegen/emit_core.h): the CPU and CUDA sources of a row
// kernel make the same passes along the row, in the same order, computing the same values;
// the CUDA source compiles with NVRTC.
BOOST_AUTO_TEST_CASE(both_dialects_make_the_same_passes_along_a_row) {
    using namespace kiln::codegen::testing;
    GraphBuilder b;  // an element store beside a reduction: one pass on both targets
    int x = b.input({8, 100}, "x"), y = b.input({8, 100}, "y");
    int m = b.binary(OpId::maximum, x, y);
    b.output(m);
    b.output(b.unary(OpId::abs, b.reduce(OpId::amax, m, {-1}, true)));
    std::vector<std::pair<std::string, LGraph>> graphs = {
        {"softmax", record(softmax_graph, {64, 1024})},
        {"layernorm", record(layernorm_graph, {64, 1024})},
        {"store beside amax", b.graph}};
    auto passes = [](const std::string& source) {
        std::vector<std::string> out;
        for (size_t at = source.find("// pass along the row"); at != std::string::npos;
             at = source.find("// pass along the row", at + 1))
            out.push_back(source.substr(at, source.find('\n', at) - at));
        return out;
    };
    for (auto& [name, g] : graphs) {
        BOOST_TEST_CONTEXT(name) {
            g.device = cpu;
            std::vector<std::string> on_cpu = passes(emit(schedule(g)));
            g.device = kCuda;
            std::string source = emit_cuda(schedule(g));
            std::vector<std::string> on_cuda = passes(source);
            BOOST_TEST(!on_cpu.empty());
            // A row kept in registers is a second variant of the same passes.
            BOOST_REQUIRE((on_cuda.size() == on_cpu.size() || on_cuda.size() == 2 * on_cpu.size()));
            BOOST_TEST(std::vector<std::string>(on_cuda.begin(), on_cuda.begin() + on_cpu.size()) ==
                           on_cpu,
                       boost::test_tools::per_element());
            if (have_nvrtc()) BOOST_CHECK_NO_THROW(compile_ptx(source));
        }
    }
}

BOOST_AUTO_TEST_CASE(symbolic_sizes_are_kernel_arguments) {
    using namespace kiln::codegen::testing;
    GraphBuilder b;
    int x = b.input({s0, 8}, "x"), y = b.input({8}, "y");
    int t = b.unary(OpId::tanh, b.binary(OpId::add, x, y));
    int r = b.reduce(OpId::sum, t, {-1}, true);
    b.output(b.binary(OpId::sub, t, r));
    b.graph.device = kCuda;
    std::string source = emit_cuda(schedule(b.graph));
    BOOST_TEST(count(source, "long long s0") >= 1);
    if (have_nvrtc()) BOOST_CHECK_NO_THROW(compile_ptx(source));
    // A permuted read is strided: no float4 path, index math per dim instead.
    GraphBuilder p;
    int a = p.input({16, 32}, "a");
    p.output(p.unary(OpId::exp, p.node(OpId::permute, {a}, {.dims = {1, 0}}, {32, 16})));
    std::string strided = emit_cuda(schedule(p.graph));
    BOOST_TEST(count(strided, "float4") == 0);
    BOOST_TEST(count(strided, "rest_j") > 0);
    if (have_nvrtc()) BOOST_CHECK_NO_THROW(compile_ptx(strided));
}

// NVRTC compiles one program on one thread: a large source is split over programs that
// compile at once (split_cuda_source, nvrtc_programs_for). Each unit is a whole translation
// unit (NVRTC compiles it, and its PTX has an entry for each kernel it says it defines),
// every __global__ function is in exactly one unit, in source order, and every generated
// kernel's entry is found; one unit is the source as emitted (its cache entries unchanged).
BOOST_AUTO_TEST_CASE(a_source_split_over_nvrtc_programs_defines_every_kernel_once) {
    BOOST_TEST(nvrtc_programs_for(kNvrtcProgramBytes - 1) == 1);  // small graphs: one program
    BOOST_TEST(nvrtc_programs_for(1000 * kNvrtcProgramBytes) ==
               int(std::max(1u, std::thread::hardware_concurrency())));
    BOOST_TEST(split_cuda_source(emit_cuda(std::vector<const Schedule*>{}), 4).empty());
    if (!have_nvrtc()) return;
    Programs p = random_programs(24, 20261126, kCuda);
    std::vector<Schedule> schedules = schedule_many(p.halves);
    std::string source = emit_cuda_many(schedules);
    std::vector<CudaUnit> one = split_cuda_source(source, 1);
    BOOST_TEST_REQUIRE(one.size() == 1u);
    BOOST_TEST((one[0].source == source));
    BOOST_TEST(int(one[0].kernels.size()) == count(source, "__global__ void"));
    std::vector<CudaUnit> units = split_cuda_source(source, 4);
    BOOST_TEST_REQUIRE(units.size() == 4u);
    std::vector<std::string> defined;
    std::vector<cuda::detail::NvrtcProgram> programs;
    for (const CudaUnit& u : units) {
        BOOST_TEST(!u.kernels.empty());
        BOOST_TEST(u.source.size() < source.size() * 3 / 4);  // a share of the kernels
        defined.insert(defined.end(), u.kernels.begin(), u.kernels.end());
        programs.push_back({u.source, u.kernels.front()});
    }
    BOOST_TEST(defined == one[0].kernels);
    auto start = std::chrono::steady_clock::now();
    std::vector<std::string> ptx = cuda::detail::compile_cubins(programs, 90, /*ptx_only=*/true);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (size_t u = 0; u < units.size(); ++u)
        for (const std::string& name : units[u].kernels)
            BOOST_TEST(ptx[u].find(".entry " + name + "(") != std::string::npos, name);
    for (const Schedule& s : schedules)
        for (size_t k = 0; k < s.kernels.size(); ++k) {
            if (s.kernels[k].kind != KernelKind::pointwise && s.kernels[k].kind != KernelKind::row)
                continue;
            std::string entry = cuda_kernel_entry(source, s.kernel_name(int(k)));
            BOOST_TEST(std::count(defined.begin(), defined.end(), entry) == 1, entry);
        }
    BOOST_TEST(split_cuda_source(source, 100000).size() ==
               defined.size());  // one kernel each at most
    std::cout << "cuda codegen: " << defined.size() << " kernels (" << source.size() / 1024
              << " KB) in 4 NVRTC programs compiled to PTX at once in " << seconds << " s\n";
}

// ---- on the GPU

// The same kernels compiled as one NVRTC program and split over five give the same values,
// bit for bit (each kernel is looked up in the module that defines it).
BOOST_AUTO_TEST_CASE(graphs_split_over_nvrtc_programs_equal_one_program,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda codegen"})) {
    constexpr int kPrograms = 32;
    Programs p = random_programs(kPrograms, 20261127, kCuda);
    std::vector<Schedule> schedules = schedule_many(p.halves);
    std::string source = emit_cuda_many(schedules);
    std::vector<CompiledCudaGraph> one, split;
    for (const Schedule& s : schedules) {
        one.push_back(build_cuda(s, source, 1));
        split.push_back(build_cuda(s, source, 5));
    }
    BOOST_TEST(one[0].nvrtc_programs() == 1);
    BOOST_TEST(split[0].nvrtc_programs() == 5);
    for (int i = 0; i < kPrograms; ++i) {
        const kiln_test::Program& prog = p.programs[i];
        std::vector<Tensor> primals, tangents;
        for (const Tensor& x : prog.inputs) primals.push_back(x.detach().cuda());
        for (int k : p.plans[i].tangent_outputs)
            tangents.push_back(
                randn(prog.graph->nodes()[prog.graph->outputs()[k]].meta.shape).cuda());
        auto forward_backward = [&](const std::vector<CompiledCudaGraph>& graphs) {
            std::vector<Tensor> res = graphs[2 * i].run(primals);
            std::vector<Tensor> bw_in(res.begin() + p.plans[i].num_outputs, res.end());
            bw_in.insert(bw_in.end(), tangents.begin(), tangents.end());
            std::vector<Tensor> grads = graphs[2 * i + 1].run(bw_in);
            res.insert(res.end(), grads.begin(), grads.end());
            return res;
        };
        std::vector<Tensor> want = forward_backward(one), got = forward_backward(split);
        BOOST_TEST_REQUIRE(got.size() == want.size());
        for (size_t k = 0; k < got.size(); ++k)
            BOOST_TEST(kiln_test::relative_error(got[k].defined() ? got[k].cpu() : got[k],
                                                 want[k].defined() ? want[k].cpu() : want[k]) == 0,
                       "program " << i << " result " << k);
    }
}

BOOST_AUTO_TEST_CASE(random_programs_on_the_gpu_match_eager_cpu, *utf::precondition(kiln_test::NeedsGpu{"cuda codegen"})) {
    constexpr int kPrograms = 192;
    Programs p = random_programs(kPrograms, 20240614, kCuda);
    auto start = std::chrono::steady_clock::now();
    std::vector<CompiledCudaGraph> compiled = compile_cuda_many(p.halves);
    double build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    int failures = 0, checked = 0, arbitrated = 0;
    for (int i = 0; i < kPrograms; ++i) {
        const kiln_test::Program& prog = p.programs[i];
        const jit::aot::AotPlan& plan = p.plans[i];
        std::vector<Tensor> tangents;
        for (int k : plan.tangent_outputs) tangents.push_back(randn(prog.graph->nodes()[prog.graph->outputs()[k]].meta.shape));
        kiln_test::Reference ref = kiln_test::eager_reference(prog, plan, tangents);
        std::optional<kiln_test::Reference> exact, nudged;
        std::vector<Tensor> primals;
        for (const Tensor& x : prog.inputs) primals.push_back(x.detach().cuda());
        std::vector<Tensor> res = compiled[2 * i].run(primals);
        std::vector<Tensor> bw_in(res.begin() + plan.num_outputs, res.end());
        for (const Tensor& t : tangents) bw_in.push_back(t.cuda());
        std::vector<Tensor> grads = compiled[2 * i + 1].run(bw_in);
        auto check = [&](const Tensor& gpu, const Tensor& want, const std::string& what, bool is_grad, size_t k) {
            ++checked;
            Tensor got = gpu.defined() ? gpu.cpu() : gpu;
            BOOST_TEST((!gpu.defined() || gpu.device() == kCuda));
            double error = kiln_test::relative_error(got, want);
            if (error > 1e-4) {  // the float64 arbiter, as in the CPU differential test
                if (!exact) exact = kiln_test::exact_reference(prog, plan, tangents), nudged = kiln_test::exact_reference(prog, plan, tangents, 0x1p-24);
                const Tensor& truth = is_grad ? exact->grads[k] : exact->outputs[k];
                double off = kiln_test::relative_error(got, truth), eager_off = kiln_test::relative_error(want, truth);
                double sensitivity = kiln_test::relative_error(is_grad ? nudged->grads[k] : nudged->outputs[k], truth);
                ++arbitrated;
                if (off <= eager_off + sensitivity + 1e-5) return;
            }
            if (error > 1e-4 && ++failures <= 5)
                BOOST_ERROR("program " << i << " " << what << ": error " << error << "\n" << *prog.graph << "forward:\n"
                                       << compiled[2 * i].schedule().print() << "backward:\n" << compiled[2 * i + 1].schedule().print());
        };
        for (int k = 0; k < plan.num_outputs; ++k) check(res[k], ref.outputs[k], "output " + std::to_string(k), false, size_t(k));
        for (size_t j = 0; j < prog.inputs.size(); ++j) {
            int slot = plan.input_grad_slot[j];
            check(slot >= 0 ? grads[slot] : Tensor(), ref.grads[j], "grad of input " + std::to_string(j), true, j);
        }
    }
    std::cout << "cuda codegen: " << kPrograms << " random programs on the GPU, forward + backward: " << checked << " tensors checked ("
              << arbitrated << " judged against float64); NVRTC build " << build_s << " s\n";
    BOOST_TEST(failures == 0);
}

BOOST_AUTO_TEST_CASE(compiled_functions_on_cuda_use_generated_kernels, *utf::precondition(kiln_test::NeedsGpu{"cuda codegen"})) {
    // foo from the seeds: one fused kernel, equal to eager.
    auto foo = [](const Tensor& x, const Tensor& y) { return sin(x) + cos(y); };
    auto cfoo = compile(foo);
    Tensor x = randn({10, 10}), y = randn({10, 10});
    codegen::InductorStats before = codegen::inductor_stats();
    Tensor got = cfoo(x.cuda(), y.cuda());
    BOOST_TEST((got.device() == kCuda));
    BOOST_TEST(kiln_test::relative_error(got.cpu(), foo(x, y)) < 1e-5);
    BOOST_TEST(codegen::inductor_stats().calls_compiled > before.calls_compiled);
    BOOST_TEST(codegen::last_compiled().cuda);
    BOOST_TEST(count(codegen::last_compiled().source, "__global__ void") == 1);
    // The same function with CPU tensors: a new entry (the device is guarded), CPU code.
    BOOST_TEST(kiln_test::relative_error(cfoo(x, y), foo(x, y)) < 1e-5);
    BOOST_TEST((cfoo(x, y).device() == cpu));
    BOOST_TEST(!codegen::last_compiled().cuda);

    // softmax and layernorm through compile(): one generated kernel each.
    auto sm = compile([](const Tensor& t) { return softmax(t, -1); });
    Tensor big = randn({128, 1024});
    BOOST_TEST(kiln_test::relative_error(sm(big.cuda()).cpu(), softmax(big, -1)) < 1e-5);
    BOOST_TEST(codegen::last_compiled().generated_kernels == 1);

    // bar from the seeds: a data-dependent branch, 3 graphs, right on both branches.
    jit::reset();
    auto bar = [](const Tensor& a, const Tensor& b) {
        Tensor t = a / (abs(a) + 1.0);
        if (b.sum().item<float>() < 0) return t * -1.0;
        return t * b;
    };
    auto cbar = compile(bar);
    Tensor a = randn({10}), b = randn({10});
    for (Tensor bb : {b, -b.abs() - 1.0, b.abs() + 1.0}) BOOST_TEST(kiln_test::relative_error(cbar(a.cuda(), bb.cuda()).cpu(), bar(a, bb)) < 1e-5);
    BOOST_TEST(jit::counters().graphs_compiled == 3);

    // The walk-through's training step: forward and backward compiled on the GPU.
    auto loss_fn = [](const Tensor& w, const Tensor& xs) { return (cos(cos(xs * w))).sum(); };
    auto closs = compile(loss_fn);
    Tensor w = randn({16}), xs = randn({8, 16});
    Tensor wg = w.cuda().detach().requires_grad_();
    Tensor l = closs(wg, xs.cuda());
    l.backward();
    Tensor wc = w.detach().requires_grad_();
    loss_fn(wc, xs).backward();
    BOOST_TEST(kiln_test::relative_error(l.cpu(), loss_fn(w, xs)) < 1e-5);
    BOOST_TEST(kiln_test::relative_error(wg.grad().cpu(), wc.grad()) < 1e-4);
    BOOST_TEST((wg.grad().device() == kCuda));
}

// Few long rows: each row is split over many blocks, whose partials the last block of the
// row combines (in a fixed order); repeated calls reuse the per-row counters.
namespace {

// relu(h @ w * scale + 1) layers, and a row kernel (softmax) twice: kernels that repeat an
// earlier one's code, and some that do not (another scalar, another shape).
LGraph repeated_layers(const Shape& x_shape) {
    testing::GraphBuilder b;
    auto layer = [&](int h, double scale) { return b.unary(OpId::relu, b.scalar(OpId::add, b.scalar(OpId::mul, h, scale), 1.0)); };
    auto softmax = [&](int h) {
        int e = b.unary(OpId::exp, b.binary(OpId::sub, h, b.reduce(OpId::amax, h, {-1}, true)));
        return b.binary(OpId::div, e, b.reduce(OpId::sum, e, {-1}, true));
    };
    int x = b.input(x_shape, "x"), w = b.input({x_shape[1], x_shape[1]}, "w"), v = b.input({x_shape[1], 30}, "v");
    int h1 = layer(x, 2.0);
    int h2 = layer(b.matmul(h1, w), 2.0);
    int h3 = layer(b.matmul(h2, w), 3.0);
    int s1 = softmax(b.matmul(h3, w));
    int s2 = softmax(b.matmul(s1, w));
    b.output(layer(b.matmul(s2, v), 2.0));
    b.output(h2);
    return b.graph;
}

}  // namespace

// Kernels that differ only in names are emitted once (codegen/same_code.h): the repeat has a
// comment, no __global__ function, and the runner launches the first one's.
BOOST_AUTO_TEST_CASE(kernels_that_differ_only_in_names_are_emitted_once_and_compile_with_nvrtc) {
    if (!have_nvrtc()) return;
    LGraph graph = repeated_layers({64, 100});
    graph.device = Device{DeviceType::cuda, 0};
    Schedule s = schedule(graph);
    std::string source = emit_cuda(s);
    BOOST_TEST(count(source, "the same code as") == 2u, source);  // h2 repeats h1, s2 repeats s1
    int repeats = 0;
    for (size_t k = 0; k < s.kernels.size(); ++k) {
        std::string name = s.kernel_name(int(k)), entry = cuda_kernel_entry(source, name);
        if (entry != name) {
            ++repeats;
            BOOST_TEST(source.find("void " + name + "(") == std::string::npos);
            BOOST_TEST(source.find("void " + entry + "(") != std::string::npos);
        }
    }
    BOOST_TEST(repeats == 2);
    BOOST_TEST(compile_ptx(source).size() > 100u);
}

BOOST_AUTO_TEST_CASE(kernels_that_repeat_code_run_the_first_ones_function_on_their_buffers,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda codegen"})) {
    LGraph graph = repeated_layers({64, 100});
    graph.device = Device{DeviceType::cuda, 0};
    CompiledCudaGraph compiled = compile_cuda(graph);
    BOOST_TEST(count(compiled.source(), "the same code as") == 2u);
    std::vector<Tensor> inputs = {randn({64, 100}), randn({100, 100}) * 0.1, randn({100, 30}) * 0.1};
    LGraph cpu_graph = repeated_layers({64, 100});
    std::vector<Tensor> want = run_eager(cpu_graph, inputs), device_inputs;
    for (const Tensor& t : inputs) device_inputs.push_back(t.cuda());
    std::vector<Tensor> got = compiled.run(device_inputs);
    BOOST_REQUIRE(got.size() == want.size());
    for (size_t k = 0; k < want.size(); ++k) BOOST_TEST(kiln_test::relative_error(got[k].cpu(), want[k]) < 1e-4, "output " << k);
}

BOOST_AUTO_TEST_CASE(long_reductions_split_over_blocks_match_the_cpu, *utf::precondition(kiln_test::NeedsGpu{"cuda codegen"})) {
    auto fn = [](const Tensor& t, const Tensor& u) {
        Tensor e = exp(t * 0.01);
        return std::vector<Tensor>{e.sum() * 0.5, t.amax(), t.amin(), e, (u * u).sum({-1}), u.amax({-1}, true) - u};
    };
    auto cfn = compile(fn);
    for (int call = 0; call < 3; ++call) {
        Tensor t = randn({1 << 22}), u = randn({3, 300000});
        std::vector<Tensor> got = cfn(t.cuda(), u.cuda()), want = fn(t, u);
        for (size_t k = 0; k < want.size(); ++k)
            BOOST_TEST(kiln_test::relative_error(got[k].cpu(), want[k]) < 1e-4, "output " << k << " call " << call);
    }
    BOOST_TEST(count(codegen::last_compiled().source, "a row split over") >= 1);
}

Tensor modified_sigmoid(Tensor x, Tensor y) {
    x = 1.0 / (exp(-x) + 5);
    if (x.mean() > 0.5) x = x / 1.1;
    return x * y;
}

// The seed's modified_sigmoid on CUDA tensors that need grad: two compiles (sizes 10, then
// 8 made dynamic), then hits at new sizes; values and gradients equal eager on the CPU.
BOOST_AUTO_TEST_CASE(modified_sigmoid_on_cuda_compiles_twice_with_gradients, *utf::precondition(kiln_test::NeedsGpu{"cuda codegen"})) {
    jit::reset();
    auto f = compile(modified_sigmoid, {.arg_names = {"x", "y"}});
    for (int64_t n : {10, 8, 10, 8, 12, 1000, 1 << 20}) {
        Tensor x = randn({n}), y = randn({n});
        Tensor xg = x.cuda().requires_grad_(), yg = y.cuda().requires_grad_();
        Tensor got = f(xg, yg);
        got.sum().backward();
        Tensor xc = x.detach().requires_grad_(), yc = y.detach().requires_grad_();
        Tensor want = modified_sigmoid(xc, yc);
        want.sum().backward();
        BOOST_TEST_CONTEXT("n = " << n) {
            BOOST_TEST(kiln_test::relative_error(got.detach().cpu(), want.detach()) < 1e-5);
            BOOST_TEST(kiln_test::relative_error(xg.grad().cpu(), xc.grad()) < 1e-4);
            BOOST_TEST(kiln_test::relative_error(yg.grad().cpu(), yc.grad()) < 1e-5);
        }
    }
    BOOST_TEST(jit::counters().compiles == 2);
}

BOOST_AUTO_TEST_CASE(row_kernels_in_registers_or_not_match_the_cpu, *utf::precondition(kiln_test::NeedsGpu{"cuda codegen"})) {
    // Rows that fit a block's registers (1024 of 128 threads, 3000 of 512, 5000 and 9000 of
    // 1024: codegen/register_row.h) and rows that do not (20000, past the register bound):
    // both kinds of kernel, against the CPU.
    auto softmax_fn = [](const Tensor& x) { return softmax(x, 1); };
    auto layernorm_fn = [](const Tensor& x) {
        Tensor m = x.mean({1}, true), d = x - m;
        return d / sqrt((d * d).mean({1}, true) + 1e-5);
    };
    auto f = compile(softmax_fn), g = compile(layernorm_fn);
    for (Shape shape :
         {Shape{4096, 1024}, Shape{200, 3000}, Shape{10, 5000}, Shape{7, 9000}, Shape{3, 20000}}) {
        Tensor x = randn(shape) * 3.0;
        BOOST_TEST(kiln_test::relative_error(f(x.cuda()).cpu(), softmax_fn(x)) < 1e-5, "softmax " << shape[0] << "x" << shape[1]);
        BOOST_TEST(kiln_test::relative_error(g(x.cuda()).cpu(), layernorm_fn(x)) < 1e-5, "layernorm " << shape[0] << "x" << shape[1]);
    }
}

BOOST_AUTO_TEST_CASE(row_reductions_of_any_row_size_match_eager,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda codegen"})) {
    // Row sizes around the block sizes (32 to 1024 threads: codegen::cuda_row_block) and the
    // register rows (8 elements a thread), multiples of 4 and not, few rows and many:
    // compiled softmax, layernorm and sums against eager on the GPU and on the CPU.
    auto softmax_fn = [](const Tensor& x) { return softmax(x, 1); };
    auto layernorm_fn = [](const Tensor& x) {
        Tensor m = x.mean({1}, true), d = x - m;
        return d * rsqrt((d * d).mean({1}, true) + 1e-5);
    };
    auto sums_fn = [](const Tensor& x) {
        return std::vector<Tensor>{x.sum({1}), (x * x).sum(), x.amax({1})};
    };
    auto f = compile(softmax_fn), g = compile(layernorm_fn);
    auto h = compile(sums_fn);
    for (Shape shape :
         {Shape{4096, 1024}, Shape{300, 1023}, Shape{64, 1030}, Shape{33, 257}, Shape{200, 2049},
          Shape{1000, 31}, Shape{7, 8191}, Shape{5000, 7}, Shape{2, 100001}}) {
        BOOST_TEST_CONTEXT(shape[0] << "x" << shape[1]) {
            Tensor x = randn(shape) * 3.0, xc = x.cuda();
            BOOST_TEST(kiln_test::relative_error(f(xc).cpu(), softmax_fn(xc).cpu()) < 1e-5,
                       "softmax vs eager gpu");
            BOOST_TEST(kiln_test::relative_error(f(xc).cpu(), softmax_fn(x)) < 1e-5,
                       "softmax vs eager cpu");
            BOOST_TEST(kiln_test::relative_error(g(xc).cpu(), layernorm_fn(xc).cpu()) < 1e-4,
                       "layernorm vs eager gpu");
            BOOST_TEST(kiln_test::relative_error(g(xc).cpu(), layernorm_fn(x)) < 1e-4,
                       "layernorm vs eager cpu");
            std::vector<Tensor> got = h(xc), on_gpu = sums_fn(xc), on_cpu = sums_fn(x);
            for (size_t k = 0; k < got.size(); ++k) {
                BOOST_TEST(kiln_test::relative_error(got[k].cpu(), on_gpu[k].cpu()) < 1e-4,
                           "sum " << k << " vs eager gpu");
                BOOST_TEST(kiln_test::relative_error(got[k].cpu(), on_cpu[k]) < 1e-4,
                           "sum " << k << " vs eager cpu");
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(random_ops_draw_on_the_device_the_cpu_numbers_and_replays_draw_anew, *utf::precondition(kiln_test::NeedsGpu{"cuda codegen"})) {
    // The same seed gives the same numbers on either device (Philox, tensor/philox.h).
    auto draw = [](Device d) {
        manual_seed(11);
        std::vector<Tensor> out = {rand({3000}, {.device = d}), randn({3000}, {.device = d}),
                                   randint(-5, 5, {3000}, {.device = d}), randn({257}, {.dtype = float64, .device = d})};
        for (Tensor& t : out) t = t.cpu();
        return out;
    };
    std::vector<Tensor> on_cpu = draw(kiln::cpu), on_gpu = draw(kCuda);
    BOOST_TEST(kiln_test::relative_error(on_gpu[0], on_cpu[0]) < 1e-7);
    BOOST_TEST(kiln_test::relative_error(on_gpu[1], on_cpu[1]) < 1e-6);
    BOOST_TEST((on_gpu[2].to_vector<int64_t>() == on_cpu[2].to_vector<int64_t>()));
    BOOST_TEST(kiln_test::relative_error(on_gpu[3], on_cpu[3]) < 1e-12);

    // Under reduce-overhead a captured graph's random kernels read (seed, offset) that each
    // replay takes from the generator: every call equals eager with the same seed, and no
    // two calls share a mask.
    auto dropout_like = [](const Tensor& x) { return x * (rand(x.shape(), {.device = x.device()}) > 0.5) * 2.0; };
    auto graphed = compile(dropout_like, {.mode = "reduce-overhead"});
    Tensor x = randn({4096}).cuda();
    codegen::CudaGraphStats before = codegen::cuda_graph_stats();
    std::vector<std::vector<float>> masks;
    for (int i = 0; i < 5; ++i) {
        manual_seed(100 + i);
        Tensor want = dropout_like(x).cpu();
        manual_seed(100 + i);
        Tensor got = graphed(x).cpu();
        BOOST_TEST(kiln_test::relative_error(got, want) == 0.0, "call " << i);
        BOOST_TEST(get_rng_state().offset == 4096u, "call " << i << " took one draw per element");
        masks.push_back(got.to_vector<float>());
    }
    for (size_t i = 1; i < masks.size(); ++i) BOOST_TEST((masks[i] != masks[0]));
    codegen::CudaGraphStats after = codegen::cuda_graph_stats();
    BOOST_TEST(after.captures - before.captures == 1);
    BOOST_TEST(after.replays - before.replays == 4);
}

BOOST_AUTO_TEST_CASE(moves_between_devices_are_recorded_and_differentiable) {
    // x.to(device) is an op of the table (to_device): the JIT records it like any other (a
    // replay without it would return a CPU tensor), and its gradient goes back to the source.
    auto fn = [](const Tensor& x) { return sin((x * 2.0).to(kCuda)) + 1.0; };
    auto cfn = compile(fn);
    Tensor x = randn({4});
    if (!cuda::is_available()) {  // without a GPU the move raises, compiled or not
        BOOST_CHECK_THROW(fn(x), Error);
        BOOST_CHECK_THROW(cfn(x), Error);
        return;
    }
    jit::reset();
    for (int i = 0; i < 3; ++i) {
        Tensor xi = (x + double(i)).detach().requires_grad_();
        Tensor got = cfn(xi);
        BOOST_TEST((got.device() == kCuda));
        BOOST_TEST(kiln_test::relative_error(got.detach().cpu(), sin(xi.detach() * 2.0) + 1.0) < 1e-5);
        got.sum().backward();
        BOOST_TEST((xi.grad().device() == cpu));
        BOOST_TEST(kiln_test::relative_error(xi.grad(), 2.0 * cos(xi.detach() * 2.0)) < 1e-5);
    }
    BOOST_TEST(jit::counters().compiles == 1);
    BOOST_TEST(jit::counters().eager_runs == 0);
    // Eager: there and back again, gradients flow through both moves.
    Tensor w = randn({3}).requires_grad_();
    ((w.to(kCuda) * 3.0).cpu() * w).sum().backward();
    BOOST_TEST(kiln_test::relative_error(w.grad(), 6.0 * w.detach()) < 1e-6);
    // Factories inside a compiled function make their tensors where they were asked to.
    auto make = compile([](const Tensor& t) { return t + ones({4}, {.device = kCuda}) + arange(4, {.device = kCuda}); });
    Tensor t = randn({4}).cuda();
    for (int i = 0; i < 2; ++i) BOOST_TEST(kiln_test::relative_error(make(t).cpu(), t.cpu() + 1.0 + arange(4)) < 1e-6);
}

BOOST_AUTO_TEST_SUITE_END()
