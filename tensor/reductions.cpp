// The reduction table's lookups (tensor/reductions.h).
#include "tensor/reductions.h"

#include "tensor/error.h"

namespace kiln {
namespace {

const ReductionInfo kReductions[] = {
#define KILN_REDUCTION(name, combine, identity, kind) \
    {OpId::name, #combine, ReductionIdentity::identity, ReductionKind::kind},
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
            return id == ReductionIdentity::highest || id == ReductionIdentity::one ? "true"
                                                                                    : "false";
        case DType::int64:
            switch (id) {
                case ReductionIdentity::zero:
                    return "0LL";
                case ReductionIdentity::one:
                    return "1LL";
                case ReductionIdentity::lowest:
                    return "(-9223372036854775807LL - 1)";
                case ReductionIdentity::highest:
                    return "9223372036854775807LL";
            }
            break;
        case DType::float32:
        case DType::float64: {
            bool f32 = dtype == DType::float32;
            std::string t = f32 ? "float" : "double";
            switch (id) {
                case ReductionIdentity::zero:
                    return f32 ? "0.0f" : "0.0";
                case ReductionIdentity::one:
                    return f32 ? "1.0f" : "1.0";
                case ReductionIdentity::lowest:
                    return "(-infinity<" + t + ">())";
                case ReductionIdentity::highest:
                    return "infinity<" + t + ">()";
            }
            break;
        }
    }
    fail(op_name(op), ": no identity for dtype ", dtype_name(dtype));
}

}  // namespace kiln
