// A blas kernel and its epilogue as one step on the CPU (fuse_epilogues, docs/codegen.md):
// the GEMM runs by blocks of rows, and the generated `<epilogue>_rows` runs over each block
// right after BLAS wrote it, while it is still in L2. The generated code never calls BLAS:
// the host loops over the blocks.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "codegen/graph_runtime.h"
#include "tensor/gemm.h"
#include "tensor/parallel.h"

namespace kiln::codegen::detail {
namespace {

// Rows per block: at least 256, so BLAS, which packs the whole of b again for every call,
// keeps its speed (64-row blocks of [1024, 256] x [256, 1024] took 10.0 ms against 8.6 ms
// unblocked at 1 thread), and at least a 256 KiB output tile. KILN_EPILOGUE_ROWS overrides it.
// With b packed once (GemmPlan::packed_b) no block packs it again, and oneDNN's matmul
// primitive keeps its speed down to small parts (1024x256x256 in 128-row parts 0.854 ms, 64-row
// 0.867, whole 0.839; 1024x256x1024 3.36 / 3.34 / 3.34, docs/perf-models.md): 128 rows, so the
// epilogue reads its block from L2 and 2 threads share 8 blocks of a 1024-row GEMM (below).
// In GPT inference 64-, 128- and 256-row blocks were within 2% of each other.
int64_t block_rows(const GemmPlan& plan) {
    if (const char* env = std::getenv("KILN_EPILOGUE_ROWS"); env && std::atoi(env) > 0)
        return std::atoi(env);
    if (plan.packed_b) return 128;
    return std::max<int64_t>(256, 65536 / std::max<int64_t>(plan.N, 1));
}

// How threads share the step. Several GEMMs (a batched matmul, attention's q @ k^T per head):
// each thread takes whole blocks, runs BLAS single-threaded on them, then the epilogue
// (threading each small GEMM inside BLAS took attention scores from 0.95 to 1.9 ms at 2
// threads). One GEMM: the blocks in order, BLAS threaded inside each, then the epilogue
// spread over the block's rows. KILN_EPILOGUE_THREADS=blocks or =blas forces one order.
// One GEMM on a packed b: each thread takes whole blocks too, BLAS and epilogue, one
// sync per GEMM instead of two per block, and a thread the machine holds back (another process
// on its core) delays the step by at most one block, where a GEMM split in one part per thread
// waited for the held-back thread's whole half.
bool threads_over_blocks(const GemmPlan& plan) {
    const char* env = std::getenv("KILN_EPILOGUE_THREADS");
    if (env && std::strcmp(env, "blocks") == 0) return true;
    if (env && std::strcmp(env, "blas") == 0) return false;
    return plan.batches > 1 || plan.packed_b;
}

}  // namespace

void run_gemm_with_epilogue(const Schedule& s, int k, EpilogueRowsFn epilogue,
                            std::span<Tensor> env, const std::vector<int64_t>& symbols) {
    const LNode& mm = s.graph.nodes[size_t(s.kernels[size_t(k)].nodes[0])];
    const Kernel& e = s.kernels[size_t(k) + 1];
    Tensor operands[2] = {value_of(s, mm.inputs[0], env, symbols),
                          value_of(s, mm.inputs[1], env, symbols)};
    GemmPlan plan = plan_gemm(operands[0], operands[1]);
    for (int v : e.stores)
        env[size_t(v)] = empty(concrete(s.value(v).shape, symbols), s.value(v).dtype);
    int m = mm.out.id;
    Shape m_shape = concrete(mm.out.shape, symbols);
    if (e.in_place >= 0) {  // the epilogue overwrites each element of the GEMM output it read
        Attrs attrs;
        attrs.shape = m_shape;
        env[size_t(m)] = dispatch_eager(OpId::reshape, {&env[size_t(e.in_place)], 1}, attrs);
    } else {
        env[size_t(m)] = empty(m_shape, mm.out.dtype);
    }
    std::vector<int> args = e.args();
    std::vector<float*> buffers(args.size());
    for (size_t a = 0; a < args.size(); ++a)
        buffers[a] = static_cast<float*>(env[size_t(args[a])].raw_data());
    float* out = static_cast<float*>(env[size_t(m)].raw_data());
    int64_t rows = block_rows(plan), per_call = (plan.M + rows - 1) / rows,
            blocks = plan.batches * per_call;
    auto run_block = [&](int64_t block) {
        int64_t call = block / per_call, r0 = block % per_call * rows,
                r1 = std::min(plan.M, r0 + rows);
        gemm_rows(plan, call, r0, r1, out);
        return std::pair{call * plan.M + r0, call * plan.M + r1};
    };
    if (threads_over_blocks(plan) && num_threads() > 1 && blocks > 1 &&
        gemm_single_threaded_calls(plan)) {
        parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
            for (int64_t b = b0; b < b1; ++b) {
                auto [g0, g1] = run_block(b);
                epilogue(buffers.data(), symbols.data(), g0, g1);
            }
        });
        sync_blas_threads();
        return;
    }
    sync_blas_threads();  // BLAS on kiln's thread count, as eager matmul
    for (int64_t b = 0; b < blocks; ++b) {
        auto [g0, g1] = run_block(b);
        int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(plan.N, 1));
        parallel_for(g1 - g0, grain, [&](int64_t i0, int64_t i1) {
            epilogue(buffers.data(), symbols.data(), g0 + i0, g0 + i1);
        });
    }
}

}  // namespace kiln::codegen::detail
