// Eager CUDA's kernel sources, the first rung of the CUDA dialect (codegen/emit_eager_cuda.h).
#include "codegen/emit_eager_cuda.h"

#include <algorithm>
#include <sstream>

#include "codegen/cuda_dialect.h"
#include "tensor/kernels.h"
#include "tensor/philox.h"
#include "tensor/reductions.h"

namespace kiln::codegen {

using namespace emit_detail;

namespace {

// Kernels are defined inside kiln_math, so exp(x) finds kiln_math's overloads first (NVRTC
// also declares a global exp(float): both would match from outside).
const char* kOpen = "namespace kiln_math {\n";
const char* kClose = "}  // namespace kiln_math\n";

const char* type(DType d) { return cuda_c_type(d); }

// Element i's offset in each array: i itself when all are contiguous, else i split into the
// geometry's indices (last dim fastest) and each array's strides summed.
std::string element_offsets(bool flat) {
    if (flat) return "        const long long o[4] = {i, i, i, i};  // contiguous arrays\n";
    return "        long long rest = i, o[4] = {0, 0, 0, 0};\n"
           "        for (int d = g.ndim - 1; d >= 0; --d) {\n"
           "            const long long c = rest % g.size[d];\n"
           "            rest /= g.size[d];\n"
           "            for (int a = 0; a < 4; ++a) o[a] += c * g.stride[a][d];\n"
           "        }\n";
}

// The window ops' geometry, laid out as tensor/kernels_cuda_index.cpp's WindowArgs.
const char* kWindowStruct =
    "struct WindowArgs { long long kh, kw, sh, sw, ph, pw, dh, dw, C, H, W, OH, OW; };\n";

// A grid-stride loop over the n elements of `out`, element `e`; opened.
std::string element_loop() {
    return grid_stride_head("    ") + "    for (long long e = first; e < n; e += step) {\n";
}

// A window kernel's struct, signature `kiln_<name>(WindowArgs a, long long n, const T* <in>,
// T* out<extra>)` and loop over `out`, opened.
std::string window_kernel_head(const char* name, const char* t, const char* in, const char* extra) {
    return std::string(kWindowStruct) + "extern \"C\" __global__ void kiln_" + name +
           "(WindowArgs a, long long n, const " + t + "* " + in + ", " + t + "* out" + extra +
           ") {\n" + element_loop();
}

}  // namespace

std::string eager_cuda_elementwise(const EagerElementwise& k) {
    KILN_CHECK(k.inputs.size() <= 3, op_name(k.op),
               ": an eager CUDA kernel reads at most 3 arrays, got ", k.inputs.size());
    // The operands in order: the arrays v1.., the double `scalar` where the op has one.
    std::vector<Operand> operands;
    if (k.scalar_pos == ScalarPos::left) operands.push_back({"scalar", DType::float64});
    for (size_t i = 0; i < k.inputs.size(); ++i)
        operands.push_back({"v" + std::to_string(i + 1), k.inputs[i]});
    if (k.scalar_pos == ScalarPos::right) operands.push_back({"scalar", DType::float64});
    std::string signature;  // add(int64, scalar): the operands' dtypes
    for (size_t i = 0; i < operands.size(); ++i)
        signature += std::string(i ? ", " : "") +
                     (operands[i].text == "scalar" ? "scalar" : dtype_name(operands[i].dtype));
    std::ostringstream src;
    src << cuda_math_prelude() << kOpen << "// kiln_elementwise: " << op_name(k.op) << "("
        << signature << ") in " << dtype_name(k.compute) << " to " << dtype_name(k.out)
        << (k.flat ? ", contiguous" : ", strided") << "\n"
        << "struct Geometry { int ndim; long long size[" << kEagerMaxDims
        << "]; long long stride[4][" << kEagerMaxDims << "]; };\n"
        << "extern \"C\" __global__ void kiln_elementwise(Geometry g, long long n, " << type(k.out)
        << "* out";
    for (size_t i = 0; i < 3; ++i)
        src << ", const " << (i < k.inputs.size() ? type(k.inputs[i]) : "char") << "* in" << i + 1;
    src << ", double scalar) {\n"
        << grid_stride_head("    ") << "    for (long long i = first; i < n; i += step) {\n"
        << element_offsets(k.flat);
    for (size_t i = 0; i < k.inputs.size(); ++i)
        src << "        const " << type(k.inputs[i]) << " v" << i + 1 << " = in" << i + 1 << "[o["
            << i + 1 << "]];\n";
    src << "        out[o[0]] = " << op_expression(CudaSpelling(), k.op, operands, k.compute)
        << ";\n";
    src << "    }\n}\n" << kClose;
    return src.str();
}

std::string eager_cuda_reduce(OpId op, DType dtype) {
    // float32 folds that add or multiply (every kind but an extremum) accumulate in double
    DType acc = dtype == DType::float32 && !reduction_picks_a_value(op) ? DType::float64 : dtype;
    BlockCombine block = block_combine(op, acc);
    CudaSpelling cuda;
    std::string t = type(dtype);
    std::ostringstream s;
    s << cuda_math_prelude() << kOpen << cuda_block_helpers() << "// kiln_reduce: " << op_name(op)
      << " of " << dtype_name(dtype) << " rows, accumulating in " << dtype_name(acc)
      << ": one block per row slice\n"
      << "extern \"C\" __global__ void kiln_reduce(const " << t << "* x, " << t
      << "* out, long long rows, long long row_size, long long splits) {\n"
      << "    " << shared_slots(block.shared) << row_loop_head("    ", true) << "        "
      << block.acc << " acc = " << reduction_identity(op, acc) << ";\n"
      << row_pass_head("        ") << "            acc = "
      << reduction_combine(
             op, "acc",
             acc == dtype ? "x[row * row_size + j]" : cuda.convert("x[row * row_size + j]", acc))
      << ";\n"
      << "        }\n"
      << "        acc = " << block.combine << "(acc, " << block.shared << ");\n"
      << "        if (threadIdx.x == 0) out[task] = "
      << (acc == dtype ? "acc" : cuda.convert("acc", dtype)) << ";\n"
      << "    }\n}\n"
      << kClose;
    return s.str();
}

std::string eager_cuda_random(OpId op, DType dtype) {
    KILN_CHECK(op_info(op).kind == OpKind::random, "eager_cuda_random: ", op_name(op),
               " is not a random op");
    const char* t = type(dtype);
    std::ostringstream src;
    src << cuda_math_prelude() << kOpen << "#define KILN_HD __device__\nnamespace kiln_random {\n"
        << kiln_random::kRandomSource << "\n}\n"
        << "// kiln_draw: " << op_name(op) << " to " << dtype_name(dtype)
        << ", element i from (seed, offset + i)\n"
        << "extern \"C\" __global__ void kiln_draw(long long n, " << t
        << "* out, unsigned long long seed,\n"
        << "        unsigned long long offset, const unsigned long long* graph_state, double lo, "
           "double hi,\n"
        << "        long long int_lo, unsigned long long range) {\n"
        << "    if (graph_state) seed = graph_state[0], offset += graph_state[1];\n"
        << grid_stride_head("    ") << "    for (long long i = first; i < n; i += step) {\n";
    if (op == OpId::randn)
        src << "        out[i] = (" << t << ")kiln_random::draw_normal(seed, offset + i);\n";
    if (op == OpId::randint)
        src << "        out[i] = (" << t
            << ")kiln_random::draw_int(seed, offset + i, int_lo, range);\n";
    if (op == OpId::rand) {  // rounded to the dtype and kept below hi, as on the CPU
        const char* next = dtype == DType::float32 ? "nextafterf" : "nextafter";
        src << "        const " << t << " r = (" << t
            << ")kiln_random::draw_uniform(seed, offset + i, lo, hi);\n"
            << "        out[i] = ((double)r >= hi && hi > lo) ? " << next << "((" << t << ")hi, ("
            << t << ")lo) : r;\n";
    }
    src << "    }\n}\n" << kClose;
    return src.str();
}

std::string eager_cuda_arange(DType dtype) {
    const char* t = type(dtype);
    std::ostringstream src;
    src << cuda_math_prelude() << kOpen << "// kiln_arange: " << dtype_name(dtype)
        << ", element i is lo + i * delta\n"
        << "extern \"C\" __global__ void kiln_arange(long long n, " << t
        << "* out, double lo, double delta) {\n"
        << grid_stride_head("    ") << "    for (long long i = first; i < n; i += step) {\n"
        << "        out[i] = (" << t << ")(lo + (double)i * delta);\n"
        << "    }\n}\n"
        << kClose;
    return src.str();
}

std::string eager_cuda_unfold2d(DType dtype) {
    const char* t = type(dtype);
    std::ostringstream s;
    s << window_kernel_head("unfold2d", t, "x", ", double pad")
      << "        long long ow = e % a.OW, oh = e / a.OW % a.OH, r = e / (a.OW * a.OH);  // r = "
         "(n, c, i, j)\n"
      << "        long long j = r % a.kw, i = r / a.kw % a.kh, nc = r / (a.kw * a.kh);\n"
      << "        long long h = oh * a.sh - a.ph + i * a.dh, w = ow * a.sw - a.pw + j * a.dw;\n"
      << "        bool inside = h >= 0 && h < a.H && w >= 0 && w < a.W;\n"
      << "        out[e] = inside ? x[(nc * a.H + h) * a.W + w] : (" << t << ")pad;\n"
      << "    }\n}\n";
    return s.str();
}

// Each pixel gathers the column entries that cover it: window offsets i, j with
// h + ph - i*dh on the stride grid.
std::string eager_cuda_fold2d(DType dtype) {
    const char* t = type(dtype);
    std::ostringstream s;
    s << window_kernel_head("fold2d", t, "cols", "")
      << "        long long w = e % a.W, h = e / a.W % a.H, nc = e / (a.W * a.H);\n"
      << "        " << t << " acc = 0;\n"
      << "        for (long long i = 0; i < a.kh; ++i) {\n"
      << "            long long oh = h + a.ph - i * a.dh;\n"
      << "            if (oh < 0 || oh % a.sh) continue;\n"
      << "            oh /= a.sh;\n"
      << "            if (oh >= a.OH) continue;\n"
      << "            for (long long j = 0; j < a.kw; ++j) {\n"
      << "                long long ow = w + a.pw - j * a.dw;\n"
      << "                if (ow < 0 || ow % a.sw) continue;\n"
      << "                ow /= a.sw;\n"
      << "                if (ow >= a.OW) continue;\n"
      << "                acc += cols[((nc * a.kh + i) * a.kw + j) * a.OH * a.OW + oh * a.OW + "
         "ow];\n"
      << "            }\n"
      << "        }\n"
      << "        out[e] = acc;\n"
      << "    }\n}\n";
    return s.str();
}

std::string eager_cuda_max_pool2d_index(DType dtype) {
    const char* t = type(dtype);
    std::ostringstream s;
    s << kWindowStruct << "extern \"C\" __global__ void kiln_max_pool2d_index(WindowArgs a, long long n, const "
      << t << "* x, long long* out) {\n"
      << element_loop()
      << "        long long ow = e % a.OW, oh = e / a.OW % a.OH, nc = e / (a.OW * a.OH);\n"
      << "        const " << t << "* plane = x + nc * a.H * a.W;\n"
      << "        long long best = -1;\n"
      << "        " << t << " best_v = 0;\n"
      << "        for (long long i = 0; i < a.kh; ++i) {\n"
      << "            long long h = oh * a.sh - a.ph + i * a.dh;\n"
      << "            if (h < 0 || h >= a.H) continue;\n"
      << "            for (long long j = 0; j < a.kw; ++j) {\n"
      << "                long long w = ow * a.sw - a.pw + j * a.dw;\n"
      << "                if (w < 0 || w >= a.W) continue;\n"
      << "                " << t << " v = plane[h * a.W + w];\n"
      << "                bool take = best < 0 || (best_v == best_v && (v > best_v || v != v));\n"
      << "                if (take) { best = h * a.W + w; best_v = v; }\n"
      << "            }\n"
      << "        }\n"
      << "        out[e] = best < 0 ? 0 : best;\n"
      << "    }\n}\n";
    return s.str();
}

std::string eager_cuda_index(DType dtype, bool scatter_add) {
    const char* t = type(dtype);
    std::ostringstream s;
    s << "extern \"C\" __global__ void kiln_" << (scatter_add ? "scatter_add" : "gather")
      << "(long long n, long long n_index, long long n_data, "
      << "long long inner, const long long* index, const " << t << "* src, " << t
      << "* out, unsigned long long* bad) {\n"
      << element_loop()
      << "        long long k = e % inner, o = e / (inner * n_index), i = index[e];\n"
      << "        if (i < 0 || i >= n_data) { if (bad) atomicCAS(bad, 0x8000000000000000ull, "
         "(unsigned long long)index[e]); continue; }\n"
      << "        const long long at = (o * n_data + i) * inner + k;\n";
    if (!scatter_add)
        s << "        out[e] = src[at];\n";
    else if (dtype == DType::int64)
        s << "        atomicAdd((unsigned long long*)&out[at], (unsigned long long)src[e]);\n";
    else
        s << "        atomicAdd(&out[at], src[e]);\n";
    s << "    }\n}\n";
    return s.str();
}

AttentionSource eager_cuda_attention(DType dtype, int64_t d, int64_t dv, int64_t queries) {
    KILN_CHECK(dtype == DType::float32 || dtype == DType::float64,
               "attention on CUDA: expected float32 or float64, got ", dtype);
    KILN_CHECK(d > 0 && dv > 0 && d <= kAttentionMaxFeatures && dv <= kAttentionMaxFeatures,
               "attention on CUDA: at most ", kAttentionMaxFeatures, " features, got q/k ", d,
               " and v ", dv);
    const char* t = type(dtype);
    const int64_t bytes = dtype == DType::float64 ? 8 : 4;
    const int64_t dvp = (dv + 7) / 8 * 8;  // V's columns padded to the 8 column groups
    // The largest tiles whose shared arrays fit 46 KB of the 48 KB of static shared memory:
    // Q [D][BM + 1], K [D][BN + 1] (whose space P [BM][BN + 1] takes after the scores), V [BN][DVP].
    KILN_CHECK(queries == 16 || queries == 32, "attention on CUDA: 16 or 32 queries a block, got ", queries);
    int64_t bm = queries, bn = 64;
    auto fits = [&] {
        return (d * (bm + 1) + std::max(d, bm) * (bn + 1) + bn * dvp) * bytes <= 46 * 1024;
    };
    while (!fits() && bn > 8) bn /= 2;
    if (!fits()) bm = 16, bn = 64;
    while (!fits() && bn > 8) bn /= 2;
    KILN_CHECK(fits(), "attention on CUDA: no tiles fit shared memory for d ", d, " and dv ", dv);
    std::ostringstream s;
    s << "#define T " << t << "\n#define D " << d << "\n#define DV " << dv << "\n#define DVP " << dvp
      << "\n#define BM " << bm << "\n#define BN " << bn
      << "\n#define EXP " << (dtype == DType::float64 ? "exp" : "expf") << "\n"
      << R"(#define TR (BM / 16)
#define TC (BN / 8)
#define OC (DVP / 8)
#define KROWS (D > BM ? D : BM)
#define QN ((BM * D + 127) / 128)
#define KN ((BN * D + 127) / 128)
#define VN ((BN * DVP + 127) / 128)
struct AttentionArgs { long long B1, L, S, tiles; long long q[4], k[4], v[4], o[4]; double scale; int causal; };
// 128 threads: 16 row groups of TR queries x 8 column groups (a column group: keys, then
// output features, cg, cg + 8, ...). The 8 threads of a row group are adjacent lanes, so a
// row's maximum and sum are three shuffles.
extern "C" __global__ void __launch_bounds__(128) kiln_attention(AttentionArgs a, const T* q, const T* k, const T* v, T* o) {
    __shared__ T qs[D][BM + 1];      // q * scale, feature-major
    __shared__ T kp[KROWS][BN + 1];  // k feature-major [D][BN], then the weights P [BM][BN]
    __shared__ T vs[BN][DVP];
    const T neg_inf = -(T)1e300 * (T)1e300;
    const int tid = threadIdx.x, rg = tid / 8, cg = tid % 8;
    const long long tile = blockIdx.x % a.tiles, b = blockIdx.x / a.tiles;
    const long long b1 = b % a.B1, b0 = b / a.B1, i0 = tile * BM;
    const T* qb = q + b0 * a.q[0] + b1 * a.q[1];
    const T* kb = k + b0 * a.k[0] + b1 * a.k[1];
    const T* vb = v + b0 * a.v[0] + b1 * a.v[1];
    // Global loads go to registers first, all issued before any is stored: a thread's loads
    // are in flight together, not one memory latency each.
    T qr[QN], kr[KN], vr[VN];
#pragma unroll
    for (int x = 0; x < QN; ++x) {
        const int e = tid + 128 * x, r = e / D, c = e % D;
        qr[x] = e < BM * D && i0 + r < a.L ? qb[(i0 + r) * a.q[2] + c * a.q[3]] : (T)0;
    }
#pragma unroll
    for (int x = 0; x < QN; ++x) {
        const int e = tid + 128 * x;
        if (e < BM * D) qs[e % D][e / D] = qr[x] * (T)a.scale;
    }
    T acc[TR][OC], m[TR], l[TR];
#pragma unroll
    for (int i = 0; i < TR; ++i) {
        m[i] = neg_inf, l[i] = 0;
#pragma unroll
        for (int c = 0; c < OC; ++c) acc[i][c] = 0;
    }
    long long last = a.S;  // keys after the block's last query are masked for all of it
    if (a.causal && i0 + BM < last) last = i0 + BM;
    // A tile's K and V, loaded into registers (the next tile's while this one's math runs).
    auto load = [&](long long j0) {
#pragma unroll
        for (int x = 0; x < KN; ++x) {
            const int e = tid + 128 * x, j = e / D, c = e % D;
            kr[x] = e < BN * D && j0 + j < a.S ? kb[(j0 + j) * a.k[2] + c * a.k[3]] : (T)0;
        }
#pragma unroll
        for (int x = 0; x < VN; ++x) {
            const int e = tid + 128 * x, j = e / DVP, c = e % DVP;
            vr[x] = e < BN * DVP && j0 + j < a.S && c < DV ? vb[(j0 + j) * a.v[2] + c * a.v[3]] : (T)0;
        }
    };
    if (last > 0) load(0);
    for (long long j0 = 0; j0 < last; j0 += BN) {
        __syncthreads();  // the previous tile's P and V are read
#pragma unroll
        for (int x = 0; x < KN; ++x) {
            const int e = tid + 128 * x;
            if (e < BN * D) kp[e % D][e / D] = kr[x];
        }
#pragma unroll
        for (int x = 0; x < VN; ++x) {
            const int e = tid + 128 * x;
            if (e < BN * DVP) vs[e / DVP][e % DVP] = vr[x];
        }
        __syncthreads();
        if (j0 + BN < last) load(j0 + BN);
        T s[TR][TC];
#pragma unroll
        for (int i = 0; i < TR; ++i)
#pragma unroll
            for (int t = 0; t < TC; ++t) s[i][t] = 0;
#pragma unroll 4
        for (int c = 0; c < D; ++c) {
            T qv[TR], kv[TC];
#pragma unroll
            for (int i = 0; i < TR; ++i) qv[i] = qs[c][rg * TR + i];
#pragma unroll
            for (int t = 0; t < TC; ++t) kv[t] = kp[c][cg + 8 * t];
#pragma unroll
            for (int i = 0; i < TR; ++i)
#pragma unroll
                for (int t = 0; t < TC; ++t) s[i][t] += qv[i] * kv[t];
        }
        __syncthreads();  // K is read: its space takes P
#pragma unroll
        for (int i = 0; i < TR; ++i) {
            const long long qi = i0 + rg * TR + i;
            T top = neg_inf;
#pragma unroll
            for (int t = 0; t < TC; ++t) {
                const long long j = j0 + cg + 8 * t;
                if (j >= a.S || (a.causal && j > qi)) s[i][t] = neg_inf;
                top = s[i][t] > top ? s[i][t] : top;
            }
#pragma unroll
            for (int x = 1; x < 8; x <<= 1) {
                const T other = __shfl_xor_sync(0xffffffffu, top, x);
                top = other > top ? other : top;
            }
            const T m_new = top > m[i] ? top : m[i];
            T sum = 0;
#pragma unroll
            for (int t = 0; t < TC; ++t) {
                const T p = m_new == neg_inf ? (T)0 : EXP(s[i][t] - m_new);
                kp[rg * TR + i][cg + 8 * t] = p;
                sum += p;
            }
#pragma unroll
            for (int x = 1; x < 8; x <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, x);
            const T correction = m_new == neg_inf ? (T)1 : EXP(m[i] - m_new);
            l[i] = l[i] * correction + sum;
            m[i] = m_new;
#pragma unroll
            for (int c = 0; c < OC; ++c) acc[i][c] *= correction;
        }
        __syncthreads();  // P is written
#pragma unroll 4
        for (int j = 0; j < BN; ++j) {
            T pv[TR];
#pragma unroll
            for (int i = 0; i < TR; ++i) pv[i] = kp[rg * TR + i][j];
#pragma unroll
            for (int c = 0; c < OC; ++c) {
                const T vv = vs[j][cg + 8 * c];
#pragma unroll
                for (int i = 0; i < TR; ++i) acc[i][c] += pv[i] * vv;
            }
        }
    }
#pragma unroll
    for (int i = 0; i < TR; ++i) {
        const long long qi = i0 + rg * TR + i;
        if (qi >= a.L) continue;
        T* ob = o + b0 * a.o[0] + b1 * a.o[1] + qi * a.o[2];
#pragma unroll
        for (int c = 0; c < OC; ++c)
            if (cg + 8 * c < DV) ob[(cg + 8 * c) * a.o[3]] = l[i] > 0 ? acc[i][c] / l[i] : (T)0;
    }
}
)";
    return {s.str(), bm};
}

}  // namespace kiln::codegen
