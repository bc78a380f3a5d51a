#include <boost/test/unit_test.hpp>
#include <iostream>
#include "kiln.h"
using namespace kiln;
BOOST_AUTO_TEST_SUITE(scratch)
BOOST_AUTO_TEST_CASE(class2) {
    std::vector<std::function<Tensor(Tensor)>> fs = {
        [](Tensor x) { Tensor i = x.to(int64); return where(i > 0.0, x, x.sum({0}, true)) + i.to(float64); },
        [](Tensor x) { Tensor r = x.slice(0, 0, 1); return where(x.to(int64) > 0.0, r, x); },
        [](Tensor x) { Tensor r = x.slice(0, 0, 1); return where(x > 0.0, r.expand(x.shape()), x * 2) + x.to(int64).to(float64); },
        [](Tensor x) { Tensor c = x.to(int64) == x.slice(0,0,1).to(int64); return where(c, x, x.slice(0,0,1)); },
        [](Tensor x) { Tensor c = x.to(int64).to(boolean); return where(c, x.slice(0,0,1), x.slice(0,1,2)); },
        [](Tensor x) { return where(x > 0.0, x.slice(0,0,1), x.slice(0,0,1) * 2); },
    };
    for (size_t k = 0; k < fs.size(); ++k)
    for (const char* backend : {"aot_eager", "inductor"}) {
        jit::reset();
        auto c = compile(fs[k], {.backend = backend});
        for (int call = 0; call < 2; ++call) {
            Tensor v = (randn({4, 5}) * 3).to(float64);
            Tensor xe = v.clone().requires_grad_(), xc = v.clone().requires_grad_();
            fs[k](xe).sum().backward();
            c(xc).sum().backward();
            if (!allclose(xe.grad(), xc.grad())) std::cout << "MISMATCH f" << k << " " << backend << " call " << call << "\n" << xe.grad() << "\n" << xc.grad() << "\n";
        }
    }
}
BOOST_AUTO_TEST_CASE(class3) {
    std::vector<std::function<Tensor(Tensor, Tensor)>> fs = {
        [](Tensor x, Tensor y) { return (x * 4).to(int64) > (y * 4).to(int64); },
        [](Tensor x, Tensor y) { return ((x * 4).to(int64) > 0.0).to(int64) == (y > 0.0).to(int64); },
        [](Tensor x, Tensor y) { return ne((x * 4).to(int64).to(boolean), y > 0.0); },
        [](Tensor x, Tensor y) { return (x > y).to(float64).to(boolean); },
        [](Tensor x, Tensor y) { return ((x + y).to(float64) > 0.0).to(int64).to(boolean); },
    };
    for (size_t k = 0; k < fs.size(); ++k)
    for (const char* backend : {"eager", "aot_eager", "inductor"}) {
        jit::reset();
        auto c = compile(fs[k], {.backend = backend});
        for (int call = 0; call < 3; ++call) {
            for (Shape sh : {Shape{9001, 5}, Shape{5, 9001}}) {
            Tensor x = randn(sh), y = randn(sh);
            Tensor e = fs[k](x, y), g = c(x, y);
            if (!(e.to(int64).to_vector<int64_t>() == g.to(int64).to_vector<int64_t>())) std::cout << "MISMATCH3 f" << k << " " << backend << " call " << call << " " << sh << "\n";
            }
        }
    }
}
BOOST_AUTO_TEST_SUITE_END()
