// The reduction table's lookups (tensor/reductions.h).
#include "tensor/reductions.h"

#include "tensor/error.h"

namespace kiln {
namespace {

const ReductionInfo kReductions[] = {
#define KILN_REDUCTION(name, combine, identity) {OpId::name, #combine, ReductionIdentity::identity},
#include "tensor/reductions.def"
};

const ReductionInfo* find(OpId op) {
    for (const ReductionInfo& r : kReductions)
        if (r.op == op) return &r;
    return nullptr;
}

}  // namespace

bool is_reduction(OpId op) { return find(op) != nullptr; }

std::vector<OpId> reduction_ops() {
    std::vector<OpId> ops;
    for (const ReductionInfo& r : kReductions) ops.push_back(r.op);
    return ops;
}

const ReductionInfo& reduction_info(OpId op) {
    const ReductionInfo* r = find(op);
    KILN_CHECK(r, op_name(op), ": not a reduction of tensor/reductions.def");
    return *r;
}

std::string reduction_identity(OpId op, DType dtype) {
    ReductionIdentity id = reduction_info(op).identity;
    switch (dtype) {
        case DType::boolean:
            return id == ReductionIdentity::highest ? "true" : "false";
        case DType::int64:
            return id == ReductionIdentity::zero     ? "0LL"
                   : id == ReductionIdentity::lowest ? "(-9223372036854775807LL - 1)"
                                                     : "9223372036854775807LL";
        case DType::float32:
        case DType::float64: {
            std::string t = dtype == DType::float32 ? "float" : "double";
            return id == ReductionIdentity::zero     ? (dtype == DType::float32 ? "0.0f" : "0.0")
                   : id == ReductionIdentity::lowest ? "(-infinity<" + t + ">())"
                                                     : "infinity<" + t + ">()";
        }
    }
    fail(op_name(op), ": no identity for dtype ", dtype_name(dtype));
}

}  // namespace kiln
