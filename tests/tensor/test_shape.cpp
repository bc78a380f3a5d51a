// Views share storage and show the right values; copies (contiguous, cat, cast) don't share.
// Also where() and cast, the other non-reduction KILN_OP entries.
#include <boost/test/unit_test.hpp>

#include "reference.h"

using namespace kiln_test;

namespace {

bool shares_storage(const Tensor& a, const Tensor& b) { return a.impl()->storage == b.impl()->storage; }

// out[i0, i1, ...] = x[i_dims[0], i_dims[1], ...]
Ref permute_ref(const Ref& x, const Shape& dims) {
    Shape shape;
    for (int64_t d : dims) shape.push_back(x.shape[d]);
    Ref out{shape, {}};
    Shape src_strides(x.shape.size(), 1);
    for (int64_t d = int64_t(x.shape.size()) - 2; d >= 0; --d) src_strides[d] = src_strides[d + 1] * x.shape[d + 1];
    for (int64_t i = 0; i < numel(shape); ++i) {
        auto idx = unravel(i, shape);
        int64_t flat = 0;
        for (size_t k = 0; k < dims.size(); ++k) flat += idx[k] * src_strides[dims[k]];
        out.v.push_back(x.v[flat]);
    }
    return out;
}

// Elements start, start+step, ... (< end) along `dim`.
Ref slice_ref(const Ref& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
    Ref out{x.shape, {}};
    out.shape[dim] = (end - start + step - 1) / step;
    for (int64_t i = 0; i < numel(x.shape); ++i) {
        auto idx = unravel(i, x.shape);
        int64_t j = idx[dim];
        if (j >= start && j < end && (j - start) % step == 0) out.v.push_back(x.v[i]);
    }
    return out;
}

Ref arange_ref(const Shape& shape) {
    Ref r{shape, {}};
    for (int64_t i = 0; i < numel(shape); ++i) r.v.push_back(double(i));
    return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(views)

BOOST_AUTO_TEST_CASE(reshape_infers_minus_one_and_shares_storage) {
    Ref x = arange_ref({2, 3, 4});
    Tensor base = make(x);
    for (Shape want : {Shape{6, -1}, Shape{-1}, Shape{4, 3, 2}, Shape{2, -1, 2}, Shape{1, 24, 1}}) {
        Tensor r = base.reshape(want);
        Shape expect = want;
        for (auto& d : expect) if (d == -1) d = 24 / std::abs(numel(want));
        check_equal(r, Ref{expect, x.v}, "reshape " + str(want));
        BOOST_TEST(shares_storage(r, base));
    }
    // Not expressible as a view of a transposed tensor: reshape copies, with the right values.
    Tensor t = base.transpose(1, 2);  // [2, 4, 3]
    Tensor flat = t.reshape({-1});
    check_equal(flat, Ref{{24}, permute_ref(x, {0, 2, 1}).v}, "reshape of transposed");
    BOOST_TEST(!shares_storage(flat, base));
}

BOOST_AUTO_TEST_CASE(permute_and_transpose_match_reference) {
    Ref x = random_ref({2, 3, 4}, -1, 1);
    Tensor base = make(x);
    for (Shape dims : {Shape{0, 1, 2}, Shape{2, 0, 1}, Shape{1, 2, 0}, Shape{2, 1, 0}, Shape{-1, 0, 1}}) {
        Tensor p = base.permute(dims);
        Shape pos = dims;
        for (auto& d : pos) if (d < 0) d += 3;
        check_equal(p, permute_ref(x, pos), "permute " + str(dims));
        BOOST_TEST(shares_storage(p, base));
    }
    check_equal(base.transpose(0, 2), permute_ref(x, {2, 1, 0}), "transpose(0, 2)");
    check_equal(kiln::transpose(base, -1, -2), permute_ref(x, {0, 2, 1}), "transpose(-1, -2)");
    Ref m{{2, 3}, {x.v.begin(), x.v.begin() + 6}};
    check_equal(make(m).t(), permute_ref(m, {1, 0}), "t()");
    check_equal(make(Ref{{}, {7}}).transpose(0, -1), Ref{{}, {7}}, "0-d transposes to itself");
}

BOOST_AUTO_TEST_CASE(expand_broadcasts_with_stride_zero) {
    Ref row{{1, 3}, {1, 2, 3}};
    Tensor base = make(row);
    Tensor e = base.expand({2, 4, 3});
    BOOST_TEST(e.strides() == (Shape{0, 0, 1}), boost::test_tools::per_element());
    BOOST_TEST(shares_storage(e, base));
    Ref want{{2, 4, 3}, {}};
    for (int i = 0; i < 8; ++i) want.v.insert(want.v.end(), {1, 2, 3});
    check_equal(e, want, "expand [1,3] to [2,4,3]");
    check_equal(base.expand({-1, 3}), row, "expand with -1 keeps the size");
}

BOOST_AUTO_TEST_CASE(squeeze_unsqueeze_share_storage_even_when_strided) {
    Ref x = random_ref({3, 1, 4}, -1, 1);
    Tensor base = make(x);
    check_equal(base.squeeze(1), Ref{{3, 4}, x.v}, "squeeze(1)");
    check_equal(base.squeeze(0), x, "squeeze of a dim that is not 1 is a no-op");
    check_equal(base.squeeze(), Ref{{3, 4}, x.v}, "squeeze()");
    check_equal(base.unsqueeze(0), Ref{{1, 3, 1, 4}, x.v}, "unsqueeze(0)");
    check_equal(base.unsqueeze(-1), Ref{{3, 1, 4, 1}, x.v}, "unsqueeze(-1)");
    for (const Tensor& v : {base.squeeze(1), base.squeeze(), base.unsqueeze(0), base.unsqueeze(-1)}) BOOST_TEST(shares_storage(v, base));
    // On a transposed (non-contiguous) tensor these are still views.
    Tensor t = base.squeeze(1).t();  // [4, 3]
    Ref tx = permute_ref(Ref{{3, 4}, x.v}, {1, 0});
    Tensor u = t.unsqueeze(1);
    check_equal(u, Ref{{4, 1, 3}, tx.v}, "unsqueeze of transposed");
    BOOST_TEST(shares_storage(u, base));
    BOOST_TEST(shares_storage(u.squeeze(1), base));
}

BOOST_AUTO_TEST_CASE(slice_narrow_select_are_views) {
    Ref x = random_ref({5, 6}, -1, 1);
    Tensor base = make(x);
    struct Case { int64_t dim, start, end, step; };
    for (Case c : {Case{0, 1, 4, 1}, Case{1, 0, 6, 2}, Case{1, 1, 6, 3}, Case{0, 0, 5, 4}, Case{-1, 2, 5, 1}}) {
        Tensor s = base.slice(c.dim, c.start, c.end, c.step);
        check_equal(s, slice_ref(x, c.dim < 0 ? c.dim + 2 : c.dim, c.start, c.end, c.step),
                    "slice dim " + std::to_string(c.dim) + " " + std::to_string(c.start) + ":" + std::to_string(c.end) + ":" + std::to_string(c.step));
        BOOST_TEST(shares_storage(s, base));
    }
    check_equal(base.slice(1, -3, 100), slice_ref(x, 1, 3, 6, 1), "slice with negative start, end past the size");
    check_equal(base.narrow(1, 2, 3), slice_ref(x, 1, 2, 5, 1), "narrow");
    for (int64_t i : {0, 3, -1}) {
        Ref row = slice_ref(x, 0, i < 0 ? i + 5 : i, (i < 0 ? i + 5 : i) + 1, 1);
        Ref col = slice_ref(x, 1, i < 0 ? i + 6 : i, (i < 0 ? i + 6 : i) + 1, 1);
        check_equal(base.select(0, i), Ref{{6}, row.v}, "select(0, " + std::to_string(i) + ")");
        check_equal(base.select(1, i), Ref{{5}, col.v}, "select(1, " + std::to_string(i) + ")");
        BOOST_TEST(shares_storage(base.select(0, i), base));
        BOOST_TEST(shares_storage(base.select(1, i), base));
    }
    check_equal(base[2], Ref{{6}, slice_ref(x, 0, 2, 3, 1).v}, "operator[]");
}

BOOST_AUTO_TEST_CASE(writes_through_the_base_show_in_views_and_back) {
    Tensor base = kiln::arange(12.).reshape({3, 4});
    Tensor col = base.t().select(0, 1);                // column 1: 1, 5, 9
    Tensor every_other = base.slice(1, 0, 4, 2);       // columns 0 and 2
    Tensor wide = base.select(0, 0).unsqueeze(0).expand({2, 4});
    base.copy_(kiln::arange(100., 112.).reshape({3, 4}));
    check_equal(col, Ref{{3}, {101, 105, 109}}, "column view after copy_ into base");
    check_equal(every_other, Ref{{3, 2}, {100, 102, 104, 106, 108, 110}}, "strided view after copy_ into base");
    check_equal(wide, Ref{{2, 4}, {100, 101, 102, 103, 100, 101, 102, 103}}, "expanded view after copy_ into base");
    // And the other way: writing into a strided view changes the base.
    every_other.copy_(kiln::zeros({3, 2}));
    check_equal(base, Ref{{3, 4}, {0, 101, 0, 103, 0, 105, 0, 107, 0, 109, 0, 111}}, "base after copy_ into a strided view");
}

BOOST_AUTO_TEST_CASE(contiguous_copies_only_when_needed) {
    Ref x = random_ref({3, 4}, -1, 1);
    Tensor base = make(x);
    BOOST_TEST(base.contiguous().same(base));
    Tensor t = base.t();
    BOOST_TEST(!t.is_contiguous());
    Tensor c = t.contiguous();
    BOOST_TEST(c.is_contiguous());
    BOOST_TEST(!shares_storage(c, base));
    BOOST_TEST(c.strides() == (Shape{3, 1}), boost::test_tools::per_element());
    check_equal(c, permute_ref(x, {1, 0}), "contiguous of transposed");
    Ref row{{1, 4}, {1, 2, 3, 4}};
    check_equal(make(row).expand({2, 4}).contiguous(), Ref{{2, 4}, {1, 2, 3, 4, 1, 2, 3, 4}}, "contiguous of expanded");
}

BOOST_AUTO_TEST_CASE(cat_along_each_dim) {
    Ref a = random_ref({2, 3}, -1, 1), b = random_ref({2, 3}, -1, 1), c = random_ref({1, 3}, -1, 1);
    Ref rows{{5, 3}, a.v};
    rows.v.insert(rows.v.end(), b.v.begin(), b.v.end());
    rows.v.insert(rows.v.end(), c.v.begin(), c.v.end());
    check_equal(kiln::cat({make(a), make(b, Layout::transposed), make(c)}, 0), rows, "cat dim 0");
    Ref cols{{2, 6}, {}};
    for (int r = 0; r < 2; ++r) {
        cols.v.insert(cols.v.end(), a.v.begin() + 3 * r, a.v.begin() + 3 * r + 3);
        cols.v.insert(cols.v.end(), b.v.begin() + 3 * r, b.v.begin() + 3 * r + 3);
    }
    check_equal(kiln::cat({make(a), make(b)}, 1), cols, "cat dim 1");
    check_equal(kiln::cat({make(a), make(b, Layout::strided)}, -1), cols, "cat dim -1");
    Tensor mixed = kiln::cat({make(a), make(Ref{{1, 3}, {1, 2, 3}}, kiln::int64)}, 0);
    BOOST_TEST((mixed.dtype() == kiln::float32));
    Tensor one = make(a);
    BOOST_TEST(!shares_storage(kiln::cat({one}, 0), one));
}

BOOST_AUTO_TEST_CASE(slice_backward_scatters_into_zeros) {
    Ref g{{2, 2}, {1, 2, 3, 4}};
    kiln::Attrs attrs{.shape = {2, 5}, .dim = 1, .start = 1, .end = 5, .step = 2};
    Tensor out = kiln::dispatch(kiln::OpId::slice_backward, {make(g)}, attrs);
    check_equal(out, Ref{{2, 5}, {0, 1, 0, 2, 0, 0, 3, 0, 4, 0}}, "slice_backward");
    // It is what autograd runs for slice: the gradient of a strided slice.
    Tensor x = kiln::zeros({2, 5}, {.requires_grad = true});
    (x.slice(1, 1, 5, 2) * make(g)).sum().backward();
    check_equal(x.grad(), Ref{{2, 5}, {0, 1, 0, 2, 0, 0, 3, 0, 4, 0}}, "grad of slice");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(where_and_cast)

BOOST_AUTO_TEST_CASE(where_selects_with_broadcast_and_scalars) {
    Ref c = random_ints({3, 1, 4}, 0, 1), a = random_ref({5, 4}, -1, 1), b = random_ref({3, 5, 4}, -1, 1);
    Ref want{{3, 5, 4}, {}};
    for (int64_t i = 0; i < 60; ++i) {
        auto idx = unravel(i, want.shape);
        want.v.push_back(c.v[ravel_broadcast(idx, c.shape)] != 0 ? a.v[ravel_broadcast(idx, a.shape)] : b.v[i]);
    }
    Tensor cond = make(c) != 0.0;
    check_equal(kiln::where(cond, make(a, Layout::transposed), make(b)), want, "where with broadcast");
    Ref x = random_ref({2, 3}, -1, 1);
    Tensor pos = make(x) > 0.0;
    check_equal(kiln::where(pos, make(x), 0.0), map(x, [](double v) { return v > 0 ? v : 0.0; }), "where(c, x, 0)");
    check_equal(kiln::where(pos, 1.0, make(x)), map(x, [](double v) { return v > 0 ? 1.0 : v; }), "where(c, 1, x)");
    Tensor promoted = kiln::where(pos, make(x, kiln::int64), make(x, kiln::float64));
    BOOST_TEST((promoted.dtype() == kiln::float64));
}

BOOST_AUTO_TEST_CASE(cast_converts_between_all_dtypes) {
    Ref x{{5}, {-1.7, -0.2, 0.0, 0.5, 2.9}};
    Tensor f = make(x);
    check_equal(f.to(kiln::int64), Ref{{5}, {-1, 0, 0, 0, 2}}, "float32 -> int64 truncates toward zero");
    check_equal(f.to(kiln::boolean), Ref{{5}, {1, 1, 0, 1, 1}}, "float32 -> bool is != 0");
    check_close(f.to(kiln::float64), x, 1e-7, 0, "float32 -> float64");
    BOOST_TEST((f.to(kiln::float64).dtype() == kiln::float64));
    check_equal(make(Ref{{2}, {1, 0}}, kiln::boolean).to(kiln::float32), Ref{{2}, {1, 0}}, "bool -> float32");
    check_equal(make(Ref{{2}, {-3, 1LL << 40}}, kiln::int64).to(kiln::float64), Ref{{2}, {-3, double(1LL << 40)}}, "int64 -> float64");
    check_equal(make(x, Layout::strided).to(kiln::int64), Ref{{5}, {-1, 0, 0, 0, 2}}, "cast of a strided tensor");
    BOOST_TEST(f.to(kiln::float32).same(f));  // same dtype: no op
    Tensor copy = f.clone();
    BOOST_TEST(!shares_storage(copy, f));
    check_equal(copy, Ref{{5}, f.to_vector<double>()}, "clone");
}

BOOST_AUTO_TEST_SUITE_END()
