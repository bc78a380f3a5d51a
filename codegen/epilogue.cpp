// fuse_epilogues: a CPU matmul's pointwise epilogue (+ bias, GELU, + residual, a mask, a
// softmax over its rows) runs over each block of GEMM rows while BLAS's output is still in
// cache, instead of as a pass of its own over the whole output (docs/codegen.md, "Matmul
// epilogues"). The pipeline's stage after schedule (codegen/pipeline.cpp).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "codegen/schedule.h"

namespace kiln::codegen {

bool epilogue_fusion_enabled() {
    const char* env = std::getenv("KILN_EPILOGUE");
    return !(env && std::strcmp(env, "0") == 0);
}

namespace {

SizeExpr numel_expr(const Shape& shape) {
    SizeExpr n{1, {}};
    for (int64_t d : shape) n = n * size_expr(d);
    return n;
}

// The buffers a kernel reads: loads of generated kernels, the operands' buffers of host ones.
std::vector<int> buffers_read(const Schedule& s, const Kernel& k) {
    if (k.kind == KernelKind::pointwise || k.kind == KernelKind::row) return k.loads;
    std::vector<int> out;
    for (int v : s.graph.nodes[k.nodes[0]].inputs) out.push_back(s.values.at(v).access.buffer);
    return out;
}

bool reads(const Schedule& s, const Kernel& k, int buffer) {
    std::vector<int> b = buffers_read(s, k);
    return std::find(b.begin(), b.end(), buffer) != b.end();
}

// Kernel e can run over blocks of the rows of GEMM output m: its loop's rows are m's rows
// (same element count, same row length; a row kernel reduces along them), and it reads m only
// element by element at the element it computes (m itself or a reshape of it, never a
// transpose or a broadcast, which would need rows of other blocks).
bool is_epilogue_of(const Schedule& s, const Kernel& e, int m) {
    const Shape& out = s.value(m).shape;
    if (e.kind != KernelKind::pointwise && e.kind != KernelKind::row) return false;
    if (out.size() < 2 || e.domain.empty() || e.domain.back() != out.back()) return false;
    if (!(numel_expr(e.domain) == numel_expr(out))) return false;
    if (e.kind == KernelKind::row && e.outer_dims != int(e.domain.size()) - 1) return false;
    for (int index : e.nodes)
        for (int v : s.graph.nodes[size_t(index)].inputs) {
            const ValueInfo& info = s.values.at(v);
            if (info.home == Home::inlined || info.home == Home::constant ||
                info.access.buffer != m)
                continue;
            bool elementwise = s.value(v).shape == e.domain &&
                               info.access.strides == contiguous_stride_exprs(e.domain) &&
                               to_cpp(info.access.offset) == "0";
            if (!elementwise) return false;
        }
    return true;
}

// Kernel `from` moves to index `to` (to > from); the kernels in between move up one.
void move_kernel_down(Schedule& s, int from, int to) {
    std::rotate(s.kernels.begin() + from, s.kernels.begin() + from + 1, s.kernels.begin() + to + 1);
    auto renumber = [&](int k) { return k == from ? to : (k > from && k <= to ? k - 1 : k); };
    for (auto& [id, v] : s.values)
        if (v.kernel >= 0) v.kernel = renumber(v.kernel);
    for (Kernel& k : s.kernels)
        if (k.epilogue_of >= 0) k.epilogue_of = renumber(k.epilogue_of);
}

// The epilogue's store that can take m's buffer: m has no reader but the epilogue and is not
// returned, and the store is an element of the loop (each element is read from m before the
// same element is written) of m's dtype.
int in_place_store(const Schedule& s, int blas, int m) {
    for (int id : s.graph.outputs)
        if (s.values.at(id).access.buffer == m) return -1;
    for (size_t k = 0; k < s.kernels.size(); ++k)
        if (int(k) != blas + 1 && reads(s, s.kernels[k], m)) return -1;
    const Kernel& e = s.kernels[size_t(blas) + 1];
    for (int v : e.stores)
        if (!s.values.at(v).per_row && s.value(v).shape == e.domain &&
            s.value(v).dtype == s.value(m).dtype)
            return v;
    return -1;
}

}  // namespace

Schedule fuse_epilogues(Schedule s) {
    if (s.graph.device.type != DeviceType::cpu || !epilogue_fusion_enabled()) return s;
    for (int k = 0; k < int(s.kernels.size()); ++k) {
        if (s.kernels[size_t(k)].kind != KernelKind::blas) continue;
        const LNode& mm = s.graph.nodes[size_t(s.kernels[size_t(k)].nodes[0])];
        int m = mm.out.id;
        // A vector operand's dim is dropped from the output: its rows are not the GEMM's.
        if (s.value(m).dtype != DType::float32 || s.value(mm.inputs[0]).shape.size() < 2 ||
            s.value(mm.inputs[1]).shape.size() < 2)
            continue;
        // The first kernel that reads m, if it is a generated one, is the candidate; moving
        // the blas kernel down to just before it is safe because no kernel in between reads m.
        int e = k + 1;
        while (e < int(s.kernels.size()) && !reads(s, s.kernels[size_t(e)], m)) ++e;
        if (e == int(s.kernels.size()) || s.kernels[size_t(e)].epilogue_of >= 0 ||
            !is_epilogue_of(s, s.kernels[size_t(e)], m))
            continue;
        bool moved = e > k + 1;
        if (moved) move_kernel_down(s, k, e - 1);
        s.kernels[size_t(e)].epilogue_of = e - 1;
        s.kernels[size_t(e)].in_place = in_place_store(s, e - 1, m);
        k = moved ? k - 1 : e;  // kernel k is another one now: look at it too
    }
    return s;
}

}  // namespace kiln::codegen
