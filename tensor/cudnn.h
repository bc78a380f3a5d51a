// Internal to tensor/: CUDA convolutions through cuDNN, opened with dlopen on first use like
// cuBLAS (tensor/cuda_runtime.h says why no header is used). Pointer-level: the conv2d ops'
// CUDA kernels (tensor/kernels_conv_cudnn.cpp) check the tensors and call these.
//
// Where the library is looked for, in order: $KILN_CUDNN_LIB (a libcudnn.so.9 or its
// folder), libcudnn.so.9 on the loader's path, then the copy PyTorch's CUDA wheels install
// (site-packages/nvidia/cudnn/lib). KILN_CUDNN=0 turns cuDNN off (the im2col + GEMM path runs).
#pragma once
#include <cstdint>
#include <string>

namespace kiln::cuda::detail {

// One 2-d convolution as cuDNN sees it: an NCHW input, an OIHW weight (I = c / groups) and
// the window. Each direction's execution plan (cuDNN's backend API: operation graph, engine
// config, finalized plan) is made once per geometry and cached.
struct CudnnConv {
    int64_t n, c, h, w;  // input
    int64_t o, kh, kw;   // weight [o, c / groups, kh, kw]
    int64_t sh, sw, ph, pw, dh, dw, groups;
    bool f64;  // float64 data (else float32)
    int64_t out_h() const;
    int64_t out_w() const;
};

// Whether a CUDA conv2d runs through cuDNN now: KILN_CUDNN is not 0 and the library loads.
// When it does not load, the first call prints one note naming why (and the im2col path runs).
bool cudnn_enabled();
// Why the library did not load ("" when it did, or before the first try).
std::string cudnn_unavailable_reason();
// The loaded library's version (cudnnGetVersion(), e.g. 90600), 0 when not loaded.
int64_t cudnn_version();

// Each returns false, having run nothing, when cuDNN cannot plan the geometry (a descriptor
// it refuses, no engine config that finalizes within the workspace limit; one note on stderr
// the first time, each refusal under KILN_LOGS=cudnn);
// the caller then runs im2col + GEMM. A failing cuDNN call raises a kiln::Error.
// y = conv(x, w) (+ bias[o], through cudnnAddTensor, when bias is not null).
bool cudnn_conv_forward(const CudnnConv& g, const void* x, const void* w, const void* bias,
                        void* y);
// dx = the input gradient, from the output gradient dy and w.
bool cudnn_conv_input_grad(const CudnnConv& g, const void* dy, const void* w, void* dx);
// dw = the weight gradient, from x and the output gradient dy.
bool cudnn_conv_weight_grad(const CudnnConv& g, const void* x, const void* dy, void* dw);

// For tests without a GPU: builds and finalizes `g`'s operation graph for `direction` (0
// forward, 1 input gradient, 2 weight gradient) in the library found as above, as a first call
// would before choosing an engine (which needs a device). "" when cuDNN accepts it, else the
// error naming the geometry and cuDNN's message; raises a kiln::Error when the library cannot
// be loaded.
std::string cudnn_check_graph(const CudnnConv& g, int direction);

struct CudnnStats {
    int64_t calls = 0;  // convolutions run (each direction counts one)
    // Execution plans made: one per direction, geometry, dtype, TF32 switch and the operands'
    // byte alignments (up to 16), on that combination's first call.
    int64_t plans = 0;
    int64_t plan_reuses = 0;  // calls that ran a plan from the cache (no planning)
};
CudnnStats cudnn_stats();

}  // namespace kiln::cuda::detail
