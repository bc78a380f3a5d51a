// attention on the device: one launch of the kernel codegen/emit_eager_cuda.h writes
// (`kiln_attention`, compiled by NVRTC once per dtype and feature counts), 128 threads for each
// 32 (or, where the tiles are large, 16) queries of each batch entry. kernels_attention.cpp checks the arguments and picks it.
#include <limits>
#include <map>
#include <mutex>
#include <tuple>

#include "tensor/cuda_runtime.h"
#include "tensor/kernels.h"

namespace kiln {
namespace {

// Laid out as the kernel's struct AttentionArgs.
struct AttentionArgs {
    long long B1, L, S, tiles;
    long long q[4], k[4], v[4], o[4];
    double scale;
    int causal;
};

// The kernel for a dtype and feature counts (its source made once), and its queries per block.
std::pair<void*, int64_t> attention_kernel(DType dtype, int64_t d, int64_t dv) {
    static std::mutex mu;
    static auto* kernels = new std::map<std::tuple<DType, int64_t, int64_t>, std::pair<void*, int64_t>>;  // leaked, as the other caches
    std::lock_guard lock(mu);
    auto& entry = (*kernels)[{dtype, d, dv}];
    if (!entry.first) {
        auto [source, queries] = cuda_attention_source(dtype, d, dv);
        entry = {cuda::detail::kernel(source, "kiln_attention"), queries};
    }
    return entry;
}

void* data(const Tensor& t) { return t.numel() ? t.raw_data() : nullptr; }

}  // namespace

void cuda_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, double scale, bool causal) {
    KILN_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && out.dim() == 4,
               "attention on CUDA: expected [B0, B1, positions, features] arrays, got ", q.shape(),
               ", ", k.shape(), ", ", v.shape(), " and ", out.shape());
    AttentionArgs a{};
    a.B1 = q.size(1);
    a.L = q.size(2);
    a.S = k.size(2);
    auto [fn, queries] = attention_kernel(q.dtype(), q.size(3), v.size(3));
    a.tiles = (a.L + queries - 1) / queries;
    for (int d = 0; d < 4; ++d) {
        a.q[d] = q.strides()[size_t(d)], a.k[d] = k.strides()[size_t(d)];
        a.v[d] = v.strides()[size_t(d)], a.o[d] = out.strides()[size_t(d)];
    }
    a.scale = scale;
    a.causal = causal ? 1 : 0;
    int64_t blocks = q.size(0) * q.size(1) * a.tiles;
    if (blocks == 0) return;
    KILN_CHECK(blocks <= std::numeric_limits<int>::max(), "attention on CUDA: ", blocks,
               " blocks of queries are more than one launch takes");
    const void *qp = data(q), *kp = data(k), *vp = data(v);
    void* op = data(out);
    void* args[] = {&a, &qp, &kp, &vp, &op};
    cuda::detail::launch_grid(fn, unsigned(blocks), 128, 0, args);
}

}  // namespace kiln
