// Assignment 5's held-out tests (not in the student release): shapes drawn from the grading
// run's seed (assignments/heldout/seed.h); results compared with eager.
#include <boost/test/unit_test.hpp>

#include "assignments/a5/student.h"
#include "assignments/heldout/seed.h"

using namespace kiln;

namespace {

Tensor chain(Tensor x, Tensor y) { return exp(-x * y) * 0.25 + tanh(y) - sigmoid(x); }
Tensor around_a_sum(Tensor x, Tensor y) {
    Tensor a = cos(x) + y;
    return a * 2 - a.sum({1}, true);
}

Shape random_shape(std::mt19937_64& rng) {
    return {int64_t(1 + rng() % 40), int64_t(1 + rng() % 40)};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(task_5_3)

BOOST_AUTO_TEST_CASE(heldout_drawn_shapes_equal_eager) {
    auto rng = heldout::rng(53);
    manual_seed(int64_t(rng() % 100000));
    for (auto fn : {chain, around_a_sum}) {
        Shape shape = random_shape(rng);
        jit::reset();
        auto f = compile(fn, {.backend = student::fusion_backend});
        for (int call = 0; call < 2; ++call) {
            Tensor x = randn(shape), y = randn(shape);
            BOOST_TEST(allclose(f(x, y), fn(x, y), 1e-4, 1e-5),
                       "[" << shape[0] << ", " << shape[1] << "] (seed " << heldout::seed() << ")");
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()
