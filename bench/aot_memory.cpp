// Saved-for-backward bytes, eager tape vs AOT min-cut partition (docs/aot.md).
// Prints one JSON object. Target: compiled <= 50% of eager on the pointwise chains.
#include <cstdio>

#include "jit/aot/aot.h"
#include "kiln.h"

using namespace kiln;

namespace {

// Runs f twice (the first call records), then reads the plan's memory report.
template <class F, class... A>
jit::aot::MemoryReport measure(F& f, A... args) {
    f(args...);
    Tensor out = f(args...);
    out.sum().backward();
    return jit::aot::latest_memory_report();
}

void print(const char* name, const jit::aot::MemoryReport& m, bool last) {
    std::printf("  \"%s\": {\"eager_bytes\": %zu, \"compiled_bytes\": %zu, \"eager_tensors\": %zu, "
                "\"compiled_tensors\": %zu, \"ratio\": %.3f}%s\n",
                name, m.eager_bytes(), m.compiled_bytes(), m.eager.size(), m.compiled.size(),
                double(m.compiled_bytes()) / double(std::max<size_t>(m.eager_bytes(), 1)), last ? "" : ",");
}

}  // namespace

int main() {
    auto cos_cos = compile([](Tensor x) { return cos(cos(x)); }, {.backend = "aot_eager"});
    auto gelu = compile([](Tensor x) { return 0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x))); },
                        {.backend = "aot_eager"});
    Tensor w1 = (randn({784, 512}) * 0.03).requires_grad_(), b1 = zeros({512}, {.requires_grad = true});
    Tensor w2 = (randn({512, 512}) * 0.03).requires_grad_(), b2 = zeros({512}, {.requires_grad = true});
    Tensor w3 = (randn({512, 10}) * 0.03).requires_grad_(), b3 = zeros({10}, {.requires_grad = true});
    auto mlp = compile([&](Tensor x) {
        Tensor h = relu(matmul(x, w1) + b1);
        h = relu(matmul(h, w2) + b2);
        return log_softmax(matmul(h, w3) + b3, 1);
    }, {.backend = "aot_eager"});

    std::printf("{\n  \"bench\": \"aot_memory\",\n");
    print("cos_cos_5x5x5", measure(cos_cos, randn({5, 5, 5}, {.requires_grad = true})), false);
    print("gelu_chain_1e6", measure(gelu, randn({1000000}, {.requires_grad = true})), false);
    print("mlp_784_512_512_10_b256", measure(mlp, randn({256, 784})), true);
    std::printf("}\n");
}
