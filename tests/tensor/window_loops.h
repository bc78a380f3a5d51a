// The float64 loops conv2d and pooling are checked against (as PyTorch computes them) and
// the comparison they share; used by test_conv.cpp and test_pooling.cpp.
#pragma once
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "kiln.h"

namespace kiln_test {

using kiln::float64;
using kiln::Tensor;
using kiln::tensor;
using kiln::Window2d;

// out[n, o, i, j] = b[o] + sum over c in o's group, ki, kj of x[n, c, i*s + ki*d - p, ...] * w[o, c', ki, kj]
inline Tensor conv_reference(const Tensor& x, const Tensor& w, const Tensor& b, std::pair<int64_t, int64_t> s, std::pair<int64_t, int64_t> p,
                      std::pair<int64_t, int64_t> d, int64_t groups) {
    std::vector<double> xv = x.to(float64).contiguous().to_vector<double>(), wv = w.to(float64).contiguous().to_vector<double>();
    int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), O = w.size(0), kh = w.size(2), kw = w.size(3);
    int64_t OH = (H + 2 * p.first - d.first * (kh - 1) - 1) / s.first + 1, OW = (W + 2 * p.second - d.second * (kw - 1) - 1) / s.second + 1;
    int64_t Cg = C / groups, Og = O / groups;
    std::vector<double> out(size_t(N * O * OH * OW));
    for (int64_t n = 0; n < N; ++n)
        for (int64_t o = 0; o < O; ++o)
            for (int64_t i = 0; i < OH; ++i)
                for (int64_t j = 0; j < OW; ++j) {
                    double acc = b.defined() ? b.to(float64).to_vector<double>()[size_t(o)] : 0.0;
                    for (int64_t c = 0; c < Cg; ++c)
                        for (int64_t ki = 0; ki < kh; ++ki)
                            for (int64_t kj = 0; kj < kw; ++kj) {
                                int64_t h = i * s.first + ki * d.first - p.first, ww = j * s.second + kj * d.second - p.second;
                                if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
                                int64_t cin = o / Og * Cg + c;
                                acc += xv[size_t(((n * C + cin) * H + h) * W + ww)] * wv[size_t(((o * Cg + c) * kh + ki) * kw + kj)];
                            }
                    out[size_t(((n * O + o) * OH + i) * OW + j)] = acc;
                }
    return tensor(out, {N, O, OH, OW});
}

inline double max_diff(const Tensor& a, const Tensor& b) {
    BOOST_REQUIRE(a.shape() == b.shape());
    return (a.to(float64) - b.to(float64)).abs().amax().item<double>();
}

inline const char* const kBackends[] = {"eager", "aot_eager", "inductor"};

// PyTorch's pooling loops in float64, written out again (aten's max_pool2d and avg_pool2d CPU
// kernels): the output size with ceil_mode, each window clipped to the padded input for
// count_include_pad, the first maximum (strict >) and its index into the H*W plane.
struct PoolLoops {
    Tensor out, index;
};
inline PoolLoops pool_loops(const Tensor& x, const Window2d& w, bool max) {
    std::vector<double> xv = x.to(float64).contiguous().to_vector<double>();
    int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    auto [kh, kw] = w.kernel;
    auto [sh, sw] = w.stride;
    auto [ph, pw] = w.padding;
    auto [dh, dw] = w.dilation;
    auto size = [&](int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
        int64_t num = in + 2 * p - d * (k - 1) - 1 + (w.ceil_mode ? s - 1 : 0);
        int64_t out = int64_t(std::floor(double(num) / double(s))) + 1;
        if (w.ceil_mode && (out - 1) * s >= in + p) --out;
        return out;
    };
    int64_t OH = size(H, kh, sh, ph, dh), OW = size(W, kw, sw, pw, dw);
    std::vector<double> out, index;
    for (int64_t nc = 0; nc < N * C; ++nc)
        for (int64_t i = 0; i < OH; ++i)
            for (int64_t j = 0; j < OW; ++j) {
                int64_t h0 = i * sh - ph, w0 = j * sw - pw;
                if (max) {
                    double best = -INFINITY;
                    int64_t at = -1;
                    for (int64_t ki = 0; ki < kh; ++ki)
                        for (int64_t kj = 0; kj < kw; ++kj) {
                            int64_t h = h0 + ki * dh, ww = w0 + kj * dw;
                            if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
                            double v = xv[size_t((nc * H + h) * W + ww)];
                            if (at < 0 || v > best) best = v, at = h * W + ww;
                        }
                    out.push_back(best);
                    index.push_back(double(at));
                } else {
                    int64_t h1 = std::min(h0 + kh, H + ph), w1 = std::min(w0 + kw, W + pw);
                    int64_t pool_size = (h1 - h0) * (w1 - w0);
                    h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0),
                    h1 = std::min(h1, H), w1 = std::min(w1, W);
                    double sum = 0;
                    for (int64_t h = h0; h < h1; ++h)
                        for (int64_t ww = w0; ww < w1; ++ww)
                            sum += xv[size_t((nc * H + h) * W + ww)];
                    int64_t divisor = w.divisor_override    ? w.divisor_override
                                      : w.count_include_pad ? pool_size
                                                            : (h1 - h0) * (w1 - w0);
                    out.push_back(sum / double(divisor));
                }
            }
    return {tensor(out, {N, C, OH, OW}), max ? tensor(index, {N, C, OH, OW}) : Tensor()};
}

}  // namespace kiln_test
