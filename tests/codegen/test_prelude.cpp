// The two preludes of generated CPU kernels (codegen/emit_cpp_prelude.h, codegen/prelude.h):
// every table op the lean prelude serves gives, lane for lane and in the scalar tail, the
// same bits as under the full (xsimd) prelude on IEEE special values; the lean prelude is
// chosen exactly when no kernel calls an xsimd-only function; a lean kernel compiles without
// the precompiled header.
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>
#include <xsimd/xsimd.hpp>

#include "codegen/cpu_backend.h"
#include "codegen/emit_cpp.h"
#include "codegen/emit_cpp_prelude.h"
#include "codegen/prelude.h"
#include "codegen/toolchain.h"
#include "kiln.h"
#include "tensor/ops.h"
#include "tests/codegen/compare.h"
#include "tests/codegen/lgraph_builder.h"
#include "tests/scoped_env.h"
#include "tests/tensor/special_values.h"

namespace fs = std::filesystem;
using namespace kiln;
using namespace kiln::codegen;
using kiln::codegen::testing::GraphBuilder;

namespace {

struct TempCache {
    fs::path dir;
    kiln_test::ScopedEnv env;
    explicit TempCache(const std::string& name)
        : dir(fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()))),
          env("KILN_CACHE_DIR", dir.string()) {
        toolchain_forget_loaded();
    }
    ~TempCache() {
        toolchain_forget_loaded();
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
};

BuildOptions options(bool use_pch) {
    BuildOptions o;
    o.include_dirs = {KILN_SOURCE_DIR};
    o.use_pch = use_pch;
    return o;
}

// The table's pointwise ops whose math the lean prelude serves.
std::vector<OpId> lean_ops() {
    std::vector<OpId> ops;
    for (int k = 0; k < kOpCount; ++k) {
        const OpInfo& info = op_info(OpId(k));
        if (info.kind == OpKind::pointwise && info.math != nullptr &&
            (info.arity == 1 || info.arity == 2) && !needs_full_prelude(info.math))
            ops.push_back(OpId(k));
    }
    return ops;
}

// One entry per op: the SIMD body over whole batches, then the scalar tail, as the emitter
// runs them; and casts, folds and the batch width.
std::string test_body(const std::vector<OpId>& ops) {
    std::string body = R"(
inline void put(B v, float* p) { v.store_unaligned(p); }
inline void put(BB v, float* p) { convert<float>(v).store_unaligned(p); }
extern "C" int64_t lanes() { return W; }
extern "C" void casts(const float* x, int64_t* i, float* b, int64_t n) {
    for (int64_t j = 0; j < n; ++j) i[j] = convert<int64_t>(x[j]), b[j] = convert<bool>(x[j]) ? 1.0f : 0.0f;
    for (int64_t j = 0; j + W <= n; j += W) put(convert<bool>(B::load_unaligned(x + j)), b + n + j);
}
extern "C" void folds(const float* x, float* out, int64_t n) {
    for (int64_t j = 0; j + W <= n; j += W) {
        B v = B::load_unaligned(x + j);
        out[3 * (j / W)] = fold_sum(v, 0.5f), out[3 * (j / W) + 1] = fold_amax(v, -1.0f), out[3 * (j / W) + 2] = fold_amin(v, 1.0f);
    }
}
)";
    for (OpId op : ops) {
        const char* math = op_info(op).math;
        body += "extern \"C\" void op_" + std::string(op_name(op)) +
                "(const float* x, const float* y, float* out, int64_t n) {\n"
                "    int64_t j = 0;\n"
                "    for (; j + W <= n; j += W) {\n"
                "        B xv = B::load_unaligned(x + j), yv = B::load_unaligned(y + j);\n"
                "        (void)yv;\n"
                "        put(" +
                math_text(math, "xv", "yv") +
                ", out + j);\n"
                "    }\n"
                "    for (; j < n; ++j) {\n"
                "        float xs = x[j], ys = y[j];\n"
                "        (void)ys;\n"
                "        out[j] = float(" +
                math_text(math, "xs", "ys") +
                ");\n"
                "    }\n"
                "}\n";
    }
    return body + "}  // namespace kiln_math\n";
}

size_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
    for (size_t k = 0; k < std::min(a.size(), b.size()); ++k)
        if (std::memcmp(&a[k], &b[k], sizeof(float)) != 0) return k;
    return 0;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0)
        return true;
    for (size_t k = 0; k < std::min(a.size(), b.size()); ++k)
        if (std::memcmp(&a[k], &b[k], sizeof(float)) != 0) {
            BOOST_TEST_MESSAGE("first difference at " << k << ": " << a[k] << " vs " << b[k]);
            break;
        }
    return false;
}

// The size in bytes of an exported function of a loaded library (its ELF symbol's st_size).
size_t code_bytes(void* function) {
    Dl_info info;
    void* entry = nullptr;  // the function's ElfW(Sym)
    BOOST_TEST_REQUIRE(dladdr1(function, &info, &entry, RTLD_DL_SYMENT) != 0);
    const auto* sym = static_cast<const ElfW(Sym)*>(entry);
    BOOST_TEST_REQUIRE(sym != nullptr);
    return size_t(sym->st_size);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(prelude)

BOOST_AUTO_TEST_CASE(lean_ops_give_the_full_preludes_bits_on_special_values) {
    TempCache cache("kiln-prelude-test");
    std::vector<OpId> ops = lean_ops();
    // The lean prelude serves the arithmetic, comparisons, relu, abs, sqrt, fmod, and the
    // math of tensor/fast_math.h (exp, log, tanh, erf, sin, cos, and sigmoid through exp) ...
    for (const char* name :
         {"add", "div", "relu", "abs", "sign", "sqrt", "rsqrt",   "maximum", "fmod", "remainder",
          "lt",  "ne",  "neg",  "exp", "log",  "tanh", "sigmoid", "erf",     "sin",  "cos"})
        BOOST_TEST_CONTEXT(name) {
            BOOST_TEST((std::find(ops.begin(), ops.end(), op_by_name(name)) != ops.end()));
        }
    std::string body = test_body(ops);
    // the table's fold_<reduction> helpers follow the prelude, as the emitter writes them
    auto full = build_library(std::string(kPreludeFull) + kPreludeCommon + reduction_fold_helpers() + body, options(false));
    auto lean = build_library(std::string(kPreludeLean) + kPreludeCommon + reduction_fold_helpers() + body, options(false));
    using Lanes = int64_t (*)();
    BOOST_TEST(reinterpret_cast<Lanes>(lean->symbol("lanes"))() ==
               int64_t(xsimd::batch<float>::size));
    BOOST_TEST(reinterpret_cast<Lanes>(full->symbol("lanes"))() ==
               int64_t(xsimd::batch<float>::size));

    auto [xs, ys] = kiln_test::special_pairs();
    for (int k = 0; k < 7; ++k)
        xs.push_back(xs[size_t(k) * 21]), ys.push_back(ys[size_t(k) * 13]);  // a scalar tail
    const int64_t n = int64_t(xs.size());
    using OpFn = void (*)(const float*, const float*, float*, int64_t);
    for (OpId op : ops) BOOST_TEST_CONTEXT(op_name(op)) {
            std::string entry = "op_" + std::string(op_name(op));
            std::vector<float> want(size_t(n), 7.0f), got(size_t(n), 7.0f);
            reinterpret_cast<OpFn>(full->symbol(entry))(xs.data(), ys.data(), want.data(), n);
            reinterpret_cast<OpFn>(lean->symbol(entry))(xs.data(), ys.data(), got.data(), n);
            BOOST_TEST(same_bits(got, want),
                       "lean vs full, x = " << xs[first_difference(got, want)]
                                            << ", y = " << ys[first_difference(got, want)] << ": "
                                            << got[first_difference(got, want)] << " vs "
                                            << want[first_difference(got, want)]);
        }
    using CastFn = void (*)(const float*, int64_t*, float*, int64_t);
    std::vector<int64_t> want_i(static_cast<size_t>(n)), got_i(static_cast<size_t>(n));
    std::vector<float> want_b(size_t(2 * n)), got_b(size_t(2 * n));
    reinterpret_cast<CastFn>(full->symbol("casts"))(xs.data(), want_i.data(), want_b.data(), n);
    reinterpret_cast<CastFn>(lean->symbol("casts"))(xs.data(), got_i.data(), got_b.data(), n);
    BOOST_TEST((got_i == want_i));
    BOOST_TEST(same_bits(got_b, want_b));
    using FoldFn = void (*)(const float*, float*, int64_t);
    std::vector<float> want_f(size_t(3 * n), 7.0f), got_f(size_t(3 * n), 7.0f);
    reinterpret_cast<FoldFn>(full->symbol("folds"))(xs.data(), want_f.data(), n);
    reinterpret_cast<FoldFn>(lean->symbol("folds"))(xs.data(), got_f.data(), n);
    BOOST_TEST(same_bits(got_f, want_f));
}

// The functions of tensor/fast_math.h in both preludes, over every 997th float by its bits
// (subnormals, both infinities, NaNs, both overflow edges of exp): the eager kernels' (full
// prelude, xsimd) and the lean prelude's batches run the same source with the same fused
// multiply-adds, so every lane must give the same bits.
BOOST_AUTO_TEST_CASE(fast_math_gives_the_same_bits_under_both_preludes_on_all_floats) {
    TempCache cache("kiln-prelude-fast-math");
    std::vector<std::string> names;
#define KILN_MATH(name, arity, cpu, cuda_float, cuda_double, ints) \
    if (std::string(#cpu) == "fast") names.push_back(#name);
#include "tensor/math_functions.def"
    BOOST_TEST(names.size() == 6u);  // exp, log, tanh, erf, sin, cos
    std::string body;
    for (const std::string& f : names)
        body += "extern \"C\" void f_" + f +
                "(const float* x, float* out, int64_t n) {\n"
                "    for (int64_t j = 0; j + W <= n; j += W) " +
                f + "(B::load_unaligned(x + j)).store_unaligned(out + j);\n}\n";
    body += "}  // namespace kiln_math\n";
    auto full = build_library(std::string(kPreludeFull) + kPreludeCommon + body, options(false));
    auto lean = build_library(std::string(kPreludeLean) + kPreludeCommon + body, options(false));
    std::vector<float> xs = kiln_test::every_nth_float(997);
    for (float x :
         {88.72283f, 88.72284f, -87.33655f, -103.97207f, -103.97208f, 1e5f, -1e5f, 1.00001e5f})
        xs.push_back(x);
    while (xs.size() % 64 != 0) xs.push_back(0.5f);
    using Fn = void (*)(const float*, float*, int64_t);
    for (const std::string& f : names) BOOST_TEST_CONTEXT(f) {
            std::vector<float> want(xs.size(), 7.0f), got(xs.size(), 7.0f);
            reinterpret_cast<Fn>(full->symbol("f_" + f))(xs.data(), want.data(),
                                                         int64_t(xs.size()));
            reinterpret_cast<Fn>(lean->symbol("f_" + f))(xs.data(), got.data(), int64_t(xs.size()));
            size_t k = first_difference(got, want);
            BOOST_TEST(same_bits(got, want),
                       "x = " << xs[k] << ": lean " << got[k] << ", full " << want[k]);
        }
}

// A graph of the bench's and the models' math (GELU by tanh and by erf, softmax's exp,
// log-sigmoid, sin + cos) compiles with the lean prelude, and gives what eager gives.
BOOST_AUTO_TEST_CASE(graphs_calling_exp_log_tanh_erf_sin_cos_get_the_lean_prelude) {
    TempCache cache("kiln-prelude-graph");
    GraphBuilder b;
    int x = b.input({1003}, "x"), y = b.input({1003}, "y");
    int gelu = b.binary(OpId::mul, x, b.unary(OpId::tanh, y));
    int erf_gelu = b.binary(OpId::mul, x, b.unary(OpId::erf, y));
    int log_sigmoid = b.unary(OpId::log, b.unary(OpId::sigmoid, x));
    int trig = b.binary(OpId::add, b.unary(OpId::sin, x), b.unary(OpId::cos, y));
    int sum = b.binary(OpId::add, b.binary(OpId::add, gelu, erf_gelu),
                       b.binary(OpId::add, log_sigmoid, trig));
    b.output(b.binary(OpId::add, sum, b.unary(OpId::exp, y)));
    CompiledCpuGraph compiled = compile_cpu(b.graph);
    BOOST_TEST(is_lean_kernel(compiled.source()));
    for (const char* call : {"tanh(", "erf(", "log(", "exp(", "sin(", "cos("})
        BOOST_TEST(compiled.source().find(call) != std::string::npos, call);
    std::vector<Tensor> inputs = {randn({1003}) * 4.0, randn({1003}) * 4.0};
    Tensor got = compiled.run(inputs)[0], want = run_eager(b.graph, inputs)[0];
    BOOST_TEST(kiln_test::relative_error(got, want) <= 1e-6);
}

// A layernorm's store pass: per row, (x - B(mean)) * B(rstd). Inlined into such a loop the lean
// prelude's B(float), when it stored lane by lane, was rebuilt lane by lane on every step (32
// masked moves per batch with AVX-512; a layernorm over [4096, 1024] ran 0.60 instead of 0.34
// ns/element on one thread). Its machine code must not be much larger than xsimd's broadcast.
BOOST_AUTO_TEST_CASE(a_broadcast_in_a_lean_loop_is_as_small_as_xsimds) {
    TempCache cache("kiln-prelude-broadcast");
    std::string body = R"(
extern "C" void scale_rows(const float* x, const float* mean, const float* rstd, float* out, int64_t rows, int64_t n) {
    for (int64_t row = 0; row < rows; ++row)
        for (int64_t j = 0; j + W <= n; j += W) {
            auto v = (B::load_unaligned(x + row * n + j) - B(mean[row])) * B(rstd[row]);
            v.store_unaligned(out + row * n + j);
        }
}
}  // namespace kiln_math
)";
    auto full = build_library(std::string(kPreludeFull) + kPreludeCommon + body, options(false));
    auto lean = build_library(std::string(kPreludeLean) + kPreludeCommon + body, options(false));
    size_t full_bytes = code_bytes(full->symbol("scale_rows"));
    size_t lean_bytes = code_bytes(lean->symbol("scale_rows"));
    BOOST_TEST_MESSAGE("scale_rows: lean " << lean_bytes << " bytes, full " << full_bytes);
    BOOST_TEST(lean_bytes <= full_bytes * 3 / 2);
    // and the same values, -0 and NaN included
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> x = {-0.0f, 0.0f, 1.5f, -2.0f, nan, inf, -inf};
    while (x.size() % 64 != 0) x.push_back(float(x.size()) * 0.25f);
    std::vector<float> mean = {0.0f, -0.0f}, rstd = {-0.0f, 2.0f};
    const int64_t n = int64_t(x.size()) / 2;
    using Fn = void (*)(const float*, const float*, const float*, float*, int64_t, int64_t);
    std::vector<float> want(x.size(), 7.0f), got(x.size(), 7.0f);
    reinterpret_cast<Fn>(full->symbol("scale_rows"))(x.data(), mean.data(), rstd.data(),
                                                     want.data(), 2, n);
    reinterpret_cast<Fn>(lean->symbol("scale_rows"))(x.data(), mean.data(), rstd.data(), got.data(),
                                                     2, n);
    BOOST_TEST(same_bits(got, want));
}

BOOST_AUTO_TEST_CASE(the_lean_prelude_is_chosen_unless_a_kernel_calls_an_xsimd_function) {
    BOOST_TEST(!needs_full_prelude("auto exp_3 = sub_2 * B(2.0f); auto r = maximum(x, zero(x));"));
    BOOST_TEST(!needs_full_prelude("auto s = sqrt(x) + abs(y); B::load_unaligned(p); fmod(x, y);"));
    // tensor/fast_math.h's functions (the table's `fast` column) are the lean prelude's too
    BOOST_TEST(!needs_full_prelude("auto exp_3 = exp(sub_2);"));
    BOOST_TEST(!needs_full_prelude("auto t = 1.f / (1.f + exp (-x));"));
    BOOST_TEST(!needs_full_prelude("auto a = log(x) + tanh(y) + erf(x) + sin(y) + cos(x);"));
    BOOST_TEST(needs_full_prelude("auto p = pow(x, y);"));
    BOOST_TEST(needs_full_prelude("auto f = floor(x);"));
    BOOST_TEST(needs_full_prelude("auto e = exp(x) + log1p(y);"));
    BOOST_TEST(is_lean_kernel(cpu_prelude_for("auto r = x + y;")));
    BOOST_TEST(is_lean_kernel(cpu_prelude_for("auto r = tanh(x);")));
    BOOST_TEST(!is_lean_kernel(cpu_prelude_for("auto r = expm1(x);")));
    kiln_test::ScopedEnv off("KILN_LEAN_PRELUDE", "0");
    BOOST_TEST(!is_lean_kernel(cpu_prelude_for("auto r = x + y;")));
}

// A lean kernel never builds or loads the precompiled header, even where the caller asks
// for it; a full one builds it.
BOOST_AUTO_TEST_CASE(lean_kernels_compile_without_the_precompiled_header) {
    TempCache cache("kiln-prelude-pch");
    std::string body =
        "extern \"C\" float twice(float x) { return float(B(x).v[0] * 2.0f); }\n}  // namespace "
        "kiln_math\n";
    std::string source = "// Generated by the test\n" + cpu_prelude_for(body) + body;
    BOOST_TEST_REQUIRE(is_lean_kernel(source));
    ToolchainStats before = toolchain_stats();
    auto library = build_library(source, options(true));
    BOOST_TEST(reinterpret_cast<float (*)(float)>(library->symbol("twice"))(1.5f) == 3.0f);
    BOOST_TEST(toolchain_stats().pch_builds == before.pch_builds);
    BOOST_TEST(toolchain_stats().compiler_calls == before.compiler_calls + 1);
    for (const auto& entry : fs::directory_iterator(cache.dir))
        BOOST_TEST(entry.path().filename().string().find("kiln_pch") == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
