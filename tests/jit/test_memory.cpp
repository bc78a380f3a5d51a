// Compiled code holds intermediates only while it needs them: the graph runners and the
// interpreter drop each value after its last reader (codegen::detail::release_plan,
// jit::release_plan). Measured with the CPU pool's live bytes, against eager on the same
// function: a chain of matmuls (each output a stored buffer) forward, and a training step.
#include <boost/test/unit_test.hpp>

#include <iostream>

#include "kiln.h"
#include "tensor/storage.h"

using namespace kiln;

namespace {

// The most CPU bytes live at once while `f` runs, above what was live before it.
template <class F>
size_t peak_bytes_of(F&& f) {
    size_t before = pool_stats().live_bytes;
    pool_reset_peak();
    f();
    return pool_stats().peak_live_bytes - before;
}

Tensor chain(Tensor x, Tensor w) {
    for (int i = 0; i < 8; ++i) x = tanh(matmul(x, w));  // 8 stored [256, 256] values, 256 KiB each
    return x.sum();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(memory)

BOOST_AUTO_TEST_CASE(compiled_forward_holds_no_more_than_eager) {
    Tensor x = randn({256, 256}) * 0.1, w = randn({256, 256}) * 0.1;
    size_t eager = peak_bytes_of([&] { (void)chain(x, w); });
    BOOST_TEST(eager > 0u);
    for (const char* backend : {"eager", "aot_eager", "inductor"}) {
        BOOST_TEST_CONTEXT(backend) {
            auto f = compile(chain, {.backend = backend});
            (void)f(x, w);  // record and compile outside the measurement
            size_t compiled = peak_bytes_of([&] { (void)f(x, w); });
            // Eager keeps about two [256, 256] values at once; keeping all eight would be 4x.
            BOOST_TEST(compiled <= eager + 256 * 256 * 4, "compiled " << compiled << " bytes, eager " << eager);
        }
    }
}

BOOST_AUTO_TEST_CASE(a_compiled_training_step_holds_no_more_than_eager) {
    Tensor x = randn({256, 256}) * 0.1;
    Tensor w = (randn({256, 256}) * 0.1).requires_grad_();
    auto step = [&](auto& f) {
        w.zero_grad();
        f(x, w).backward();
    };
    auto eager_fn = [](Tensor a, Tensor b) { return chain(a, b); };
    size_t eager = peak_bytes_of([&] { step(eager_fn); });
    for (const char* backend : {"aot_eager", "inductor"}) {
        BOOST_TEST_CONTEXT(backend) {
            auto f = compile(chain, {.backend = backend});
            step(f);
            size_t compiled = peak_bytes_of([&] { step(f); });
            // Not yet <= eager: the backward graph recomputes the activations it did not save
            // up front, so they live alongside the saved ones (aot_eager 1.4x, inductor 2.0x
            // eager here; docs/models.md). Keeping every value of both halves to the end, as
            // before release_plan, is far above this bound.
            BOOST_TEST(compiled <= 2 * eager + 256 * 256 * 4, "compiled " << compiled << " bytes, eager " << eager);
            std::cout << "memory: " << backend << " training step peak " << compiled << " bytes, eager " << eager << "\n";
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()
