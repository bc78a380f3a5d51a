// Printing tensors the way PyTorch does, summarizing large ones with "...".
#include "tensor/print.h"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <vector>

#include "autograd/node.h"
#include "tensor/kernels.h"

namespace kiln {
namespace {

constexpr int64_t kSummarizeOver = 1000;  // elements
constexpr int64_t kEdgeItems = 3;

struct Formatter {
    DType dtype;
    bool integral = true, scientific = false;
    size_t width = 1;

    explicit Formatter(const std::vector<double>& v, DType dt) : dtype(dt) {
        double max_abs = 0, min_abs = INFINITY;
        for (double x : v) {
            if (!std::isfinite(x)) continue;
            if (x != std::floor(x)) integral = false;
            max_abs = std::max(max_abs, std::abs(x));
            if (x != 0) min_abs = std::min(min_abs, std::abs(x));
        }
        scientific = is_floating(dt) && (max_abs >= 1e8 || (!integral && min_abs < 1e-4) || (max_abs / min_abs > 1000 && max_abs > 1000));
        for (double x : v) width = std::max(width, str(x).size());
    }
    std::string str(double x) const {
        char buf[64];
        if (dtype == DType::boolean) return x != 0 ? "True" : "False";
        if (dtype == DType::int64) std::snprintf(buf, sizeof buf, "%lld", (long long)x);
        else if (std::isnan(x)) return "nan";
        else if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
        else if (scientific) std::snprintf(buf, sizeof buf, "%.4e", x);
        else if (integral) std::snprintf(buf, sizeof buf, "%.0f.", x);
        else std::snprintf(buf, sizeof buf, "%.4f", x);
        return buf;
    }
    std::string padded(double x) const {
        std::string s = str(x);
        return std::string(width - std::min(width, s.size()), ' ') + s;
    }
};

void print_dim(std::ostream& os, const std::vector<double>& v, const Shape& shape, const Shape& strides,
               int64_t dim, int64_t base, const Formatter& f, int indent, bool summarize) {
    if (shape.empty()) {
        os << f.str(v[0]);
        return;
    }
    int64_t n = shape[dim];
    bool last = dim == int64_t(shape.size()) - 1;
    os << "[";
    for (int64_t i = 0; i < n; ++i) {
        if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
            if (last) os << "..., ";
            else os << "...,\n" << std::string(indent + dim + 1, ' ');
            i = n - kEdgeItems - 1;
            continue;
        }
        if (last) os << f.padded(v[base + i * strides[dim]]);
        else print_dim(os, v, shape, strides, dim + 1, base + i * strides[dim], f, indent, summarize);
        if (i + 1 == n) continue;
        if (last) os << ", ";
        else os << "," << std::string(shape.size() - dim - 1, '\n') << std::string(indent + dim + 1, ' ');
    }
    os << "]";
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
    if (!t.defined()) return os << "tensor(undefined)";
    report_escape(t, Escape::data_access, std::source_location::current());
    Tensor c = contiguous_as(t.detach(), DType::float64);
    const double* p = static_cast<const double*>(c.raw_data());
    std::vector<double> v(p, p + t.numel());
    bool summarize = t.numel() > kSummarizeOver;
    std::vector<double> shown;
    if (summarize) {
        for (size_t i = 0; i < v.size(); i += std::max<size_t>(1, v.size() / 64)) shown.push_back(v[i]);
    }
    Formatter f(summarize ? shown : v, t.dtype());
    if (summarize) {
        f.width = 1;
        for (double x : v) f.width = std::max(f.width, f.str(x).size());
    }
    const int indent = 7;  // strlen("tensor(")
    os << "tensor(";
    if (t.numel() == 0) os << "[]";
    else print_dim(os, v, t.shape(), c.strides(), 0, 0, f, indent, summarize);
    if (t.numel() == 0 && t.dim() != 1) os << ", size=" << t.shape();
    if (t.dtype() != DType::float32 && t.dtype() != DType::int64 && t.dtype() != DType::boolean) os << ", dtype=" << t.dtype();
    if (t.grad_fn()) os << ", grad_fn=<" << t.grad_fn()->name() << ">";
    else if (t.requires_grad()) os << ", requires_grad=True";
    return os << ")";
}

std::string to_string(const Tensor& t) {
    std::ostringstream os;
    os << t;
    return os.str();
}

}  // namespace kiln
