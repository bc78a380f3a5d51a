// GPT's GEMM shapes (bench_models' GPT: batch 8, seq 128, d 256, 4 heads, MLP 1024) through
// kiln's matmul on each library KILN_GEMM chooses from (docs/env.md): OpenBLAS and oneDNN,
// taking turns within each repetition so that noise from other processes falls on both.
// bench/torch_gemm_shapes.py times torch.matmul on the same shapes. Milliseconds per call,
// the median of each library's per-repetition medians; prints one JSON object.
//   KILN_NUM_THREADS=T OPENBLAS_NUM_THREADS=T build/bench_gemm_shapes [--reps N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kiln.h"
#include "tensor/gemm.h"
#include "tensor/parallel.h"

using namespace kiln;

namespace {

struct GemmShape {
    const char* name;
    int64_t batch, M, N, K;
    bool trans_a, trans_b;  // a is [K, M] read transposed; b is [N, K] (a Linear's weight)
};

// Each of a GPT layer's GEMMs: forward, input gradient (dX), weight gradient (dW).
const std::vector<GemmShape> kShapes = {
    {"q/k/v/out_proj x @ W^T", 1, 1024, 256, 256, false, true},
    {"c_fc, lm_head x @ W^T", 1, 1024, 1024, 256, false, true},
    {"c_proj x @ W^T", 1, 1024, 256, 1024, false, true},
    {"dX of q/k/v/out_proj", 1, 1024, 256, 256, false, false},
    {"dX of c_fc", 1, 1024, 256, 1024, false, false},
    {"dX of c_proj", 1, 1024, 1024, 256, false, false},
    {"dW of q/k/v/out_proj", 1, 256, 256, 1024, true, false},
    {"dW of c_fc", 1, 1024, 256, 1024, true, false},
    {"dW of c_proj", 1, 256, 1024, 1024, true, false},
    {"attention q @ k^T, 32 heads", 32, 128, 128, 64, false, true},
    {"attention p @ v, 32 heads", 32, 128, 64, 128, false, false},
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    int reps = 5;
    for (int i = 1; i + 1 < argc; ++i)
        if (std::strcmp(argv[i], "--reps") == 0) reps = std::max(1, std::atoi(argv[i + 1]));
    const char* libraries[] = {"openblas", "onednn"};
    std::string rows;
    for (const GemmShape& s : kShapes) {
        Shape batch = s.batch > 1 ? Shape{s.batch} : Shape{};
        auto shaped = [&](int64_t r, int64_t c) {
            Shape sh = batch;
            sh.insert(sh.end(), {r, c});
            return randn(sh);
        };
        Tensor a = s.trans_a ? shaped(s.K, s.M).transpose(-2, -1) : shaped(s.M, s.K);
        Tensor b = s.trans_b ? shaped(s.N, s.K).transpose(-2, -1) : shaped(s.K, s.N);
        std::vector<double> per_rep[2];
        for (int r = 0; r < reps; ++r) {
            for (int l = 0; l < 2; ++l) {
                setenv("KILN_GEMM", libraries[l], 1);
                (void)matmul(a, b);
                std::vector<double> ms;
                for (int i = 0; i < 20; ++i) {
                    auto t0 = std::chrono::steady_clock::now();
                    (void)matmul(a, b);
                    ms.push_back(std::chrono::duration<double, std::milli>(
                                     std::chrono::steady_clock::now() - t0)
                                     .count());
                }
                per_rep[l].push_back(median(ms));
            }
        }
        char row[512];
        std::snprintf(row, sizeof row,
                      "%s\n  {\"shape\": \"%s\", \"batch\": %lld, \"M\": %lld, \"N\": %lld, "
                      "\"K\": %lld, \"trans_a\": %s, \"trans_b\": %s, \"openblas_ms\": %.3f, "
                      "\"onednn_ms\": %.3f}",
                      rows.empty() ? "" : ",", s.name, (long long)s.batch, (long long)s.M,
                      (long long)s.N, (long long)s.K, s.trans_a ? "true" : "false",
                      s.trans_b ? "true" : "false", median(per_rep[0]), median(per_rep[1]));
        rows += row;
    }
    std::printf("{\"bench\": \"gemm_shapes\", \"threads\": %d, \"rows\": [%s\n]}\n", num_threads(),
                rows.c_str());
}
