// How codegen tests compare generated results with eager ones (shared by the test files).
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "tensor/ops.h"

namespace kiln_test {

// 0 when equal; else the worst |a - b| / (|b| + 1). NaN and inf must sit at the same places,
// shapes must match, and an undefined gradient counts as zeros.
inline double relative_error(const kiln::Tensor& got, const kiln::Tensor& want) {
    if (!got.defined() || !want.defined()) {
        const kiln::Tensor& d = got.defined() ? got : want;
        return d.defined() && d.abs().sum().item<float>() != 0 ? INFINITY : 0;
    }
    if (got.shape() != want.shape()) return INFINITY;
    std::vector<float> a = got.contiguous().to_vector<float>(), b = want.contiguous().to_vector<float>();
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        if (std::isnan(b[i]) || std::isinf(b[i])) {
            if (!(std::isnan(b[i]) ? std::isnan(a[i]) : a[i] == b[i])) return INFINITY;
            continue;
        }
        worst = std::max(worst, std::abs(double(a[i]) - double(b[i])) / (std::abs(double(b[i])) + 1.0));
    }
    return worst;
}

}  // namespace kiln_test
