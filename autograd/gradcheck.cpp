// gradcheck: autograd's gradient of sum(fn(x) * r) against central differences.
#include "autograd/gradcheck.h"

#include <cmath>
#include <iomanip>
#include <random>
#include <sstream>

#include "autograd/node.h"

namespace kiln::autograd {
namespace {

constexpr int kMaxReported = 5;  // mismatching elements listed per input

// The random direction the output is projected on: one normal value per output element.
Tensor projection(const Shape& shape, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal;
    std::vector<double> values(size_t(shape_numel(shape)));
    for (double& v : values) v = normal(rng);
    return tensor(values, shape, {.dtype = float64});
}

double projected(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& xs,
                 const Tensor& r) {
    Tensor out = fn(xs);
    return (out.to(float64) * r).sum().item<double>();
}

std::string index_string(int64_t flat, const Shape& shape) {
    Shape index(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
        index[d] = flat % shape[d];
        flat /= shape[d];
    }
    std::ostringstream os;
    os << index;
    return os.str();
}

}  // namespace

bool gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, std::vector<Tensor> inputs,
               GradcheckOptions opt) {
    std::vector<Tensor> xs;
    std::vector<bool> checked;
    for (const Tensor& t : inputs) {
        KILN_CHECK(t.defined(), "gradcheck: input ", xs.size(), " is an undefined tensor");
        bool floating = is_floating(t.dtype());
        xs.push_back(floating ? t.detach().to(float64).clone().requires_grad_(true) : t);
        checked.push_back(floating);
    }

    // Analytic: one backward pass of the projected output.
    Tensor out;
    {
        EnableGradGuard grad_mode;
        out = fn(xs);
    }
    KILN_CHECK(out.defined() && is_floating(out.dtype()), "gradcheck: fn must return a floating point tensor");
    // A scalar output needs no projection; r = 1 keeps its report in plain derivatives.
    Tensor r = out.numel() == 1 ? ones(out.shape(), {.dtype = float64}) : projection(out.shape(), opt.seed);
    if (out.requires_grad()) {
        EnableGradGuard grad_mode;
        (out.to(float64) * r).sum().backward();
    }

    // Numeric: perturb one element of a private copy at a time.
    NoGradGuard no_grad;
    std::vector<Tensor> copies;
    for (size_t i = 0; i < xs.size(); ++i) copies.push_back(checked[i] ? xs[i].detach().clone() : xs[i]);
    std::ostringstream report;
    bool ok = true;
    for (size_t i = 0; i < xs.size(); ++i) {
        if (!checked[i]) continue;
        Tensor grad = xs[i].grad();
        std::vector<double> analytic = grad.defined() ? grad.to_vector<double>() : std::vector<double>(size_t(xs[i].numel()), 0.0);
        double* p = copies[i].data_ptr<double>();
        int mismatches = 0;
        std::ostringstream lines;
        for (int64_t j = 0; j < xs[i].numel(); ++j) {
            double v = p[j];
            p[j] = v + opt.eps;
            double plus = projected(fn, copies, r);
            p[j] = v - opt.eps;
            double minus = projected(fn, copies, r);
            p[j] = v;
            double numeric = (plus - minus) / (2 * opt.eps), a = analytic[size_t(j)];
            double diff = std::abs(a - numeric), tolerance = opt.atol + opt.rtol * std::abs(numeric);
            if (diff <= tolerance) continue;  // NaN on either side fails
            if (mismatches++ < kMaxReported)
                lines << "  element " << j << " (index " << index_string(j, xs[i].shape()) << "): analytic " << a
                      << " vs numeric " << numeric << " (|diff| " << diff << " > tolerance " << tolerance << ")\n";
        }
        if (mismatches == 0) continue;
        ok = false;
        report << "gradcheck: analytic and numeric gradients differ for input " << i << " (shape " << xs[i].shape()
               << "), " << mismatches << " of " << xs[i].numel() << " elements\n"
               << lines.str();
    }
    if (ok) return true;
    report << "  (eps " << opt.eps << ", atol " << opt.atol << ", rtol " << opt.rtol
           << "; the gradient checked is that of sum(fn(x) * r) for a random r)";
    if (opt.raise_exception) throw Error(report.str());
    return false;
}

}  // namespace kiln::autograd
