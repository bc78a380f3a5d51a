// CUDA row kernels whose row fits in registers (codegen/register_row.h, docs/cuda.md "Row
// kernels"): softmax, log_softmax, layer_norm and attention's masked softmax, forward and
// backward, for rows of 1 to 20000 elements. Without a GPU: the generated source reads each
// array along the row in one place and writes each output in one place (the fill, or one
// pass), and NVRTC compiles it. On a GPU: values and gradients against eager on the GPU and
// on the CPU, with rows of large values, -inf entries, fully -inf rows and fully masked rows.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <functional>
#include <iostream>
#include <regex>

#include "codegen/cuda_backend.h"
#include "codegen/emit_cuda.h"
#include "codegen/inductor.h"
#include "codegen/lower_graph.h"
#include "jit/aot/aot.h"
#include "kiln.h"
#include "nn/functional.h"
#include "tensor/cuda_runtime.h"
#include "tests/codegen/compare.h"
#include "tests/cuda/needs_gpu.h"

using namespace kiln;
using namespace kiln::codegen;
namespace utf = boost::unit_test;
namespace F = kiln::nn::functional;

namespace {

using kiln_test::kCuda;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// One row of length n per case: the function, and its inputs for `rows` rows (on the CPU).
struct Case {
    std::string name;
    Fn fn;
    std::function<std::vector<Tensor>(int64_t rows, int64_t n)> inputs;
};

// Rows with what a row kernel must survive: row 1 shifted by 3e4 (softmax's amax matters),
// row 2 entirely -inf (0/0: NaN, as eager), row 3 with every third entry -inf.
Tensor hard_rows(int64_t rows, int64_t n) {
    Tensor x = randn({rows, n}) * 3.0;
    std::vector<float> v = x.to_vector<float>();
    for (int64_t j = 0; j < n; ++j) {
        if (rows > 1) v[size_t(n + j)] += 3e4f;
        if (rows > 2) v[size_t(2 * n + j)] = -INFINITY;
        if (rows > 3 && j % 3 == 1) v[size_t(3 * n + j)] = -INFINITY;
    }
    return tensor(v, {rows, n});
}

// A boolean mask [L, n] (true: attend) whose row 1 is all false: that query attends to nothing.
Tensor attention_mask(int64_t L, int64_t n) {
    Tensor m = rand({L, n}) < 0.7;
    std::vector<float> v = m.to(DType::float32).to_vector<float>();
    if (L > 1)
        for (int64_t j = 0; j < n; ++j) v[size_t(n + j)] = 0;
    return tensor(v, {L, n}) != 0.0;
}

std::vector<Case> cases() {
    return {
        {"softmax", [](const std::vector<Tensor>& in) { return softmax(in[0], -1); },
         [](int64_t rows, int64_t n) { return std::vector<Tensor>{hard_rows(rows, n)}; }},
        {"log_softmax", [](const std::vector<Tensor>& in) { return log_softmax(in[0], -1); },
         [](int64_t rows, int64_t n) { return std::vector<Tensor>{hard_rows(rows, n)}; }},
        {"layer_norm",
         [](const std::vector<Tensor>& in) {
             return F::layer_norm(in[0], {in[0].size(-1)}, in[1], in[2], 1e-5);
         },
         [](int64_t rows, int64_t n) {  // large values: row 1 scaled by 1e3
             std::vector<float> scale(size_t(rows), 3.0f);
             if (rows > 1) scale[1] = 3e3f;
             return std::vector<Tensor>{randn({rows, n}) * tensor(scale, {rows, 1}), randn({n}),
                                        randn({n})};
         }},
        {"masked attention",  // scale, mask, a fully masked query: GPT's attention softmax
         [](const std::vector<Tensor>& in) {
             return F::attention_weights(in[0], in[1], in[2], false, std::nullopt);
         },
         [](int64_t rows, int64_t n) {
             int64_t L = std::max<int64_t>(2, rows / 2);
             return std::vector<Tensor>{randn({1, 2, L, 16}) * 2.0, randn({1, 2, n, 16}),
                                        attention_mask(L, n)};
         }},
        {"causal attention",
         [](const std::vector<Tensor>& in) {
             return F::attention_weights(in[0], in[1], Tensor(), true, std::nullopt);
         },
         [](int64_t rows, int64_t n) {
             int64_t L = std::max<int64_t>(2, rows / 2);
             return std::vector<Tensor>{randn({1, 2, L, 16}) * 2.0, randn({1, 2, n, 16})};
         }},
    };
}

// The forward and backward graphs (AOT halves) of `fn` at `inputs` (which need grad), lowered
// and placed on the GPU, as compile() would hand them to the CUDA emitter.
std::vector<LGraph> cuda_halves(const Fn& fn, std::vector<Tensor> inputs) {
    std::vector<LGraph> out;
    jit::Backend capture(
        [&out](const jit::Graph& g, std::span<const Tensor> ex) -> jit::CompiledFn {
            jit::aot::AotPlan plan = jit::aot::plan(g, ex);
            for (const auto& half : {plan.forward, plan.backward}) {
                Lowered lowered = lower(*half);
                BOOST_REQUIRE_MESSAGE(lowered.graph, lowered.why_not);
                lowered.graph->device = kCuda;
                for (LNode& n : lowered.graph->nodes)
                    if (op_info(n.op).kind == OpKind::factory) n.attrs.device = kCuda;
                out.push_back(*lowered.graph);
            }
            auto graph = std::make_shared<jit::Graph>(g);
            return [graph](std::span<const Tensor> in) { return jit::interpret(*graph, in); };
        });
    for (Tensor& t : inputs)
        if (t.dtype() == DType::float32) t.requires_grad_();
    auto f = compile(fn, {.backend = capture});
    f(inputs);
    return out;
}

int count(const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

// Each generated kernel's text that has a register variant: that variant, split into its
// fill loop and its passes along the row.
std::vector<std::pair<std::string, std::vector<std::string>>> register_variants(
    const std::string& source) {
    std::vector<std::pair<std::string, std::vector<std::string>>> out;
    const std::string open = "// the row in registers", other = "} else {  // a long row";
    for (size_t at = source.find(open); at != std::string::npos; at = source.find(open, at + 1)) {
        size_t head = source.rfind("__global__ void ", at);
        std::string name = source.substr(head + 16, source.find('(', head) - head - 16);
        std::string text = source.substr(at, source.find(other, at) - at);
        std::vector<std::string> sections;
        size_t begin = 0;
        for (size_t p = text.find("// pass along the row"); p != std::string::npos;
             p = text.find("// pass along the row", p + 1))
            sections.push_back(text.substr(begin, p - begin)), begin = p;
        sections.push_back(text.substr(begin));
        out.push_back({name, sections});
    }
    return out;
}

// The arrays a kernel reads or writes (its `NAME_ptr` parameters).
std::vector<std::string> kernel_arrays(const std::string& source, const std::string& kernel) {
    size_t head = source.find("void " + kernel + "(");
    std::string params = source.substr(head, source.find(')', head) - head);
    std::vector<std::string> out;
    std::regex ptr(R"((\w+_ptr)\b)");
    for (std::sregex_iterator it(params.begin(), params.end(), ptr), end; it != end; ++it)
        out.push_back((*it)[1]);
    return out;
}

// Whether `section` reads or writes array `name` along the row: an index that depends on j
// (a per-row value's index does not).
bool touches_along_row(const std::string& section, const std::string& name) {
    std::regex access(name + R"(\[([^\]]*)\])");
    for (std::sregex_iterator it(section.begin(), section.end(), access), end; it != end; ++it)
        if (std::regex_search((*it)[1].str(), std::regex(R"(\bj\b|\bk\d)"))) return true;
    return false;
}

std::string compile_ptx(const std::string& source) {
    return cuda::detail::compile_cubin(source, "generated", 90, /*ptx_only=*/true);
}

const std::vector<int64_t> kRowLengths = {1, 31, 32, 33, 1000, 1023, 1024, 4096, 5000};

}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_register_rows)

// Every case's forward and backward kernels, for every row length: each kernel that has a
// register variant reads each array along the row in one section only (the fill or one pass)
// and writes each output in one section: one read and one write of the row. The source
// compiles with NVRTC.
BOOST_AUTO_TEST_CASE(register_rows_read_and_write_each_array_once_and_compile_with_nvrtc) {
    bool nvrtc = kiln_test::have_nvrtc("cuda register rows");
    manual_seed(11);
    for (int64_t n : kRowLengths) {
        std::vector<LGraph> graphs;
        for (const Case& c : cases()) {
            std::vector<LGraph> halves = cuda_halves(c.fn, c.inputs(4, n));
            graphs.insert(graphs.end(), halves.begin(), halves.end());
        }
        std::string source = emit_cuda_many(schedule_many(graphs));
        BOOST_TEST_CONTEXT("rows of " << n) {
            auto variants = register_variants(source);
            // softmax, log_softmax, layer_norm, two attentions: each forward has one (a row
            // of one element is a value per row: read once without one)
            if (n > 1) BOOST_TEST(variants.size() >= 5u);
            for (const auto& [kernel, sections] : variants)
                for (const std::string& array : kernel_arrays(source, kernel)) {
                    int touching = 0;
                    for (const std::string& s : sections) touching += touches_along_row(s, array);
                    BOOST_TEST(touching <= 1, kernel << " touches " << array << " along the row in "
                                                     << touching << " sections");
                }
            if (nvrtc) BOOST_CHECK_NO_THROW(compile_ptx(source));
        }
    }
}

// softmax: the fill loads the row (float4 when aligned), amax and the sum of exp read
// registers, exp is computed once and kept for the store pass, which writes float4.
BOOST_AUTO_TEST_CASE(softmax_keeps_its_exponentials_and_moves_float4) {
    manual_seed(12);
    Case softmax_case = cases()[0];
    std::vector<LGraph> halves = cuda_halves(softmax_case.fn, softmax_case.inputs(64, 1024));
    std::string source = emit_cuda(schedule(halves[0]));
    auto variants = register_variants(source);
    BOOST_REQUIRE(variants.size() == 1u);
    const std::vector<std::string>& sections = variants[0].second;
    BOOST_REQUIRE(sections.size() == 4u);  // fill, amax, sum of exp, store
    BOOST_TEST(count(sections[0], "*reinterpret_cast<const float4*>(") == 1);
    std::string passes = sections[1] + sections[2] + sections[3];
    BOOST_TEST(count(passes, "exp(") == 1, "exp once, in the sum's pass");
    BOOST_TEST(count(sections[2], "_c[g * 4 + c] = ") == 1, "the sum's pass keeps exp");
    BOOST_TEST(count(sections[3], "*reinterpret_cast<float4*>(") == 1);
    // 1024 elements, 128 threads for many rows (8 a thread): two float4 groups a thread.
    BOOST_TEST(count(source, "if (row_size <= 8 * (long long)blockDim.x)") == 1);
    BOOST_TEST(cuda_row_block(4096, 1024, 132) == 128);
    // Rows of up to 256 get one warp, which combines with shuffles alone.
    BOOST_TEST(cuda_row_block(4096, 256, 132) == 32);
    BOOST_TEST(count(source, "if (blockDim.x <= 32) return v;") == 1);
}

// Attention's softmax keeps the masked, scaled scores (one float array), not the scores and
// the mask it was computed from.
BOOST_AUTO_TEST_CASE(masked_attention_keeps_the_prologues_result) {
    manual_seed(13);
    Case attention = cases()[3];
    std::vector<LGraph> halves = cuda_halves(attention.fn, attention.inputs(16, 128));
    std::string source = emit_cuda(schedule(halves[0]));
    auto variants = register_variants(source);
    BOOST_REQUIRE(variants.size() == 1u);
    const std::string& fill = variants[0].second[0];
    BOOST_TEST(count(fill, "_c[g * 4 + c] = ") == 1, fill);
    BOOST_TEST(std::regex_search(fill, std::regex(R"(where_\d+_c\[g \* 4 \+ c\] = )")), fill);
}

// Rows longer than 4 float4 groups of 1024 threads keep only the general kernel.
BOOST_AUTO_TEST_CASE(rows_past_the_register_bound_read_from_memory) {
    manual_seed(14);
    Case softmax_case = cases()[0];
    for (int64_t n : {16384, 16385}) {
        std::vector<LGraph> halves = cuda_halves(softmax_case.fn, softmax_case.inputs(2, n));
        std::string source = emit_cuda(schedule(halves[0]));
        BOOST_TEST(register_variants(source).size() == (n <= 16384 ? 1u : 0u), "rows of " << n);
    }
}

// ---- on the GPU

BOOST_AUTO_TEST_CASE(register_rows_match_eager_values_and_gradients,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda register rows"})) {
    manual_seed(15);
    for (const Case& c : cases()) {
        for (int64_t n : kRowLengths) {
            // many rows: blocks of cuda_row_block_for(n); fewer rows than SMs: 1024 threads
            std::vector<int64_t> row_counts = {150};
            if (n == 33 || n == 1024 || n == 5000) row_counts.push_back(3);
            for (int64_t rows : row_counts) {
                BOOST_TEST_CONTEXT(c.name << ", " << rows << " rows of " << n) {
                    std::vector<Tensor> cpu = c.inputs(rows, n), gpu, eager;
                    for (Tensor& t : cpu) {
                        if (t.dtype() == DType::float32) t.requires_grad_();
                        gpu.push_back(t.detach().cuda());
                        eager.push_back(t.detach().cuda());
                        if (t.requires_grad())
                            gpu.back().requires_grad_(), eager.back().requires_grad_();
                    }
                    auto f = compile(c.fn);
                    Tensor got = f(gpu), want = c.fn(eager), on_cpu = c.fn(cpu);
                    codegen::CompiledGraphInfo forward = codegen::last_compiled();
                    BOOST_TEST(forward.cuda);
                    if (n > 1)  // a row of one element is read once without registers
                        BOOST_TEST(count(forward.source, "// the row in registers") >= 1,
                                   "a generated register row ran");
                    BOOST_TEST(kiln_test::relative_error(got.detach().cpu(), want.detach().cpu()) <
                               1e-5);
                    BOOST_TEST(kiln_test::relative_error(got.detach().cpu(), on_cpu.detach()) <
                               1e-5);
                    Tensor g = randn(on_cpu.shape());
                    (got * g.cuda()).sum().backward();
                    (want * g.cuda()).sum().backward();
                    (on_cpu * g).sum().backward();
                    for (size_t i = 0; i < cpu.size(); ++i) {
                        if (!cpu[i].requires_grad()) continue;
                        BOOST_TEST(kiln_test::relative_error(gpu[i].grad().cpu(),
                                                             eager[i].grad().cpu()) < 1e-4,
                                   "gradient " << i << " vs eager gpu");
                        BOOST_TEST(
                            kiln_test::relative_error(gpu[i].grad().cpu(), cpu[i].grad()) < 1e-4,
                            "gradient " << i << " vs eager cpu");
                    }
                }
            }
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()
