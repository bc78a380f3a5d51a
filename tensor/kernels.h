// Internal to tensor/: kernel entry points named by the op table, and helpers they share.
#pragma once
#include "tensor/ops.h"

namespace kiln {

// forward_<name> / backward_<name> for every KILN_OP entry (defined in kernels_*.cpp).
#define KILN_OP(name, ...)                                                 \
    Tensor forward_##name(std::span<const Tensor> in, const Attrs& attrs); \
    std::vector<Tensor> backward_##name(const BackwardArgs& b);
#include "tensor/ops.def"

// Visits `fn` with a value of the C++ type matching `dtype` (float, double, int64_t, bool).
template <class Fn>
decltype(auto) visit_dtype(DType dtype, Fn&& fn) {
    switch (dtype) {
        case DType::float32:
            return fn(float{});
        case DType::float64:
            return fn(double{});
        case DType::int64:
            return fn(int64_t{});
        case DType::boolean:
            return fn(bool{});
    }
    fail("visit_dtype: bad dtype");
}

// Output dtype of a pointwise op over inputs of dtype `in` (`ints`: the op keeps int64).
DType pointwise_result_dtype(DType in, bool ints);
// The dtype a binary pointwise op computes in, from its operands' dtypes alone (the code
// generators read it too): tensor-tensor, or a tensor with a scalar operand's value.
// Comparisons compute with `ints` true and return bool.
DType binary_result_dtype(DType x, DType y, bool ints);
DType scalar_result_dtype(DType t, double scalar, bool ints);
// Shape and loop dtype of a binary pointwise op (tensor-tensor or tensor-scalar).
struct BinaryPlan {
    Shape shape;
    DType dtype;
};
BinaryPlan plan_binary(std::span<const Tensor> in, const Attrs& a, bool ints, const char* op);

// A reduction's shapes: which dims are reduced, and the kept/reduced element counts.
struct ReducePlan {
    Shape kept_shape;  // output shape with keepdim
    Shape out_shape;   // output shape as requested
    std::vector<bool> reduced;
    int64_t outer = 1, inner = 1;  // kept elements, reduced elements
};
ReducePlan plan_reduce(const Tensor& x, const Attrs& a, const char* op);

// The CUDA eager path (kernels_cuda.cpp): an op whose inputs live on a CUDA device, and
// strided_copy when either side does.
Tensor cuda_forward(OpId op, std::span<const Tensor> inputs, const Attrs& attrs);
void cuda_strided_copy(const Tensor& dst, const Tensor& src);
// A tensor of `value` made on the device (full/zeros/ones and *_like of CUDA tensors: no
// host buffer, no copy).
Tensor cuda_full(const Shape& shape, double value, DType dtype, Device device);
// The window and index ops on the device (kernels_cuda_index.cpp); the CPU files check the
// arguments and work out the sizes for both devices.
struct IndexSizes {
    int64_t dim = 0, outer = 1, inner = 1, n_index = 1,
            n_data = 1;     // index[outer, n_index, inner] over data[outer, n_data, inner]
    bool in_range = false;  // attrs.scalar == kIndexInRange: the CUDA kernels skip the bounds check
};
// gather's and scatter_add's attrs.scalar when kiln made the index in range itself
// (max_pool2d_index's windows): CUDA then skips the check and its copy to the host.
inline constexpr double kIndexInRange = 1;
// Appended to gather's and scatter_add's out-of-range errors: under compile() the error comes
// from these ops even where the user called index_select, embedding or a class loss.
inline constexpr const char* kIndexUsers =
    " (index_select, embedding and the class losses index through gather and scatter_add)";
Tensor cuda_unfold2d(const Tensor& x, const Shape& window, int64_t OH, int64_t OW, double pad);
Tensor cuda_max_pool2d_index(const Tensor& x, const Shape& window, int64_t OH, int64_t OW);
// attention on the device (kernels_cuda_attention.cpp): q [B0, B1, L, d], k [B0, B1, S, d], v
// [B0, B1, S, dv], any strides (0 where broadcast), into `out` ([B0, B1, L, dv] through its
// strides, any layout).
void cuda_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, double scale, bool causal);
// Its kernel's source for a dtype and feature counts, and the queries each block takes
// (kernels_cuda.cpp, from the CUDA dialect's first rung).
std::pair<std::string, int64_t> cuda_attention_source(DType dtype, int64_t d, int64_t dv);
Tensor cuda_fold2d(const Tensor& cols, const Shape& window, int64_t C, int64_t H, int64_t W,
                   int64_t OH, int64_t OW);
Tensor cuda_gather(const Tensor& x, const Tensor& index, const IndexSizes& sizes);
Tensor cuda_scatter_add(const Tensor& base, const Tensor& index, const Tensor& src, const IndexSizes& sizes);
// Their kernels' sources, labelled "gather float32" ... (kernels_cuda.cpp, from the CUDA
// dialect's first rung), and arange's ("arange int64" ...): what kernels_cuda_index.cpp and
// cuda_forward launch, and compile-only tests read.
std::vector<std::pair<std::string, std::string>> cuda_index_kernel_sources();
// rand/randn/randint drawn on the device with the CPU's Philox draws (tensor/philox.h).
Tensor cuda_random(OpId op, const Attrs& attrs);
// randint's count of values in [low, high) (0: all 2^64), shared by the CUDA draw.
uint64_t randint_range(const Attrs& attrs);
// full's check that `v` fits `t` (kernels_factory.cpp), shared by the CUDA fill.
void check_fits(double v, DType t, const char* op);
// arange's checks of attrs.lo, hi and scalar (the step) and its element count, shared by
// the CUDA fill.
int64_t arange_count(const Attrs& attrs);
// The vocabulary of ops.def's math for CUDA C++ (exp, maximum, sign, infinity<T>() ... for
// float, double and int64 in namespace kiln_math): the eager kernels and codegen's CUDA
// emitter both start their sources with it.
const char* cuda_math_prelude();
const char* cuda_c_type(DType d);  // float, double, long long, bool
// Every eager CUDA kernel's source with a label (each pointwise op per dtype and operand form,
// casts, where, reductions): compile-only tests build them with NVRTC, which needs no GPU.
std::vector<std::pair<std::string, std::string>> cuda_eager_kernel_sources();

// The output size of a sliding window along one dim (conv2d, pooling, unfold2d, fold2d):
// PyTorch's floor((in + 2*pad - dilation*(k-1) - 1) / stride) + 1. The numerator is negative
// when the dilated kernel is wider than the padded input, and C++'s `/` truncates toward 0
// there (-1 / 2 + 1 = 1, a window read from outside the input): the division floors, so such
// a window gives a size <= 0 that the callers reject.
inline int64_t window_out_size(int64_t in, int64_t k, int64_t stride, int64_t pad,
                               int64_t dilation) {
    int64_t span = in + 2 * pad - dilation * (k - 1) - 1;
    int64_t steps = span >= 0 ? span / stride : -((-span + stride - 1) / stride);
    return steps + 1;
}

// Raises PyTorch's "Kernel size can't be greater than actual input size" when a conv2d's
// dilated kernel is wider than its padded [H, W] input (tensor/composites_conv.cpp).
void check_conv_fits(int64_t H, int64_t W, const Shape& window);

// conv2d as im2col + GEMM (tensor/composites_conv.cpp): the reference the conv2d op's kernel
// runs where oneDNN and cuDNN do not (CPU float64, a build without oneDNN, KILN_CONV=im2col;
// CUDA without cuDNN or with KILN_CUDNN=0).
Tensor conv2d_im2col(const Tensor& x, const Tensor& weight, const Tensor& bias,
                     std::pair<int64_t, int64_t> stride, std::pair<int64_t, int64_t> padding,
                     std::pair<int64_t, int64_t> dilation, int64_t groups);

// conv2d, conv2d_input_grad and conv2d_weight_grad on CUDA through cuDNN
// (tensor/kernels_conv_cudnn.cpp), with the table ops' inputs and attrs; an undefined tensor
// when cuDNN does not take them (off, not loaded, mixed dtypes, empty), and the caller runs
// im2col + GEMM.
Tensor cudnn_conv2d(std::span<const Tensor> in, const Attrs& attrs);
Tensor cudnn_conv2d_input_grad(std::span<const Tensor> in, const Attrs& attrs);
Tensor cudnn_conv2d_weight_grad(std::span<const Tensor> in, const Attrs& attrs);

// Copies any strided (or broadcast, stride-0) view into a new contiguous tensor.
Tensor materialize(const Tensor& x);
// Strided copy from `src` into `dst` (same shape; any strides, dtypes may differ).
void strided_copy(const Tensor& dst, const Tensor& src);
// `x` as a contiguous tensor of `dtype` (no copy when already so).
Tensor contiguous_as(const Tensor& x, DType dtype);

template <class T>
T* ptr(const Tensor& t) {
    return static_cast<T*>(t.raw_data());
}

}  // namespace kiln
