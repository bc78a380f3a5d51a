// gradcheck: compares autograd's gradients with central finite differences, in float64.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "tensor/ops.h"

namespace kiln::autograd {

struct GradcheckOptions {
    double eps = 1e-6;             // finite-difference step
    double atol = 1e-5;            // pass if |analytic - numeric| <= atol + rtol * |numeric|
    double rtol = 1e-3;
    bool raise_exception = true;   // on mismatch: throw kiln::Error with a report, else return false
    uint64_t seed = 0;             // for the random projection of the output
};

// Floating inputs become float64 leaves requiring grad; other inputs (int64 targets,
// bool masks) are passed through unchanged. The output is reduced to a scalar by a
// random projection, sum(fn(x) * r) (r = 1 for a scalar output), whose gradient is
// checked element by element.
bool gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, std::vector<Tensor> inputs,
               GradcheckOptions options = {});

}  // namespace kiln::autograd

namespace kiln {
using autograd::gradcheck;
using autograd::GradcheckOptions;
}  // namespace kiln
