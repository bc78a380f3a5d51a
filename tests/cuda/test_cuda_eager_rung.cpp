// Eager CUDA as the first rung of the CUDA dialect (codegen/emit_eager_cuda.h): its kernels
// write each op's statement exactly as the generated kernels do (checked here without a GPU,
// on the source text), and on a GPU the generated kernels compute what the eager ones compute.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "codegen/emit_cuda.h"
#include "codegen/emit_eager_cuda.h"
#include "codegen/inductor.h"
#include "kiln.h"
#include "tensor/kernels.h"
#include "tensor/philox.h"
#include "tensor/reductions.h"
#include "tests/codegen/lgraph_builder.h"
#include "tests/cuda/needs_gpu.h"
#include "tests/scoped_env.h"
#include "tests/tensor/special_values.h"

using namespace kiln;
using namespace kiln::codegen;
namespace utf = boost::unit_test;

namespace {

using kiln_test::kCuda;

// `text` with each whole word of `names` replaced (operand names to placeholders).
std::string rename(std::string text, const std::map<std::string, std::string>& names) {
    for (const auto& [from, to] : names)
        text = std::regex_replace(text, std::regex("\\b" + from + "\\b"), to);
    return text;
}

// The text between `marker` and the next ";\n" in `source` ("" when absent).
std::string after(const std::string& source, const std::string& marker) {
    size_t at = source.find(marker);
    if (at == std::string::npos) return "";
    at += marker.size();
    return source.substr(at, source.find(";\n", at) - at);
}

// The statement the CUDA emitter writes for one node `op` over inputs of `dtypes` (named
// #0, #1, ...), from a one-node graph on the device.
std::string generated_statement(OpId op, const std::vector<DType>& dtypes, DType out,
                                const Attrs& attrs = {}) {
    testing::GraphBuilder b;
    std::vector<int> inputs;
    std::map<std::string, std::string> names;
    for (size_t i = 0; i < dtypes.size(); ++i) {
        inputs.push_back(b.input({2, 3}, "in" + std::to_string(i), dtypes[i]));
        names["in" + std::to_string(i) + "_" + std::to_string(inputs.back())] =
            "#" + std::to_string(i);
    }
    int v = b.node(op, inputs, attrs, {2, 3}, out);
    b.output(v);
    b.graph.device = kCuda;
    Schedule s = schedule(b.graph);
    return rename(after(emit_cuda(s), " " + s.value_name(v) + " = "), names);
}

// The statement of an eager kernel source (its arrays v1, v2, v3 named #0, #1, #2).
std::string eager_statement(const std::string& source) {
    return rename(after(source, "out[o[0]] = "), {{"v1", "#0"}, {"v2", "#1"}, {"v3", "#2"}});
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_eager_rung)

// Every eager elementwise kernel (every pointwise op of the table in every dtype, with a
// float64 operand too, every cast, where) computes the statement the CUDA emitter writes for
// the same node and dtypes, read from the kernel's own header line ("add(int64, float64) in
// float64 to float64"): the op table's math, with the same conversions. Scalar operands
// differ on purpose: a literal in generated code, the kernel's `double scalar` argument in
// eager code (one kernel for any value), so kernels with one are left out here.
BOOST_AUTO_TEST_CASE(eager_kernels_compute_each_op_with_the_generated_kernels_statement) {
    std::map<std::string, std::string> eager;
    for (const auto& [label, source] : cuda_eager_kernel_sources()) eager[label] = source;
    const DType dtypes[] = {DType::float32, DType::float64, DType::int64, DType::boolean};
    auto dtype_named = [&](const std::string& name) {
        for (DType dt : dtypes)
            if (name == dtype_name(dt)) return dt;
        BOOST_FAIL("no dtype named " << name);
        return DType::float32;
    };
    const std::regex header("// kiln_elementwise: (\\w+)\\(([^)]*)\\) in \\w+ to (\\w+),");
    std::set<OpId> compared;
    for (const auto& [label, source] : eager) {
        std::smatch m;
        if (!std::regex_search(source, m, header) || m[2].str().find("scalar") != std::string::npos)
            continue;
        BOOST_TEST_CONTEXT(label) {
            std::vector<DType> in;
            std::stringstream operands(m[2].str());
            for (std::string name; std::getline(operands >> std::ws, name, ',');)
                in.push_back(dtype_named(name));
            OpId op = op_by_name(m[1].str());
            std::string want = generated_statement(op, in, dtype_named(m[3].str()));
            BOOST_TEST(!want.empty());
            BOOST_TEST(eager_statement(source) == want);
            compared.insert(op);
        }
    }
    for (int i = 0; i < kOpCount; ++i)  // every op with math, and cast and where, was compared
        if ((op_info(OpId(i)).kind == OpKind::pointwise && op_info(OpId(i)).math) ||
            OpId(i) == OpId::cast || OpId(i) == OpId::where)
            BOOST_TEST(compared.count(OpId(i)), op_name(OpId(i))
                                                    << " has no eager kernel compared");
    // full converts its double argument to the dtype as a cast from float64 converts.
    for (DType dt : dtypes)
        for (const char* layout : {"", " contiguous"})
            BOOST_TEST(
                after(eager[std::string("full ") + dtype_name(dt) + layout], "out[o[0]] = ") ==
                rename(
                    after(eager[std::string("cast float64 to ") + dtype_name(dt)], "out[o[0]] = "),
                    {{"v1", "scalar"}}));
}

// Reductions and random draws come from the same tables and helpers as the generated kernels:
// the block combine of tensor/reductions.def and the Philox draws of tensor/philox.h.
BOOST_AUTO_TEST_CASE(eager_reductions_and_draws_use_the_dialects_block_combine_and_philox) {
    for (OpId op : reduction_ops())
        for (DType dt : {DType::float32, DType::float64, DType::int64}) {
            BOOST_TEST_CONTEXT(op_name(op) << " " << dt) {
                std::string source = eager_cuda_reduce(op, dt);
                DType acc = op == OpId::sum && dt == DType::float32 ? DType::float64
                                                                    : dt;  // float32 sums in double
                BOOST_TEST(source.find("acc = block_" + std::string(op_name(op)) + "(acc, ") !=
                           std::string::npos);
                BOOST_TEST(source.find(std::string(cuda_c_type(acc)) + " acc = " +
                                       reduction_identity(op, acc) + ";") != std::string::npos);
                std::string combine = emit_detail::reduction_combine(op, "acc", "");
                BOOST_TEST(source.find("acc = " + combine.substr(0, combine.find("acc") + 3)) !=
                           std::string::npos);
            }
        }
    for (OpId op : {OpId::rand, OpId::randn, OpId::randint}) {
        std::string source =
            eager_cuda_random(op, op == OpId::randint ? DType::int64 : DType::float32);
        BOOST_TEST(source.find(kiln_random::kRandomSource) != std::string::npos);
        BOOST_TEST(
            source.find("if (graph_state) seed = graph_state[0], offset += graph_state[1];") !=
            std::string::npos);
    }
    BOOST_CHECK_THROW(eager_cuda_random(OpId::sum, DType::float32), Error);
}

// The layering that lets tensor/kernels_cuda.cpp call into codegen/: the rung and the files it
// includes from codegen/ (recursively) include only each other and tensor/ headers, never the
// scheduler or jit/; and emit_eager_cuda.h is the only codegen/ header any tensor/ file includes.
BOOST_AUTO_TEST_CASE(the_rung_reads_only_tensor_so_eager_cuda_may_call_it) {
    namespace fs = std::filesystem;
    const fs::path root = KILN_SOURCE_DIR;
    auto includes = [&](const std::string& file) {
        std::ifstream in(root / file);
        BOOST_REQUIRE_MESSAGE(in, "cannot read " << file);
        std::vector<std::string> out;
        std::regex include("^#include \"([^\"]+)\"");
        std::smatch m;
        for (std::string line; std::getline(in, line);)
            if (std::regex_search(line, m, include)) out.push_back(m[1]);
        return out;
    };
    const std::set<std::string> rung = {"codegen/emit_eager_cuda.h", "codegen/emit_eager_cuda.cpp", "codegen/cuda_dialect.h",
                                        "codegen/cuda_dialect.cpp",  "codegen/emit_expr.h",         "codegen/emit_expr.cpp"};
    for (const std::string& file : rung)
        for (const std::string& inc : includes(file))
            BOOST_TEST((inc.rfind("tensor/", 0) == 0 || rung.count(inc)), file << " includes " << inc);
    int tensor_files = 0;
    for (const auto& entry : fs::directory_iterator(root / "tensor")) {
        std::string file = "tensor/" + entry.path().filename().string();
        ++tensor_files;
        for (const std::string& inc : includes(file))
            if (inc.rfind("codegen/", 0) == 0)
                BOOST_TEST((file == "tensor/kernels_cuda.cpp" && inc == "codegen/emit_eager_cuda.h"), file << " includes " << inc);
    }
    BOOST_TEST(tensor_files > 20);
}

// On the GPU, a compiled function applying every pointwise op of the table (one graph, its
// kernels generated) equals the eager CUDA kernels, element by element: IEEE special values
// in float32 (every pair), random float64 and int64 values.
BOOST_AUTO_TEST_CASE(generated_pointwise_kernels_equal_the_eager_rung,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda eager rung"})) {
    std::vector<OpId> ops;
    for (int i = 0; i < kOpCount; ++i)
        if (op_info(OpId(i)).kind == OpKind::pointwise && op_info(OpId(i)).math)
            ops.push_back(OpId(i));
    auto every_op = [&](const Tensor& x, const Tensor& y) {
        std::vector<Tensor> out;
        for (OpId op : ops)
            out.push_back(op_info(op).arity == 1 ? dispatch(op, {x}) : dispatch(op, {x, y}));
        return out;
    };
    kiln_test::ScopedEnv always_generated("KILN_CHOOSE", "0");  // never the eager path in disguise
    auto compiled = compile(every_op);
    auto [xs, ys] = kiln_test::special_pairs();
    manual_seed(5);
    std::vector<std::pair<Tensor, Tensor>> inputs = {
        {tensor(xs, {int64_t(xs.size())}), tensor(ys, {int64_t(ys.size())})},
        {randn({1000}, {.dtype = DType::float64}) * 3.0,
         randn({1000}, {.dtype = DType::float64}) * 3.0},
        {randint(-40, 40, {1000}), randint(-40, 40, {1000})}};
    for (const auto& [x, y] : inputs) {
        Tensor xc = x.cuda(), yc = y.cuda();
        std::vector<Tensor> got = compiled(xc, yc), want = every_op(xc, yc);
        BOOST_REQUIRE(got.size() == ops.size());
        BOOST_TEST(codegen::last_compiled().source.find("__global__") != std::string::npos);
        for (size_t i = 0; i < ops.size(); ++i) {
            BOOST_TEST_CONTEXT(op_name(ops[i]) << " on " << x.dtype()) {
                BOOST_TEST(got[i].dtype() == want[i].dtype());
                std::vector<double> g = got[i].cpu().to(DType::float64).to_vector<double>(),
                                    w = want[i].cpu().to(DType::float64).to_vector<double>();
                int failures = 0;
                for (size_t k = 0; k < g.size() && failures < 5; ++k) {
                    bool same = want[i].dtype() == DType::float32
                                    ? kiln_test::agrees(g[k], w[k])
                                    : (std::isnan(g[k]) && std::isnan(w[k])) || g[k] == w[k] ||
                                          std::abs(g[k] - w[k]) <= 1e-12 * std::abs(w[k]);
                    if (!same) {
                        ++failures;
                        BOOST_ERROR("element " << k << " (x "
                                               << x.cpu().to(DType::float64).to_vector<double>()[k]
                                               << "): generated " << g[k] << ", eager " << w[k]);
                    }
                }
            }
        }
    }
}

// Row reductions (rows holding NaN among them, so maximum/minimum's NaN rule shows) compiled
// against the eager rung's reductions on the GPU, float32, float64 and int64.
BOOST_AUTO_TEST_CASE(generated_row_reductions_equal_the_eager_rung,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda eager rung"})) {
    auto reductions = [](const Tensor& x) {
        return std::vector<Tensor>{x.sum({1}), x.amax({1}), x.amin({1}), x.sum()};
    };
    kiln_test::ScopedEnv always_generated("KILN_CHOOSE", "0");
    auto compiled = compile(reductions);
    manual_seed(6);
    Tensor nan_rows = randn({64, 1000});
    std::vector<float> v = nan_rows.to_vector<float>();
    for (int r = 0; r < 64; r += 7) v[size_t(r) * 1000 + size_t(r)] = NAN;
    nan_rows = tensor(v, {64, 1000});
    for (const Tensor& x : {nan_rows, randn({3, 70000}, {.dtype = DType::float64}),
                            randint(-1000, 1000, {50, 333})}) {
        Tensor xc = x.cuda();
        std::vector<Tensor> got = compiled(xc), want = reductions(xc);
        for (size_t i = 0; i < got.size(); ++i) {
            BOOST_TEST_CONTEXT("reduction " << i << " of " << x.dtype() << ", " << x.size(0)
                                            << " rows") {
                std::vector<double> g = got[i].cpu().to(DType::float64).to_vector<double>(),
                                    w = want[i].cpu().to(DType::float64).to_vector<double>();
                BOOST_REQUIRE(g.size() == w.size());
                for (size_t k = 0; k < g.size(); ++k)
                    BOOST_TEST(((std::isnan(g[k]) && std::isnan(w[k])) ||
                                std::abs(g[k] - w[k]) <= 1e-4 * (1 + std::abs(w[k]))),
                               "row " << k << ": generated " << g[k] << ", eager " << w[k]);
            }
        }
        if (x.dtype() == DType::float32)  // the NaN rows stay NaN for amax and amin
            BOOST_TEST(std::isnan(want[1].cpu().to_vector<float>()[0]));
    }
}

BOOST_AUTO_TEST_SUITE_END()
