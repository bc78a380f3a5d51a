// Printing tensors the way PyTorch does (torch/_tensor_str.py, default print options):
// one format chosen from the shown elements, rows wrapped at 80 columns, large tensors
// summarized with "...", and suffixes (size, dtype, grad_fn) wrapped the same way.
#include "tensor/print.h"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <vector>

#include "autograd/node.h"
#include "tensor/cuda.h"
#include "tensor/kernels.h"

namespace kiln {
namespace {

constexpr int64_t kSummarizeOver = 1000;  // elements (PyTorch's threshold)
constexpr int64_t kEdgeItems = 3;         // shown at each end of a summarized dim
constexpr int64_t kLineWidth = 80;        // characters

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
    return out;
}

// Appends in place: GCC 12 warns (-Wrestrict, falsely) on "[" + s + "]".
std::string bracket(const std::string& s) {
    std::string out = "[";
    out += s;
    out += ']';
    return out;
}

// Python's str() of a shape tuple: (0, 3), (0,).
std::string shape_tuple(const Shape& s) {
    std::string out = "(";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + (s.size() == 1 ? ",)" : ")");
}

class Printer {
   public:
    explicit Printer(const Tensor& t) : dtype_(t.dtype()), shape_(t.shape()), strides_(contiguous_strides(t.shape())) {
        // Floats are read as float64, ints and bools as int64, so no value is rounded.
        Tensor c = contiguous_as(t.detach(), is_floating(dtype_) ? DType::float64 : DType::int64);
        if (is_floating(dtype_)) floats_ = static_cast<const double*>(c.raw_data());
        else ints_ = static_cast<const int64_t*>(c.raw_data());
        keep_ = c;
        summarize_ = t.numel() > kSummarizeOver;
        std::vector<int64_t> shown;
        collect(0, 0, shown);
        choose_format(shown);
    }

    // The body after "tensor(": a scalar, or nested brackets.
    std::string str(int64_t indent) const { return shape_.empty() ? padded(0) : tensor_str(0, 0, indent); }

   private:
    // Indices along a dim of size n that are printed; -1 marks the "..." in between.
    std::vector<int64_t> rows(int64_t n) const {
        std::vector<int64_t> out;
        bool cut = summarize_ && n > 2 * kEdgeItems;
        for (int64_t i = 0; i < n; ++i) {
            if (cut && i == kEdgeItems) {
                out.push_back(-1);
                i = n - kEdgeItems - 1;
                continue;
            }
            out.push_back(i);
        }
        return out;
    }

    // The elements that get printed (PyTorch's get_summarized_data): the format is chosen from these.
    void collect(int64_t dim, int64_t base, std::vector<int64_t>& out) const {
        if (dim == int64_t(shape_.size())) return out.push_back(base);
        for (int64_t i : rows(shape_[dim]))
            if (i >= 0) collect(dim + 1, base + i * strides_[dim], out);
    }

    // PyTorch's _Formatter: integer mode ("1."), fixed ("1.2500") or scientific ("1.0000e+05"),
    // decided by the nonzero finite values; the width is that of the widest of them.
    void choose_format(const std::vector<int64_t>& shown) {
        if (!is_floating(dtype_)) {
            for (int64_t k : shown) width_ = std::max(width_, raw(k).size());
            return;
        }
        double lo = INFINITY, hi = 0;
        std::vector<int64_t> finite;
        for (int64_t k : shown) {
            double x = floats_[k];
            if (!std::isfinite(x) || x == 0) continue;
            finite.push_back(k);
            lo = std::min(lo, std::abs(x));
            hi = std::max(hi, std::abs(x));
            if (x != std::ceil(x)) int_mode_ = false;
        }
        if (finite.empty()) return;
        sci_mode_ = hi / lo > 1000.0 || hi > 1.0e8 || (!int_mode_ && lo < 1.0e-4);
        for (int64_t k : finite) width_ = std::max(width_, raw(k).size());
    }

    std::string raw(int64_t k) const {
        if (dtype_ == DType::boolean) return ints_[k] ? "True" : "False";
        if (dtype_ == DType::int64) return std::to_string(ints_[k]);
        double x = floats_[k];
        if (std::isnan(x)) return "nan";  // Python never writes "-nan"
        if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
        char buf[64];
        if (sci_mode_) std::snprintf(buf, sizeof buf, "%.4e", x);
        else if (int_mode_) std::snprintf(buf, sizeof buf, "%.0f.", x);
        else std::snprintf(buf, sizeof buf, "%.4f", x);
        return buf;
    }
    std::string padded(int64_t k) const {
        std::string s = raw(k);
        return std::string(width_ - std::min(width_, s.size()), ' ') + s;
    }

    // The last dim: elements joined by ", ", wrapped to fit kLineWidth.
    std::string vector_str(int64_t base, int64_t indent) const {
        int64_t dim = int64_t(shape_.size()) - 1;
        std::vector<std::string> data;
        for (int64_t i : rows(shape_[dim])) data.push_back(i < 0 ? " ..." : padded(base + i * strides_[dim]));
        int64_t per_line = std::max<int64_t>(1, (kLineWidth - indent) / int64_t(width_ + 2));
        std::vector<std::string> lines;
        for (size_t i = 0; i < data.size(); i += size_t(per_line))
            lines.push_back(join(std::vector<std::string>(data.begin() + i, data.begin() + std::min(data.size(), i + size_t(per_line))), ", "));
        return bracket(join(lines, ",\n" + std::string(indent + 1, ' ')));
    }

    // Outer dims: slices separated by "," and one blank line less than the dims left.
    std::string tensor_str(int64_t dim, int64_t base, int64_t indent) const {
        int64_t rank = int64_t(shape_.size());
        if (dim == rank - 1) return vector_str(base, indent);
        std::vector<std::string> slices;
        for (int64_t i : rows(shape_[dim]))
            slices.push_back(i < 0 ? "..." : tensor_str(dim + 1, base + i * strides_[dim], indent + 1));
        std::string sep = ",";
        sep.append(size_t(rank - dim - 1), '\n').append(size_t(indent + 1), ' ');
        return bracket(join(slices, sep));
    }

    DType dtype_;
    Shape shape_, strides_;
    Tensor keep_;  // owns the values below
    const double* floats_ = nullptr;
    const int64_t* ints_ = nullptr;
    bool summarize_ = false, int_mode_ = true, sci_mode_ = false;
    size_t width_ = 1;
};

// Appends ", suffix" or, past the line width, ",\n<indent>suffix" (PyTorch's _add_suffixes).
std::string add_suffixes(std::string s, const std::vector<std::string>& suffixes, int64_t indent) {
    size_t nl = s.rfind('\n');
    int64_t last_line = nl == std::string::npos ? int64_t(s.size()) + 2 : int64_t(s.size() - nl) + 1;
    for (const std::string& suffix : suffixes) {
        int64_t n = int64_t(suffix.size());
        if (last_line + n + 2 > kLineWidth) {
            s += ",\n" + std::string(indent, ' ') + suffix;
            last_line = indent + n;
        } else {
            s += ", " + suffix;
            last_line += n + 2;
        }
    }
    return s + ")";
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
    if (!t.defined()) return os << "tensor(undefined)";
    report_escape(t, Escape::print, std::source_location::current());
    const std::string prefix = "tensor(";
    const int64_t indent = int64_t(prefix.size());
    std::vector<std::string> suffixes;
    std::string body;
    // PyTorch writes dtype=torch.float64; kiln has no torch namespace, so it writes
    // dtype=float64 (the name dtype_name() gives). Like PyTorch, the default dtypes
    // (float32, int64, bool) are left out, except for empty tensors, where no value shows them.
    if (t.numel() == 0) {
        body = "[]";
        if (t.dim() != 1) suffixes.push_back("size=" + shape_tuple(t.shape()));
        if (t.dtype() != DType::float32) suffixes.push_back(std::string("dtype=") + dtype_name(t.dtype()));
    } else {
        body = Printer(t.device().type == DeviceType::cuda ? cuda::to_device(t.detach(), cpu) : t).str(indent);
        if (t.dtype() == DType::float64) suffixes.push_back(std::string("dtype=") + dtype_name(t.dtype()));
    }
    if (t.device().type == DeviceType::cuda) {  // as PyTorch: device='cuda:0'
        std::ostringstream d;
        d << t.device();
        suffixes.insert(suffixes.begin(), "device='" + d.str() + "'");
    }
    if (t.grad_fn()) suffixes.push_back("grad_fn=<" + t.grad_fn()->name() + ">");
    else if (t.requires_grad()) suffixes.push_back("requires_grad=True");
    return os << add_suffixes(prefix + body, suffixes, indent);
}

std::string to_string(const Tensor& t) {
    std::ostringstream os;
    os << t;
    return os.str();
}

}  // namespace kiln
