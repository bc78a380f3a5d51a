// The view rules (tensor/view_rules.h): one case per view op of tensor/ops.def.
#include "tensor/view_rules.h"

#include "tensor/tensor.h"

namespace kiln {

ViewRule view_rule(OpId op, const Attrs& a, size_t in_rank, size_t out_rank) {
    ViewRule r;
    auto same_dims = [&] {
        r.kind = ViewRule::Kind::dims;
        for (size_t i = 0; i < in_rank; ++i) r.from.push_back(int(i));
    };
    switch (op) {
        case OpId::permute:
            r.kind = ViewRule::Kind::dims;
            for (int64_t d : a.dims)
                r.from.push_back(int(normalize_dim(d, int64_t(in_rank), "permute")));
            break;
        case OpId::expand: {  // new dims lead; the input's dims are the trailing ones
            r.kind = ViewRule::Kind::dims;
            int64_t lead = int64_t(out_rank) - int64_t(in_rank);
            for (int64_t i = 0; i < int64_t(out_rank); ++i)
                r.from.push_back(i < lead ? -1 : int(i - lead));
            break;
        }
        case OpId::slice:
            same_dims();
            if (in_rank > 0) r.sliced = int(normalize_dim(a.dim, int64_t(in_rank), "slice"));
            break;
        case OpId::contiguous:
            same_dims();
            r.copies = true;
            break;
        case OpId::reshape:
            r.kind = ViewRule::Kind::regroup;
            break;
        default:
            break;
    }
    return r;
}

}  // namespace kiln
