// Reductions (sum, mean, amax, amin), softmax and matmul against naive float64 loops.
#include <boost/test/unit_test.hpp>
#include <limits>
#include <map>

#include "reference.h"
#include "tensor/blas_library.h"
#include "tensor/gemm.h"
#include "tensor/parallel.h"
#include "tensor/reductions.h"
#include "tests/scoped_env.h"

using namespace kiln_test;

namespace {

// Reduces `x` over `dims` (empty: all) with `f`, starting from `init`; `mean` divides by the count.
Ref reduce_ref(const Ref& x, const Shape& dims, bool keepdim, double init, double (*f)(double, double), bool mean = false) {
    int64_t rank = int64_t(x.shape.size());
    std::vector<bool> reduced(rank, dims.empty());
    for (int64_t d : dims) reduced[d < 0 ? d + rank : d] = true;
    Shape kept, out_shape;
    int64_t count = 1;
    for (int64_t i = 0; i < rank; ++i) {
        kept.push_back(reduced[i] ? 1 : x.shape[i]);
        if (!reduced[i] || keepdim) out_shape.push_back(reduced[i] ? 1 : x.shape[i]);
        if (reduced[i]) count *= x.shape[i];
    }
    Ref out{out_shape, std::vector<double>(size_t(numel(kept)), init)};
    for (int64_t i = 0; i < numel(x.shape); ++i) {
        int64_t o = ravel_broadcast(unravel(i, x.shape), kept);  // size-1 dims of `kept` index 0
        out.v[o] = f(out.v[o], x.v[i]);
    }
    if (mean)
        for (double& v : out.v) v /= double(count);
    return out;
}
double add(double a, double b) { return a + b; }
double max_nan(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }
double min_nan(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }

struct Reduction {
    Tensor (*run)(const Tensor&, const Shape&, bool);
    double init;
    double (*combine)(double, double);
    bool exact;  // max/min pick an element; sums round
};
constexpr double kInf = std::numeric_limits<double>::infinity();
// The table's reduction ops, by name (every_reduction_op_has_a_reference checks the list).
const std::map<std::string, Reduction> kReductions = {
    {"sum", {[](const Tensor& x, const Shape& d, bool k) { return kiln::sum(x, d, k); }, 0.0, add, false}},
    {"amax", {[](const Tensor& x, const Shape& d, bool k) { return kiln::amax(x, d, k); }, -kInf, max_nan, true}},
    {"amin", {[](const Tensor& x, const Shape& d, bool k) { return kiln::amin(x, d, k); }, kInf, min_nan, true}},
};

const std::vector<Shape> kDimSets = {{}, {0}, {1}, {2}, {-1}, {0, 2}, {2, 0}, {-3, -1}, {0, 1, 2}};

// matmul with NumPy's rules: 1-D operands get a dim that is dropped again; batch dims broadcast.
Ref matmul_ref(Ref a, Ref b) {
    bool a_vec = a.shape.size() == 1, b_vec = b.shape.size() == 1;
    if (a_vec) a.shape.insert(a.shape.begin(), 1);
    if (b_vec) b.shape.push_back(1);
    int64_t M = a.shape[a.shape.size() - 2], K = a.shape.back(), N = b.shape.back();
    Shape ab(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
    Shape batch = broadcast(ab, bb);
    Ref out{batch, {}};
    for (int64_t i = 0; i < numel(batch); ++i) {
        auto idx = unravel(i, batch);
        const double* pa = a.v.data() + ravel_broadcast(idx, ab) * M * K;
        const double* pb = b.v.data() + ravel_broadcast(idx, bb) * K * N;
        for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
                double acc = 0;
                for (int64_t k = 0; k < K; ++k) acc += pa[m * K + k] * pb[k * N + n];
                out.v.push_back(acc);
            }
    }
    if (!a_vec) out.shape.push_back(M);
    if (!b_vec) out.shape.push_back(N);
    return out;
}

Ref softmax_ref(const Ref& x, int64_t dim, bool log) {
    int64_t rank = int64_t(x.shape.size());
    dim = dim < 0 ? dim + rank : dim;
    Shape line = x.shape;
    line[dim] = 1;  // one entry per softmax row
    Ref hi = reduce_ref(x, {dim}, true, -kInf, max_nan);
    std::vector<double> total(size_t(numel(line)), 0.0);
    for (int64_t i = 0; i < numel(x.shape); ++i) {
        int64_t l = ravel_broadcast(unravel(i, x.shape), line);
        total[l] += std::exp(x.v[i] - hi.v[l]);
    }
    Ref out{x.shape, {}};
    for (int64_t i = 0; i < numel(x.shape); ++i) {
        int64_t l = ravel_broadcast(unravel(i, x.shape), line);
        double shifted = x.v[i] - hi.v[l];
        out.v.push_back(log ? shifted - std::log(total[l]) : std::exp(shifted) / total[l]);
    }
    return out;
}

std::string dims_name(const Shape& dims, bool keepdim) { return "dims=" + str(dims) + (keepdim ? " keepdim" : ""); }

}  // namespace

BOOST_AUTO_TEST_SUITE(reductions)

BOOST_AUTO_TEST_CASE(every_reduction_op_has_a_reference) {
#define KILN_OP(name, kind, ...)                                                                   \
    if (kiln::OpKind::kind == kiln::OpKind::reduction)                                             \
        BOOST_TEST(kReductions.count(#name) == 1u, "reduction '" #name "' of tensor/ops.def has no " \
                                                   "reference: add it to kReductions in test_reduce.cpp");
#include "tensor/ops.def"
}

// tensor/reductions.def has a row for every reduction of tensor/ops.def and no other op.
BOOST_AUTO_TEST_CASE(the_reduction_table_rows_are_the_reductions_of_the_op_table) {
    for (int i = 0; i < kiln::kOpCount; ++i) {
        kiln::OpId op = kiln::OpId(i);
        bool reduction = kiln::op_info(op).kind == kiln::OpKind::reduction;
        BOOST_TEST(kiln::is_reduction(op) == reduction,
                   kiln::op_name(op) << ": kind " << kiln::op_kind_name(kiln::op_info(op).kind)
                                     << ", in tensor/reductions.def: " << kiln::is_reduction(op));
    }
    BOOST_CHECK_THROW(kiln::reduction_info(kiln::OpId::add), kiln::Error);
}

// A one-element row reduces to combine(identity, v): v itself for every reduction of the
// table, in each dtype, for values up to the dtype's extremes (a wrong identity, such as 0
// for amax, changes negative values; a wrong combine, most values).
BOOST_AUTO_TEST_CASE(every_reduction_of_the_table_keeps_a_lone_value) {
    const double inf = kInf;
    const std::vector<double> floats = {0.0, -2.5, 3.25, 1e30, -1e30, inf, -inf, NAN};
    const std::vector<double> ints = {0, -7, 7, -9223372036854775807.0 - 1, 4611686018427387904.0};
    for (kiln::OpId op : kiln::reduction_ops()) {
        for (auto [dtype, values] :
             {std::pair{kiln::float32, floats}, std::pair{kiln::float64, floats},
              std::pair{kiln::int64, ints}})
            for (double v : values) {
                Tensor x = kiln::full({3, 1}, v, {.dtype = dtype});
                double want = x.to(kiln::float64).to_vector<double>()[0];  // v rounded to dtype
                Tensor r = kiln::dispatch(op, {x}, {.dims = {1}});
                for (double got : r.to(kiln::float64).to_vector<double>())
                    BOOST_TEST((got == want || (std::isnan(got) && std::isnan(want))),
                               kiln::op_name(op)
                                   << " of [" << want << "] in " << dtype << " gives " << got);
            }
        Tensor flags = kiln::full({2, 1}, 1.0, {.dtype = kiln::boolean});
        for (double got :
             kiln::dispatch(op, {flags}, {.dims = {1}}).to(kiln::float64).to_vector<double>())
            BOOST_TEST(got == 1.0, kiln::op_name(op) << " of [true] gives " << got);
    }
}

BOOST_AUTO_TEST_CASE(reductions_match_reference_over_dims_and_layouts) {
    Ref x = random_ref({3, 4, 5}, -3, 3);
    for (const auto& [name, r] : kReductions) {
        for (const Shape& dims : kDimSets)
            for (bool keepdim : {false, true})
                for (Layout l : {Layout::contiguous, Layout::transposed, Layout::strided}) {
                    Ref want = reduce_ref(x, dims, keepdim, r.init, r.combine);
                    check_close(r.run(make(x, l), dims, keepdim), want, r.exact ? 0 : 1e-5, r.exact ? 0 : 1e-5,
                                name + " " + dims_name(dims, keepdim) + " " + layout_name(l));
                }
        Ref s{{}, {2.5}};
        check_close(r.run(make(s), {}, false), s, 0, 0, name + " of a 0-d tensor");
    }
}

BOOST_AUTO_TEST_CASE(reductions_of_large_tensors_use_simd_and_threads) {
    Ref x = random_ref({300, 1000}, -1, 1);
    Tensor t = make(x);
    for (const auto& [name, r] : kReductions)
        for (const Shape& dims : {Shape{}, Shape{0}, Shape{1}})
            check_close(r.run(t, dims, false), reduce_ref(x, dims, false, r.init, r.combine), r.exact ? 0 : 1e-5,
                        r.exact ? 0 : 1e-6 * double(x.v.size()), name + " of [300, 1000] " + dims_name(dims, false));
}

BOOST_AUTO_TEST_CASE(mean_matches_reference) {
    Ref x = random_ref({3, 4, 5}, -3, 3);
    for (const Shape& dims : kDimSets)
        for (bool keepdim : {false, true})
            check_close(kiln::mean(make(x, Layout::transposed), dims, keepdim), reduce_ref(x, dims, keepdim, 0, add, true), 1e-5, 1e-6,
                        "mean " + dims_name(dims, keepdim));
}

BOOST_AUTO_TEST_CASE(reductions_of_integers) {
    Ref x = random_ints({4, 6}, -100, 100);
    Tensor sum = make(x, kiln::int64).sum({1});
    BOOST_TEST((sum.dtype() == kiln::int64));
    check_equal(sum, reduce_ref(x, {1}, false, 0, add), "int64 sum");
    check_equal(make(x, kiln::int64).amax({0}, true), reduce_ref(x, {0}, true, -kInf, max_nan), "int64 amax");
    Tensor flags = make(x) > 0.0;
    Tensor count = flags.sum();
    BOOST_TEST((count.dtype() == kiln::int64));
    BOOST_TEST(count.item<int64_t>() == int64_t(std::count_if(x.v.begin(), x.v.end(), [](double v) { return v > 0; })));
    // amax / amin of bools are any / all, and stay bool.
    Ref b{{2, 3}, {0, 1, 0, 0, 0, 0}};
    Tensor any = make(b, kiln::boolean).amax({1});
    BOOST_TEST((any.dtype() == kiln::boolean));
    check_equal(any, Ref{{2}, {1, 0}}, "amax of bool");
    check_equal(make(b, kiln::boolean).amin({1}), Ref{{2}, {0, 0}}, "amin of bool");
    check_equal(make(Ref{{2}, {1, 1}}, kiln::boolean).amin(), Ref{{}, {1}}, "amin of all-true bool");
}

BOOST_AUTO_TEST_CASE(softmax_rows_sum_to_one_and_match_reference) {
    Ref x = random_ref({4, 5, 6}, -4, 4);
    for (int64_t dim : {0, 1, 2, -1}) {
        Tensor sm = kiln::softmax(make(x, Layout::transposed), dim);
        check_close(sm, softmax_ref(x, dim, false), 1e-5, 1e-7, "softmax dim " + std::to_string(dim));
        Ref ones = map(reduce_ref(x, {dim}, false, 0, add), [](double) { return 1.0; });
        check_close(sm.sum({dim}), ones, 1e-5, 1e-6, "softmax rows sum to 1, dim " + std::to_string(dim));
        check_close(kiln::log_softmax(make(x), dim), softmax_ref(x, dim, true), 1e-5, 1e-5, "log_softmax dim " + std::to_string(dim));
    }
    // Large logits: the max is subtracted first, so nothing overflows.
    Ref big{{2, 3}, {1000, 1001, 1002, -1000, 0, 1000}};
    check_close(kiln::softmax(make(big), 1), softmax_ref(big, 1, false), 1e-5, 1e-7, "softmax of large logits");
    check_close(kiln::log_softmax(make(big), 1), softmax_ref(big, 1, true), 1e-5, 1e-4, "log_softmax of large logits");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(matmul)

BOOST_AUTO_TEST_CASE(matmul_matches_naive_loops) {
    const std::vector<std::pair<Shape, Shape>> cases = {
        {{3, 4}, {4, 5}},                 // 2-D
        {{2, 3, 4}, {4, 5}},              // batched @ matrix
        {{2, 3, 4}, {2, 4, 5}},           // batched @ batched
        {{2, 1, 3, 4}, {5, 4, 6}},        // broadcast batch -> [2, 5, 3, 6]
        {{4}, {4, 5}},                    // vector @ matrix -> [5]
        {{3, 4}, {4}},                    // matrix @ vector -> [3]
        {{4}, {4}},                       // dot -> []
        {{2, 3, 4}, {4}},                 // -> [2, 3]
        {{4}, {2, 4, 5}},                 // -> [2, 5]
        {{1, 1}, {1, 1}},
        {{33, 65}, {65, 17}},             // sizes past BLAS's small-matrix paths
        {{130, 257}, {257, 67}},          // several of OpenBLAS's blocks, with edges in each dim
    };
    for (const auto& [sa, sb] : cases) {
        Ref a = random_ref(sa, -1, 1), b = random_ref(sb, -1, 1);
        Ref want = matmul_ref(a, b);
        std::string what = str(sa) + " @ " + str(sb);
        for (Layout la : {Layout::contiguous, Layout::transposed, Layout::strided})
            for (Layout lb : {Layout::contiguous, Layout::transposed, Layout::offset})
                check_close(kiln::matmul(make(a, la), make(b, lb)), want, 1e-4, 1e-5,
                            what + " " + layout_name(la) + " @ " + layout_name(lb));
        check_close(kiln::matmul(make(a, kiln::float64), make(b, kiln::float64)), want, 1e-12, 1e-12, what + " float64");
    }
}

// Each library matmul may run (KILN_GEMM forces one: docs/env.md) against naive loops, at 1
// and 2 threads: sizes past oneDNN's threshold (kOneDnnMinWork), both operands in each
// layout, a GEMM split over kiln's threads along the rows and one along the columns, a batch
// of GEMMs (each of kiln's threads runs whole ones) and a folded batch.
BOOST_AUTO_TEST_CASE(each_gemm_library_matches_naive_loops) {
    const std::vector<std::pair<Shape, Shape>> cases = {
        {{130, 257}, {257, 67}},       // edges in each dim
        {{300, 64}, {64, 40}},         // 768000 multiply-adds: oneDNN under auto, one part
        {{64, 128}, {128, 200}},       // at 2 threads split along the columns (N > M)
        {{3, 72, 100}, {3, 100, 80}},  // a batch of 3 GEMMs, each past the threshold
        {{2, 96, 64}, {64, 96}},       // a batch folded into one GEMM of 192 rows
    };
    std::vector<std::string> libraries = {"openblas", "auto"};
#ifdef KILN_HAVE_DNNL
    libraries.push_back("onednn");
#endif
    for (const std::string& library : libraries) {
        kiln_test::ScopedEnv env("KILN_GEMM", library);
        for (int threads : {1, 2}) {
            kiln::set_num_threads(threads);
            for (const auto& [sa, sb] : cases) {
                Ref a = random_ref(sa, -1, 1), b = random_ref(sb, -1, 1);
                Ref want = matmul_ref(a, b);
                std::string what = library + ", " + std::to_string(threads) +
                                   " threads: " + str(sa) + " @ " + str(sb);
                for (Layout la : {Layout::contiguous, Layout::transposed, Layout::strided})
                    for (Layout lb : {Layout::contiguous, Layout::transposed, Layout::offset})
                        check_close(kiln::matmul(make(a, la), make(b, lb)), want, 1e-4, 1e-5,
                                    what + " " + layout_name(la) + " @ " + layout_name(lb));
            }
        }
    }
    kiln::set_num_threads(0);
}

// plan_gemm's choice: small GEMMs and float64 on OpenBLAS, float32 past the threshold on the
// library measured faster for its shape where kiln has oneDNN (timed once per shape and thread
// count, then kept); KILN_GEMM forces one; a wrong value is an error naming it.
BOOST_AUTO_TEST_CASE(the_gemm_library_is_chosen_per_shape) {
    auto library = [](const kiln::Tensor& a, const kiln::Tensor& b) {
        return std::string(kiln::gemm_library_name(kiln::plan_gemm(a, b).library));
    };
    kiln::Tensor small = kiln::ones({4, 3}), small_b = kiln::ones({3, 2});
    kiln::Tensor x = kiln::ones({8, 128, 256}), w = kiln::ones({768, 256});
    BOOST_TEST(library(small, small_b) == "openblas");
    BOOST_TEST(library(x.to(kiln::float64), w.to(kiln::float64).t()) == "openblas");
#ifdef KILN_HAVE_DNNL
    {
        kiln_test::ScopedEnv env("KILN_GEMM", "auto"), no_pack("KILN_GEMM_PACK", "0");
        kiln::set_num_threads(1);
        kiln::Tensor a = kiln::ones({517, 389}), b = kiln::ones({389, 263});  // a new shape
        int64_t before = kiln::detail::gemm_choices();
        std::string first = library(a, b);
        BOOST_TEST((first == "onednn" || first == "openblas"));
        BOOST_TEST(kiln::detail::gemm_choices() == before + 1);  // timed once
        for (int again = 0; again < 3; ++again) BOOST_TEST(library(a, b) == first);
        BOOST_TEST(kiln::detail::gemm_choices() == before + 1);  // and kept
        kiln::set_num_threads(2);
        (void)library(a, b);  // another thread count: timed again
        BOOST_TEST(kiln::detail::gemm_choices() == before + 2);
        kiln::set_num_threads(0);
    }
    {
        kiln_test::ScopedEnv env("KILN_GEMM", "onednn");
        BOOST_TEST(library(small, small_b) == "onednn");
    }
#else
    BOOST_TEST(library(x, w.t()) == "openblas");
#endif
    {
        kiln_test::ScopedEnv env("KILN_GEMM", "openblas");
        BOOST_TEST(library(x, w.t()) == "openblas");
    }
    kiln_test::ScopedEnv env("KILN_GEMM", "mkl");
    try {
        (void)kiln::matmul(small, small_b);
        BOOST_FAIL("KILN_GEMM=mkl should raise");
    } catch (const kiln::Error& e) {
        std::string what = e.what();
        BOOST_TEST(
            what.find("KILN_GEMM must be auto, openblas or onednn, got 'mkl'") != std::string::npos,
            what);
    }
}

#ifdef KILN_HAVE_DNNL
// A b multiplied again at the same version is packed once for oneDNN's matmul primitive
// (GemmPlan::packed_b, tensor/gemm.cpp): the first call plans no packed b, the second packs
// it, later ones reuse it, and every call equals naive loops, at 1 and 2 threads (2: parts of
// rows run the primitive at once), for b plain, transposed (a Linear's W^T) and offset (a
// slice of a bigger weight: in_proj's q, k, v rows).
BOOST_AUTO_TEST_CASE(a_b_multiplied_again_is_packed_once_and_matches_naive_loops) {
    using kiln::detail::gemm_pack_stats;
    kiln_test::ScopedEnv onednn("KILN_GEMM", "onednn"), always("KILN_GEMM_PACK", "1");
    kiln::detail::gemm_pack_clear();
    Ref a = random_ref({256, 128}, -1, 1), w = random_ref({96, 128}, -1, 1);
    Ref wt{{128, 96}, {}};  // w^T
    for (int64_t k = 0; k < 128; ++k)
        for (int64_t n = 0; n < 96; ++n) wt.v.push_back(w.v[size_t(n * 128 + k)]);
    Ref want = matmul_ref(a, wt);
    Tensor x = make(a);
    for (int threads : {1, 2}) {
        kiln::set_num_threads(threads);
        Tensor weight = make(w);                  // new storages: nothing of them packed yet
        Tensor big = kiln::zeros({3 * 96, 128});  // w as rows 96..191 of a bigger weight
        big.slice(0, 96, 192).copy_(weight);
        struct Case {
            const char* name;
            Tensor b;
        };
        const Case cases[] = {{"transposed", weight.t()},
                              {"plain", weight.t().contiguous()},
                              {"offset, transposed", big.slice(0, 96, 192).t()}};
        for (const Case& c : cases) {
            std::string what = std::string(c.name) + ", " + std::to_string(threads) + " threads";
            auto before = gemm_pack_stats();
            check_close(kiln::matmul(x, c.b), want, 1e-4, 1e-5, what + ", first call");
            auto first = gemm_pack_stats();
            BOOST_TEST(first.packs == before.packs, what);  // seen once: not packed
            BOOST_TEST(first.packed_parts == before.packed_parts, what);
            for (int call = 2; call <= 3; ++call) {
                check_close(kiln::matmul(x, c.b), want, 1e-4, 1e-5,
                            what + ", call " + std::to_string(call));
                auto now = gemm_pack_stats();
                BOOST_TEST(now.packs == before.packs + 1, what);  // packed at the second, once
                BOOST_TEST(now.packed_parts >= first.packed_parts + (call - 1) * threads, what);
            }
        }
    }
    // A GEMM of fewer than 64 rows reads b about once: never packed (its copy would only add
    // b's size to the memory held).
    Tensor few = make(random_ref({4, 512}, -1, 1)), square = make(random_ref({512, 512}, -1, 1));
    auto before = gemm_pack_stats();
    for (int call = 0; call < 3; ++call) (void)kiln::matmul(few, square);
    BOOST_TEST(gemm_pack_stats().packs == before.packs);
    kiln::set_num_threads(0);
}

// Under auto for both the library and packing (the defaults), whatever the timings choose on
// this CPU: a weight multiplied again and again (the packing decision timed at its second call)
// gives naive loops' values at every call, at 1 and 2 threads, also after in-place writes to
// it (a new version) and through its transpose; each decision is timed once and kept.
BOOST_AUTO_TEST_CASE(measured_choices_give_naive_loops_values_on_a_reused_weight) {
    kiln_test::ScopedEnv library("KILN_GEMM", "auto"), packing("KILN_GEMM_PACK", "auto");
    Ref a = random_ref({300, 96}, -1, 1), w = random_ref({96, 200}, -1, 1);
    Tensor x = make(a);
    for (int threads : {1, 2}) {
        kiln::set_num_threads(threads);
        Tensor weight = make(w);
        Ref current = w;
        int64_t timed = -1;
        for (int call = 0; call < 6; ++call) {
            std::string what = std::to_string(threads) + " threads, call " + std::to_string(call);
            if (call == 3) {  // in place: a new version, the old packed values must not serve
                weight.mul_(-0.5);
                for (double& v : current.v) v *= -0.5;
            }
            check_close(kiln::matmul(x, weight), matmul_ref(a, current), 1e-4, 1e-5, what);
            check_close(kiln::matmul(x, weight.t().contiguous().t()), matmul_ref(a, current),
                        1e-4, 1e-5, what + ", a transposed copy");
            if (call == 2) timed = kiln::detail::gemm_choices();
            if (call > 2) BOOST_TEST(kiln::detail::gemm_choices() == timed, what);  // kept
        }
    }
    kiln::set_num_threads(0);
}

// A packed b is good only while its storage keeps the version it was packed at: an in-place
// write (copy_, add_), the storage freed and its memory serving another tensor, each gives
// the new values, never the packed old ones. KILN_GEMM_PACK=0 packs nothing; another value
// is an error naming it.
BOOST_AUTO_TEST_CASE(a_packed_b_written_in_place_or_freed_is_packed_again) {
    using kiln::detail::gemm_pack_stats;
    kiln_test::ScopedEnv onednn("KILN_GEMM", "onednn"), always("KILN_GEMM_PACK", "1");
    kiln::detail::gemm_pack_clear();
    kiln::set_num_threads(2);
    Ref a = random_ref({256, 128}, -1, 1), w1 = random_ref({128, 96}, -1, 1),
        w2 = random_ref({128, 96}, -1, 1);
    Tensor x = make(a);
    Tensor b = make(w1);
    for (int i = 0; i < 3; ++i)
        check_close(kiln::matmul(x, b), matmul_ref(a, w1), 1e-4, 1e-5, "w1");
    BOOST_TEST(kiln::plan_gemm(x, b).packed_b);
    b.copy_(make(w2));  // in place: the packed w1 is stale
    for (int i = 0; i < 3; ++i)
        check_close(kiln::matmul(x, b), matmul_ref(a, w2), 1e-4, 1e-5, "after copy_");
    {
        kiln::autograd::NoGradGuard no_grad;
        b.add_(kiln::ones({128, 96}));
    }
    Ref w3 = w2;
    for (double& v : w3.v) v += 1;
    for (int i = 0; i < 3; ++i)
        check_close(kiln::matmul(x, b), matmul_ref(a, w3), 1e-4, 1e-5, "after add_");
    // Freed, then the same pool block and maybe the same Storage address serve new values.
    for (int round = 0; round < 3; ++round) {
        Ref w = random_ref({128, 96}, -1, 1);
        Tensor fresh = make(w);
        for (int i = 0; i < 2; ++i)
            check_close(kiln::matmul(x, fresh), matmul_ref(a, w), 1e-4, 1e-5,
                        "a new b, round " + std::to_string(round));
    }
    {
        kiln_test::ScopedEnv env("KILN_GEMM_PACK", "0");
        auto before = gemm_pack_stats();
        Tensor c = make(w1);
        for (int i = 0; i < 3; ++i)
            check_close(kiln::matmul(x, c), matmul_ref(a, w1), 1e-4, 1e-5, "off");
        BOOST_TEST(gemm_pack_stats().packs == before.packs);
        BOOST_TEST(gemm_pack_stats().packed_parts == before.packed_parts);
    }
    {
        kiln_test::ScopedEnv env("KILN_GEMM_PACK", "yes");
        try {
            (void)kiln::matmul(x, b);
            BOOST_FAIL("KILN_GEMM_PACK=yes should raise");
        } catch (const kiln::Error& e) {
            std::string what = e.what();
            BOOST_TEST(what.find("KILN_GEMM_PACK must be 0, 1 or auto, got 'yes'") != std::string::npos,
                       what);
        }
    }
    kiln::set_num_threads(0);
}
#endif

BOOST_AUTO_TEST_CASE(matmul_of_expanded_and_empty_operands) {
    Ref row = random_ref({1, 3, 4}, -1, 1), b = random_ref({2, 4, 5}, -1, 1);
    Ref a{{2, 3, 4}, row.v};
    a.v.insert(a.v.end(), row.v.begin(), row.v.end());
    check_close(kiln::matmul(make(row).expand({2, 3, 4}), make(b)), matmul_ref(a, b), 1e-4, 1e-5, "expanded batch");
    Tensor zero_k = kiln::matmul(kiln::ones({3, 0}), kiln::ones({0, 2}));
    check_close(zero_k, Ref{{3, 2}, std::vector<double>(6, 0.0)}, 0, 0, "inner dim 0 gives zeros");
    BOOST_TEST(kiln::matmul(kiln::ones({0, 4}), kiln::ones({4, 2})).shape() == (Shape{0, 2}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()

// A full reduction of a large tensor splits each row into per-thread blocks; the blocks fold
// in a fixed order, so repeated calls agree bit for bit and match a float64 sum.
BOOST_AUTO_TEST_CASE(large_full_sum_splits_over_threads_deterministically) {
    kiln::manual_seed(3);
    kiln::Tensor x = kiln::rand({300000});
    std::vector<float> v = x.to_vector<float>();
    double ref = 0, ref_max = -1;
    for (float f : v) ref += f, ref_max = std::max(ref_max, double(f));
    for (int threads : {1, 2}) {
        kiln::set_num_threads(threads);
        float a = x.sum().item<float>(), b = x.sum().item<float>();
        BOOST_TEST(a == b);
        BOOST_TEST(std::abs(a - ref) <= 1e-5 * ref);
        BOOST_TEST(x.amax().item<float>() == float(ref_max));
    }
    kiln::set_num_threads(0);
}

// OpenBLAS keeps a thread count of its own (all cores by default); matmul hands it kiln's, so
// that set_num_threads(1) means one thread for BLAS too (PyTorch does the same).
BOOST_AUTO_TEST_CASE(matmul_runs_blas_on_kilns_thread_count) {
    auto get_threads = kiln::blas().get_num_threads;
    if (!get_threads) {
        BOOST_TEST_MESSAGE(
            "matmul_runs_blas_on_kilns_thread_count: SKIPPED: the BLAS is not OpenBLAS");
        return;
    }
    kiln::Tensor a = kiln::randn({64, 64});
    for (int threads : {1, 2}) {
        kiln::set_num_threads(threads);
        (void)kiln::matmul(a, a);
        BOOST_TEST(get_threads() == kiln::num_threads());
    }
    kiln::set_num_threads(0);
    (void)kiln::matmul(a, a);
    BOOST_TEST(get_threads() == kiln::num_threads());
}
