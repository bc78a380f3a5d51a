// tensor/math_functions.def, every entry: the CPU vocabulary it expands into
// (tensor/pointwise_math.h) on float and double scalars and batches against std:: in double,
// and the CUDA prelude it expands into (one line per entry; NVRTC compiles the prelude in
// tests/cuda/test_cuda.cpp, every_eager_kernel_source_compiles_with_nvrtc).
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "tensor/cuda_prelude.h"
#include "tensor/kernels.h"
#include "tensor/pointwise_math.h"

namespace {

// Inside every entry's domain: x in [0.1, 0.9] (asin, log, ...), y in [0.5, 2] (pow, fmod).
std::vector<double> xs() {
    std::vector<double> v;
    for (int i = 0; i <= 16; ++i) v.push_back(0.1 + 0.05 * i);
    return v;
}
double y_for(double x) { return 0.5 + 1.5 * x; }

template <class B>
double first_lane(B b) {
    alignas(64) typename B::value_type lanes[B::size];
    b.store_aligned(lanes);
    return double(lanes[0]);
}

bool close(double got, double want, double rtol) {
    return std::abs(got - want) <= rtol * (std::abs(want) + 1e-30);
}

// f: kiln_math's function (generic), ref: std:: on double. Arity 1 or 2.
template <int Arity, class F, class R>
void check(const char* name, F f, R ref) {
    using Bf = xsimd::batch<float>;
    using Bd = xsimd::batch<double>;
    for (double x : xs()) {
        double y = y_for(x);
        float xf = float(x), yf = float(y);
        double want_f, want_d, got_f, got_d, got_bf, got_bd;
        if constexpr (Arity == 1) {
            want_f = ref(double(xf)), want_d = ref(x);
            got_f = f(xf), got_d = f(x), got_bf = first_lane(f(Bf(xf))),
            got_bd = first_lane(f(Bd(x)));
        } else {
            want_f = ref(double(xf), double(yf)), want_d = ref(x, y);
            got_f = f(xf, yf), got_d = f(x, y), got_bf = first_lane(f(Bf(xf), Bf(yf))),
            got_bd = first_lane(f(Bd(x), Bd(y)));
        }
        BOOST_TEST(close(got_f, want_f, 1e-6),
                   name << " float scalar at " << x << ": " << got_f << ", std " << want_f);
        BOOST_TEST(close(got_bf, want_f, 1e-6),
                   name << " float batch at " << x << ": " << got_bf << ", std " << want_f);
        BOOST_TEST(close(got_d, want_d, 1e-15),
                   name << " double scalar at " << x << ": " << got_d << ", std " << want_d);
        BOOST_TEST(close(got_bd, want_d, 1e-14),
                   name << " double batch at " << x << ": " << got_bd << ", std " << want_d);
    }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(math_functions)

BOOST_AUTO_TEST_CASE(every_math_function_matches_std_on_scalars_and_batches) {
    int checked = 0;
#define KILN_MATH(name, arity, ...)                             \
    check<arity>(                                               \
        #name, [](auto... a) { return kiln_math::name(a...); }, \
        [](auto... a) { return std::name(double(a)...); });     \
    ++checked;
#include "tensor/math_functions.def"
    BOOST_TEST(checked >= 26);
}

BOOST_AUTO_TEST_CASE(the_cuda_prelude_has_every_math_function_for_float_and_double) {
    const std::string prelude = kiln::cuda_math_prelude();
#define KILN_MATH(name, arity, cpu, cuda_float, cuda_double, ints)                               \
    BOOST_TEST(prelude.find("KILN_F" #arity "(" #name ", " #cuda_float ", " #cuda_double ")") != \
                   std::string::npos,                                                            \
               #name " is missing from the CUDA prelude");
#include "tensor/math_functions.def"
    BOOST_TEST(prelude.find(kiln::cuda_prelude::kMathFunctions) != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
