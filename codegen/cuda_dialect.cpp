// The CUDA dialect's shared spellings (codegen/cuda_dialect.h).
#include "codegen/cuda_dialect.h"

#include "tensor/kernels.h"
#include "tensor/reductions.h"

namespace kiln::codegen::emit_detail {

// As eager CUDA converted before its kernels came from here ((T)v; bool: v != 0).
std::string CudaSpelling::convert(const std::string& x, DType to) const {
    return to == DType::boolean ? "(" + x + " != 0)"
                                : std::string("((") + cuda_c_type(to) + ")" + x + ")";
}
std::string CudaSpelling::select(const std::string& c, const std::string& a,
                                 const std::string& b) const {
    return "(" + c + " ? " + a + " : " + b + ")";
}
std::string CudaSpelling::result(const std::string& math, OpId op, DType compute) const {
    if (compute == DType::float32 || is_compare(op)) return math;
    return std::string("((") + cuda_c_type(compute) + ")(" + math + "))";
}

BlockCombine block_combine(OpId op, DType accumulator) {
    std::string combine = "block_" + std::string(op_name(op));
    switch (accumulator) {
        case DType::float64:
            return {combine, "double", "shared_f64"};
        case DType::int64:
            return {combine, "long long", "shared_i64"};
        case DType::boolean:
            return {combine, "int", "shared_i32"};
        default:
            return {combine, "float", "shared"};
    }
}

std::string shared_slots(const char* shared) {
    std::string slot = shared;
    const char* type = slot == "shared_f64"   ? "double"
                       : slot == "shared_i64" ? "long long"
                       : slot == "shared_i32" ? "int"
                                              : "float";
    return std::string("__shared__ ") + type + " " + slot + "[32];\n";
}

namespace {

const char* kBlockCombine =
    R"(template <class Combine, class T> __device__ inline T block_combine(T v, T* shared, T identity) {
    for (int o = 16; o > 0; o >>= 1) v = Combine::f(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (blockDim.x <= 32) return v;  // one warp: every lane has the value
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    __syncthreads();  // the slots' readers from the last combine are done
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < warps ? shared[lane] : identity;
    for (int o = 16; o > 0; o >>= 1) v = Combine::f(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
)";

}  // namespace

std::string cuda_block_helpers() {
    std::string out = kBlockCombine;
    for (OpId op : reduction_ops()) {
        std::string name = op_name(op);
        out += "struct Combine_" + name +
               " {\n    template <class T> __device__ static T f(T x, T y) { return " +
               kiln::reduction_combine(op) + "; }\n};\n";
        out += "template <class T> __device__ inline T identity_" + name + "();\n";
        for (DType dt : {DType::float32, DType::float64, DType::int64, DType::boolean}) {
            std::string t = block_combine(op, dt).acc;
            out += "template <> __device__ inline " + t + " identity_" + name + "<" + t +
                   ">() { return " + kiln::reduction_identity(op, dt) + "; }\n";
        }
        out += "template <class T> __device__ inline T block_" + name +
               "(T v, T* shared) { return block_combine<Combine_" + name +
               ">(v, shared, identity_" + name + "<T>()); }\n";
    }
    return out + "\n";
}

std::string grid_stride_head(const std::string& ind) {
    return ind + "const long long step = (long long)blockDim.x * gridDim.x;\n" + ind +
           "long long first = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n";
}

std::string row_loop_head(const std::string& ind, bool split) {
    std::string in = ind + "    ";
    if (!split)
        return ind + "for (long long row = blockIdx.x; row < rows; row += gridDim.x) {\n" + in +
               "const long long j_begin = 0, j_end = row_size;\n";
    return ind +
           "const long long chunk = (row_size + splits - 1) / splits;  // a block's slice of its "
           "row\n" +
           ind + "for (long long task = blockIdx.x; task < rows * splits; task += gridDim.x) {\n" +
           in + "const long long row = task / splits, slice = task % splits;\n" + in +
           "const long long j_begin = slice * chunk, j_end = min(row_size, j_begin + chunk);\n";
}

std::string row_pass_head(const std::string& ind) {
    return ind + "for (long long j = j_begin + threadIdx.x; j < j_end; j += blockDim.x) {\n";
}

}  // namespace kiln::codegen::emit_detail
