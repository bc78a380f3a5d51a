// The C++ (SIMD) dialect's kernel writer, private to codegen/: one class, its methods in two
// files. emit_cpp.cpp: the loops, passes, tiles and entry points; emit_cpp_rows.cpp: few
// long rows split over the threads, and scratch rows that keep a value between passes.
#pragma once
#include <cstdint>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "codegen/emit_core.h"

namespace kiln::codegen::emit_detail {

class CppKernelEmitter : KernelEmitterCore {
   public:
    CppKernelEmitter(const Schedule& s, int index, std::ostream& os)
        : KernelEmitterCore(s, index, 0, os) {}

    void emit();
    void emit_epilogue_rows(const std::string& name);

   private:
    bool flat_ = false;    // no rows: [begin, end) are element indices
    bool vector_ = true;   // float lanes: every element load constant or contiguous, every value
                           // float32 or bool
    bool float32_ = true;  // every value float32 or bool (else the loops are scalar)
    // Strided rows whose last row dim is contiguous (a column sum, a bias gradient): tiles of
    // up to kTile consecutive rows at once, lanes across rows, accumulators in arrays.
    bool tile_ = false;
    static constexpr int kTile = 128;
    // The fewest rows a thread takes: batch norm's 64 channels over NHWC are one tile, and
    // with kTile as the grain one thread walked them all at 2 threads.
    static constexpr int kTileGrain = 16;
    // A pass's vector accumulators per reduction: kAccumulators batches a step, each adding
    // into its own, so the adds (or NaN-propagating maxima) overlap instead of each waiting
    // for the one before; combined in a fixed order after the pass.
    static constexpr int kAccumulators = 4;  // the fold after a pass combines 0, 1 and 2, 3
    // Few long rows (fewer than kSplitRows, of kSplitRowSize elements or more; a full
    // reduction is one row): each pass along a row runs as chunks of kSplitChunk elements (a
    // multiple of W) over the threads (emit_split_rows). Shapes alone decide it, so results
    // do not depend on the thread count.
    static constexpr int64_t kSplitRows = 8, kSplitRowSize = 65536, kSplitChunk = 8192;
    bool split_ = false;
    bool chunked_ = false;  // emitting a pass over one chunk of a row

    // ---- the loops (emit_cpp.cpp)

    std::string describe() const;
    void emit_symbols(const char* indent, const char* from);
    void emit_row_indices(const std::string& indent);
    void choose_loop();
    std::string load_text(int v, const LoadPlan& p, bool vec) const;
    void emit_pass(const std::string& ind, const std::vector<int>& reductions,
                   const std::vector<int>& stores, const std::string& from, const std::string& to);
    void emit_arguments();
    void emit_row_body(const std::string& ind, const std::string& from, const std::string& to);

    // ---- what the core asks of this dialect (emit_cpp.cpp)

    const char* type(DType d) const override;
    const char* index_type() const override;
    std::string special_literal(double value, DType d) const override;
    std::string int64_literal(double value) const override;
    std::string reduction_identity(OpId op, DType d) const override;
    std::string operand(int v, bool lanes) const override;
    std::string scalar_operand(const std::string& literal, bool lanes) const override;
    std::string convert(const std::string& x, DType to) const override;
    std::string select(const std::string& c, const std::string& a,
                       const std::string& b) const override;
    static bool int_math(OpId op, DType compute);
    void prepare_operands(std::vector<std::string>& xs, OpId op, DType compute) const override;
    std::string result(const std::string& math, OpId op, DType compute) const override;
    std::string declare(int, bool per_row_value) const override;
    void emit_load(const std::string& ind, int v, const LoadPlan& p, bool vec) override;
    void emit_reduction_update(const std::string& ind, int r, bool vec) override;
    void emit_store(const std::string& ind, int v, bool vec) override;

    // ---- tiles of rows (emit_cpp.cpp)

    bool tile_fits() const;
    void emit_tile_rows();

    // ---- few long rows, a full reduction being one (emit_cpp_rows.cpp)

    bool split_fits() const;
    size_t split_partials() const;
    void emit_split_rows(const std::string& name);

    // ---- scratch rows: an element value a later pass would compute again (emit_cpp_rows.cpp)

    // A row of at most kScratchRow elements (known at compile time) whose passes compute the
    // same element value twice, and that value's math calls a function (exp, tanh, ...: not
    // an operator): the first pass keeps it in a row of the thread's stack (L1) and the later
    // one reads it back, so softmax's store pass reads exp(x - max) instead of evaluating it.
    static constexpr int64_t kScratchRow = 4096;
    std::set<int> scratch_;        // nodes kept in scratch rows
    std::set<int> scratch_ready_;  // ... already stored by an emitted pass

    SizeExpr row_size_expr() const;
    std::vector<int> closure_until(const std::vector<int>& targets,
                                   const std::set<int>& stop) const;
    void plan_scratch_rows();
    std::vector<int> scratch_body(const std::vector<int>& reductions,
                                  const std::vector<int>& stores) const;
    void emit_scratch_loads(const std::string& ind, const std::vector<int>& body,
                            const std::vector<int>& reductions, const std::vector<int>& stores,
                            bool vec);
    void emit_scratch_stores(const std::string& ind, const std::vector<int>& body, bool vec);
};

}  // namespace kiln::codegen::emit_detail
