// Matmul epilogues fused into the GEMM's row blocks (codegen/epilogue.cpp, cpu_epilogue.cpp):
// each graph's fused result equals run_eager and the unfused schedule (KILN_EPILOGUE=0), for
// small blocks (KILN_EPILOGUE_ROWS) that leave a partial last block, both thread orders and
// 1 or 2 threads; and what is not an epilogue stays unfused.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <optional>
#include <sstream>

#include "codegen/cpu_backend.h"
#include "kiln.h"
#include "tensor/gemm.h"
#include "tensor/parallel.h"
#include "tests/codegen/compare.h"
#include "tests/codegen/lgraph_builder.h"
#include "tests/scoped_env.h"

using namespace kiln;
using namespace kiln::codegen;
using kiln::codegen::testing::GraphBuilder;
using kiln::codegen::testing::s0;
using kiln_test::relative_error;

namespace {

using kiln_test::ScopedEnv;

struct Case {
    std::string name;
    LGraph graph;
    std::function<std::vector<Tensor>(int64_t m)> inputs;  // m: the GEMM's rows where they vary
    bool fused = true;                                     // expect a blas+epilogue step
    std::vector<int64_t> ms = {1, 7, 129, 1000};
};

int fused_steps(const Schedule& s) {
    int n = 0;
    for (size_t k = 0; k < s.kernels.size(); ++k) n += s.has_epilogue(int(k));
    return n;
}

// GELU with tanh, as nn::functional::gelu(x, "tanh") writes it.
int gelu_tanh(GraphBuilder& b, int x) {
    int cube = b.binary(OpId::mul, b.binary(OpId::mul, x, x), x);
    int inner = b.scalar(OpId::mul, b.binary(OpId::add, x, b.scalar(OpId::mul, cube, 0.044715)),
                         0.7978845608028654);
    int t = b.scalar(OpId::add, b.unary(OpId::tanh, inner), 1.0);
    return b.binary(OpId::mul, b.scalar(OpId::mul, x, 0.5), t);
}
int gelu_erf(GraphBuilder& b, int x) {
    int t =
        b.scalar(OpId::add, b.unary(OpId::erf, b.scalar(OpId::mul, x, 0.7071067811865476)), 1.0);
    return b.binary(OpId::mul, b.scalar(OpId::mul, x, 0.5), t);
}
int softmax_last(GraphBuilder& b, int x) {
    int e = b.unary(OpId::exp, b.binary(OpId::sub, x, b.reduce(OpId::amax, x, {-1}, true)));
    return b.binary(OpId::div, e, b.reduce(OpId::sum, e, {-1}, true));
}

std::vector<Case> cases() {
    std::vector<Case> out;
    const int64_t K = 24, N = 40;
    auto linear = [&](const std::string& name,
                      const std::function<int(GraphBuilder&, int mm, int m_rows_input)>& epilogue) {
        GraphBuilder b;
        int x = b.input({s0, K}, "x"), w = b.input({N, K}, "w"), r = b.input({s0, N}, "r"),
            bias = b.input({N}, "bias");
        int mm = b.binary(OpId::add, b.matmul(x, b.permute(w, {1, 0})),
                          bias);  // x @ W^T + b: the transpose is a view
        b.output(epilogue(b, mm, r));
        out.push_back({name, b.graph, [=](int64_t m) {
                           return std::vector<Tensor>{randn({m, K}), randn({N, K}), randn({m, N}),
                                                      randn({N})};
                       }});
    };
    linear("bias_add_relu", [](GraphBuilder& b, int mm, int) { return b.unary(OpId::relu, mm); });
    linear("gelu_tanh", [](GraphBuilder& b, int mm, int) { return gelu_tanh(b, mm); });
    linear("gelu_erf", [](GraphBuilder& b, int mm, int) { return gelu_erf(b, mm); });
    linear("residual_add", [](GraphBuilder& b, int mm, int r) {
        return b.binary(OpId::add, r, b.unary(OpId::tanh, mm));
    });
    linear("mask_where", [](GraphBuilder& b, int mm, int r) {
        int mask = b.node(OpId::gt, {r}, {.scalar = 0.0, .scalar_pos = ScalarPos::right},
                          b.value(r).shape, DType::boolean);
        return b.node(OpId::where, {mask, mm, r}, {}, b.value(r).shape);
    });
    linear("reads_the_gemm_output_twice", [](GraphBuilder& b, int mm, int) {
        return b.binary(OpId::mul, mm, b.unary(OpId::sigmoid, mm));
    });
    linear("softmax_over_gemm_rows", [](GraphBuilder& b, int mm, int) {
        return softmax_last(b, b.scalar(OpId::mul, mm, 0.125));
    });
    {  // the GEMM output is returned too: it must hold the raw GEMM values
        GraphBuilder b;
        int x = b.input({s0, K}, "x"), w = b.input({K, N}, "w");
        int mm = b.matmul(x, w);
        b.output(mm);
        b.output(b.unary(OpId::relu, mm));
        out.push_back({"gemm_output_also_returned", b.graph, [=](int64_t m) {
                           return std::vector<Tensor>{randn({m, K}), randn({K, N})};
                       }});
    }
    {  // batched: q @ k^T * scale + mask -> softmax, then @ v (attention)
        GraphBuilder b;
        int q = b.input({2, s0, 16}, "q"), k = b.input({2, s0, 16}, "k"),
            v = b.input({2, s0, 16}, "v"), mask = b.input({s0, s0}, "mask");
        int scores = b.binary(
            OpId::add, b.scalar(OpId::mul, b.matmul(q, b.permute(k, {0, 2, 1})), 0.25), mask);
        b.output(b.unary(OpId::relu, b.matmul(softmax_last(b, scores), v)));
        out.push_back({"batched_attention", b.graph, [=](int64_t m) {
                           return std::vector<Tensor>{randn({2, m, 16}), randn({2, m, 16}),
                                                      randn({2, m, 16}), randn({m, m})};
                       }});
        out.back().ms = {1, 7, 129};
    }
    {  // [B, T, E] @ W^T: a batch of rows times one matrix, folded into one GEMM
        GraphBuilder b;
        int x = b.input({3, s0, K}, "x"), w = b.input({N, K}, "w"), r = b.input({3, s0, N}, "r");
        int mm = b.matmul(x, b.permute(w, {1, 0}));
        b.output(b.binary(OpId::add, b.unary(OpId::relu, mm), r));
        out.push_back(
            {"batch_times_one_matrix", b.graph, [=](int64_t m) {
                 return std::vector<Tensor>{randn({3, m, K}), randn({N, K}), randn({3, m, N})};
             }});
    }
    {  // the MLP's two linears, each with its epilogue; the second reads the first's result
        GraphBuilder b;
        int x = b.input({s0, K}, "x"), w1 = b.input({K, N}, "w1"), w2 = b.input({N, K}, "w2"),
            b1 = b.input({N}, "b1");
        int h = gelu_tanh(b, b.binary(OpId::add, b.matmul(x, w1), b1));
        b.output(b.unary(OpId::relu, b.matmul(h, w2)));
        out.push_back({"two_linears", b.graph, [=](int64_t m) {
                           return std::vector<Tensor>{randn({m, K}), randn({K, N}), randn({N, K}),
                                                      randn({N})};
                       }});
    }
    {  // GELU's backward multiplies grad @ W by gelu'(h), with two GEMMs in a row before it
        GraphBuilder b;
        int g = b.input({s0, N}, "g"), w = b.input({N, K}, "w"), h = b.input({s0, K}, "h"),
            x = b.input({s0, K}, "x");
        int gx = b.matmul(g, w);                     // [m, K]
        int gw = b.matmul(b.permute(x, {1, 0}), h);  // [K, m] @ [m, K]
        int d = b.scalar(OpId::add, b.unary(OpId::tanh, h), 1.0);
        b.output(b.binary(OpId::mul, gx, d));
        b.output(b.unary(OpId::neg, gw));
        out.push_back({"backward_shape_two_gemms_then_epilogue", b.graph, [=](int64_t m) {
                           return std::vector<Tensor>{randn({m, N}), randn({N, K}), randn({m, K}),
                                                      randn({m, K})};
                       }});
    }
    {  // not epilogues: a transposed read of the GEMM output, and a sum over all of it
        GraphBuilder b;
        int x = b.input({s0, K}, "x"), w = b.input({K, N}, "w"), c = b.input({N, s0}, "c");
        int mm = b.matmul(x, w);
        b.output(b.binary(OpId::add, b.permute(mm, {1, 0}), c));
        b.output(b.reduce(OpId::sum, mm, {}, false));
        out.push_back({"transposed_read_is_not_an_epilogue", b.graph,
                       [=](int64_t m) {
                           return std::vector<Tensor>{randn({m, K}), randn({K, N}), randn({N, m})};
                       },
                       false});
    }
    {  // float64 matmul: a fallback kernel, still correct
        GraphBuilder b;
        int x = b.input({s0, K}, "x", DType::float64), w = b.input({K, N}, "w", DType::float64);
        int mm = b.node(OpId::matmul, {x, w}, {}, {s0, N}, DType::float64);
        b.output(b.node(OpId::relu, {mm}, {}, {s0, N}, DType::float64));
        out.push_back(
            {"float64_matmul_falls_back", b.graph,
             [=](int64_t m) {
                 return std::vector<Tensor>{randn({m, K}).to(float64), randn({K, N}).to(float64)};
             },
             false});
    }
    return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(epilogue)

BOOST_AUTO_TEST_CASE(fused_epilogues_equal_eager_and_the_unfused_schedule) {
    std::vector<Case> all = cases();
    std::vector<LGraph> graphs;
    for (const Case& c : all) graphs.push_back(c.graph);
    std::vector<CompiledCpuGraph> fused = compile_cpu_many(graphs), unfused;
    {
        ScopedEnv off("KILN_EPILOGUE", "0");
        unfused = compile_cpu_many(graphs);
    }
    for (size_t i = 0; i < all.size(); ++i) {
        const Case& c = all[i];
        BOOST_TEST((fused_steps(fused[i].schedule()) > 0) == c.fused,
                   c.name << "\n"
                          << fused[i].schedule().print());
        BOOST_TEST(fused_steps(unfused[i].schedule()) == 0, c.name);
        for (const char* order : {"blocks", "blas"})
            for (int threads : {1, 2})
                for (const char* rows : {"16", "0"}) {  // 0: the default block size
                    ScopedEnv o("KILN_EPILOGUE_THREADS", order), r("KILN_EPILOGUE_ROWS", rows);
                    set_num_threads(threads);
                    for (int64_t m : c.ms) {
                        manual_seed(uint64_t(m));
                        std::vector<Tensor> in = c.inputs(m);
                        std::vector<Tensor> got = fused[i].run(in), plain = unfused[i].run(in),
                                            want = run_eager(c.graph, in);
                        BOOST_REQUIRE(got.size() == want.size());
                        for (size_t o = 0; o < got.size(); ++o) {
                            // BLAS may sum a block of 16 rows in another order than the whole
                            // (its edge kernels): 1.3e-5 seen for a sum over 1000 products.
                            BOOST_TEST(relative_error(got[o], want[o]) <= 5e-5,
                                       relative_error(got[o], want[o])
                                           << " " << c.name << " output " << o << " m=" << m << " "
                                           << order << " threads=" << threads << " rows=" << rows);
                            BOOST_TEST(relative_error(got[o], plain[o]) <= 5e-5,
                                       c.name << " output " << o << " m=" << m);
                        }
                    }
                }
    }
    set_num_threads(0);
}

BOOST_AUTO_TEST_CASE(the_returned_gemm_output_is_not_overwritten_and_others_are_in_place) {
    std::vector<Case> all = cases();
    for (const Case& c : all) {
        Schedule s = fuse_epilogues(schedule(c.graph));
        for (size_t k = 0; k + 1 < s.kernels.size(); ++k) {
            if (!s.has_epilogue(int(k))) continue;
            int in_place = s.kernels[k + 1].in_place;
            if (c.name == "gemm_output_also_returned") BOOST_TEST(in_place == -1);
            if (c.name == "gelu_tanh" || c.name == "two_linears") BOOST_TEST(in_place >= 0, c.name);
        }
    }
    // The returned GEMM output holds the raw values although relu reads it in the same step.
    for (const Case& c : all)
        if (c.name == "gemm_output_also_returned") {
            CompiledCpuGraph f = compile_cpu(c.graph);
            Tensor x = randn({50, 24}), w = randn({24, 40});
            std::vector<Tensor> got = f.run({x, w});
            BOOST_TEST(relative_error(got[0], matmul(x, w)) <= 1e-6);
            BOOST_TEST(relative_error(got[1], relu(matmul(x, w))) <= 1e-6);
        }
}

BOOST_AUTO_TEST_CASE(non_contiguous_inputs_and_transposed_views) {
    // x arrives transposed ([K, M] memory), W as a view of a bigger tensor's slice.
    GraphBuilder b;
    int x = b.input({37, 24}, "x"), w = b.input({40, 24}, "w"), bias = b.input({40}, "bias");
    b.output(gelu_erf(b, b.binary(OpId::add, b.matmul(x, b.permute(w, {1, 0})), bias)));
    CompiledCpuGraph f = compile_cpu(b.graph);
    BOOST_TEST(fused_steps(f.schedule()) == 1);
    Tensor xt = randn({24, 37}).transpose(0, 1), wide = randn({40, 48}),
           w_view = wide.slice(1, 0, 48, 2), bb = randn({40});
    BOOST_REQUIRE(!xt.is_contiguous());
    std::vector<Tensor> in = {xt, w_view, bb};
    BOOST_TEST(relative_error(f.run(in)[0], run_eager(b.graph, in)[0]) <= 1e-5);
}

BOOST_AUTO_TEST_CASE(linear_bias_gelu_compiles_to_one_fused_kernel) {
    auto fn = [](Tensor x, Tensor w, Tensor bias) {
        return nn::functional::gelu(matmul(x, w.t()) + bias, "tanh");
    };
    auto f = compile(fn);
    Tensor x = randn({64, 32}), w = randn({48, 32}), bias = randn({48});
    BOOST_TEST(allclose(f(x, w, bias), fn(x, w, bias), 1e-5, 1e-5));
    CompiledGraphInfo info = last_compiled();
    BOOST_TEST(info.generated_kernels == 1);
    std::istringstream lines(info.schedule);
    int n = 0, fused = 0;
    for (std::string line; std::getline(lines, line);)
        n += !line.empty(), fused += line.find("blas+epilogue") != std::string::npos;
    BOOST_TEST(n == 1, info.schedule);
    BOOST_TEST(fused == 1, info.schedule);
    BOOST_TEST(info.schedule.find("in place") != std::string::npos, info.schedule);
    BOOST_TEST(info.source.find("_rows(float* const* buffers") != std::string::npos);
    std::ostringstream explained;
    explained << jit::explain_compiled(f);  // the matmul is not reported as left to eager
    BOOST_TEST(explained.str().find("Not fused") == std::string::npos, explained.str());
    ScopedEnv off("KILN_EPILOGUE", "0");
    auto g = compile(fn);
    BOOST_TEST(allclose(g(x, w, bias), fn(x, w, bias), 1e-5, 1e-5));
    BOOST_TEST(last_compiled().schedule.find("blas+epilogue") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(in_place_consumers_of_a_matmul_compile_and_match_eager) {
    auto fn = [](Tensor x, Tensor w, Tensor bias) {
        Tensor y = matmul(x, w);
        y.add_(bias);
        y.mul_(0.5);
        return y * 2.0;
    };
    auto f = compile(fn);
    for (int64_t m : {5, 130}) {
        Tensor x = randn({m, 16}), w = randn({16, 24}), bias = randn({24});
        BOOST_TEST(allclose(f(x, w, bias), fn(x, w, bias), 1e-5, 1e-5));
    }
}

// A weight the compiled graph multiplies again is packed once (GemmPlan::packed_b), and then
// the GEMM runs in 128-row blocks over the threads, each block's epilogue right after it
// (cpu_epilogue.cpp, block_rows / threads_over_blocks): calls after the first equal eager with
// packing off, for row counts that leave a partial last block, at 1 and 2 threads, and after
// the weight is written in place (the next call packs the new values).
BOOST_AUTO_TEST_CASE(epilogues_on_a_packed_weight_equal_eager) {
    // The packed path itself, as on a CPU where it is measured faster (tensor/gemm.cpp).
    ScopedEnv onednn("KILN_GEMM", "onednn"), always("KILN_GEMM_PACK", "1");
    GraphBuilder b;
    int x = b.input({s0, 256}, "x"), w = b.input({384, 256}, "w"), bias = b.input({384}, "bias");
    b.output(gelu_erf(b, b.binary(OpId::add, b.matmul(x, b.permute(w, {1, 0})), bias)));
    CompiledCpuGraph f = compile_cpu(b.graph);
    BOOST_TEST(fused_steps(f.schedule()) == 1);
    manual_seed(61);
    Tensor weight = randn({384, 256}) * 0.1, bb = randn({384});
    for (int threads : {1, 2}) {
        set_num_threads(threads);
        for (int64_t m : {1000, 129, 64}) {
            Tensor xm = randn({m, 256});
            std::vector<Tensor> in = {xm, weight, bb};
            std::vector<Tensor> want;
            {
                ScopedEnv off("KILN_GEMM_PACK", "0");
                want = run_eager(b.graph, in);
            }
            int64_t parts = kiln::detail::gemm_pack_stats().packed_parts;
            for (int call = 0; call < 3; ++call)
                BOOST_TEST(relative_error(f.run(in)[0], want[0]) <= 5e-5,
                           "m=" << m << " threads=" << threads << " call " << call);
#ifdef KILN_HAVE_DNNL
            if (m * 384 * 256 >= (int64_t(1) << 19))  // oneDNN's GEMMs: the packed path ran
                BOOST_TEST(kiln::detail::gemm_pack_stats().packed_parts > parts, "m=" << m);
#endif
            weight.copy_(weight * -0.5);  // in place: the packed weight is stale
        }
    }
    set_num_threads(0);
}

BOOST_AUTO_TEST_SUITE_END()
