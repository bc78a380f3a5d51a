// gather, scatter_add, index_select and embedding: against direct loops, negative indices (out of
// range, as PyTorch), PyTorch's errors, and compiled equal to eager with gradients.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>

#include "kiln.h"
#include "tensor/kernels.h"
#include "tensor/parallel.h"

using namespace kiln;

namespace {
Tensor ints(std::vector<int64_t> v, Shape s) { return tensor(v, s); }
}  // namespace

BOOST_AUTO_TEST_SUITE(indexing)

BOOST_AUTO_TEST_CASE(gather_and_scatter_add_follow_the_index_along_a_dim) {
    Tensor x = arange(12).reshape({3, 4}).to(float32);
    Tensor g = gather(x, 1, ints({3, 0, 1, 1, 3, 0}, {3, 2}));
    BOOST_TEST(g.to_vector<float>() == (std::vector<float>{3, 0, 5, 5, 11, 8}));
    Tensor g0 = gather(x, 0, ints({2, 0, 1, 2}, {1, 4}));
    BOOST_TEST(g0.to_vector<float>() == (std::vector<float>{8, 1, 6, 11}));
    Tensor s = scatter_add(zeros({3, 2}), 0, ints({0, 1, 0, 1, 2, 2, 0, 0}, {4, 2}), ones({4, 2}));
    BOOST_TEST(s.to_vector<float>() == (std::vector<float>{3, 1, 0, 2, 1, 1}));  // repeated indices add up
    BOOST_TEST(scatter_add(x, 1, ints({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {3, 4}), x).to_vector<float>()[0] == 0 + 0 + 1 + 2 + 3);
    Tensor xi = arange(6).reshape({2, 3}).to(int64);
    BOOST_TEST(gather(xi, 1, ints({2, 1, 0, 0}, {2, 2})).dtype() == DType::int64);  // any dtype
}

BOOST_AUTO_TEST_CASE(index_select_and_embedding_take_whole_slices) {
    Tensor w = arange(15).reshape({5, 3}).to(float32);
    Tensor rows = index_select(w, 0, ints({4, 0, 4}, {3}));
    BOOST_TEST(rows.shape() == (Shape{3, 3}));
    BOOST_TEST(rows.to_vector<float>() == (std::vector<float>{12, 13, 14, 0, 1, 2, 12, 13, 14}));
    Tensor cols = index_select(w, 1, ints({2, 0}, {2}));
    BOOST_TEST(cols.shape() == (Shape{5, 2}));
    BOOST_TEST(cols.to_vector<float>()[0] == 2);
    Tensor e = embedding(ints({1, 2, 4, 1}, {2, 2}), w);
    BOOST_TEST(e.shape() == (Shape{2, 2, 3}));
    BOOST_TEST(e.to_vector<float>()[6] == 12);
}

BOOST_AUTO_TEST_CASE(bad_indices_raise_naming_the_op_and_the_values) {
    Tensor x = randn({3, 4});
    auto raises = [](auto&& f, const std::string& want) {
        try {
            f();
            BOOST_ERROR("no error, expected one saying: " << want);
        } catch (const Error& e) {
            BOOST_TEST(std::string(e.what()).find(want) != std::string::npos, e.what());
        }
    };
    raises([&] { gather(x, 1, ints({4, 0, 0, 0, 0, 0}, {3, 2})); }, "gather: index 4 is out of bounds for dim 1 with size 4");
    raises([&] { gather(x, 1, ints({-5, 0, 0, 0, 0, 0}, {3, 2})); }, "index -5 is out of bounds");
    raises(
        [&] {
            gather(x, 1, ints({-1, 0, 0, 0, 0, 0}, {3, 2}));
        },
        "gather: index -1 is out of bounds for dim 1 with size 4");
    // kIndexInRange (max_pool2d's gather: its index is in range by construction) only lets
    // the CUDA kernels skip their check; on the CPU a bad index still raises.
    raises(
        [&] {
            dispatch(OpId::gather, {x, ints({4, 0, 0, 0, 0, 0}, {3, 2})},
                     {.dim = 1, .scalar = kIndexInRange});
        },
        "gather: index 4 is out of bounds for dim 1 with size 4");
    raises([&] { gather(x, 1, zeros({3, 2})); }, "expected an int64 index");
    raises([&] { gather(x, 1, ints({0, 0}, {2})); }, "must have the same number of dims");
    raises([&] { gather(x, 1, ints({0, 0, 0, 0}, {2, 2})); }, "must match input");
    raises([&] { gather(x, 2, ints({0, 0, 0}, {3, 1})); }, "out of range");
    raises([&] { scatter_add(x, 0, ints({0, 0, 0, 0}, {1, 4}), ones({2, 4})); }, "src [2, 4] must have the index's shape [1, 4]");
    raises(
        [&] {
            embedding(ints({5}, {1}), x.t().contiguous().reshape({4, 3}));
        },
        "embedding: index 5 is out of range for 4 embeddings");
    raises([&] { index_select(x, 0, ints({0, 1}, {1, 2})); }, "index should have 1 dim");
}

BOOST_AUTO_TEST_CASE(an_embedding_model_compiles_equal_to_eager_with_gradients) {
    manual_seed(21);
    Tensor table = (randn({10, 4}) * 0.5).requires_grad_();
    Tensor head = randn({4, 3}).requires_grad_();
    auto loss_fn = [&](const Tensor& tokens, const Tensor& target) {
        Tensor h = embedding(tokens, table).mean({1});  // [B, 4]
        return nn::functional::cross_entropy(matmul(h, head), target);
    };
    auto compiled = compile(loss_fn);
    Tensor tokens = ints({1, 3, 3, 9, 0, 2, 7, 7, 7}, {3, 3}), target = ints({2, 0, 1}, {3});
    table.zero_grad(), head.zero_grad();
    Tensor l = loss_fn(tokens, target);
    l.backward();
    Tensor g_table = table.grad().clone(), g_head = head.grad().clone();
    table.zero_grad(), head.zero_grad();
    Tensor lc = compiled(tokens, target);
    lc.backward();
    BOOST_TEST(std::abs(l.item<float>() - lc.item<float>()) < 1e-5);
    BOOST_TEST(allclose(table.grad(), g_table, 1e-5, 1e-6));
    BOOST_TEST(allclose(head.grad(), g_head, 1e-5, 1e-6));
    BOOST_TEST(g_table.slice(0, 4, 5).abs().sum().item<float>() == 0);  // row 4 never looked up
    BOOST_TEST(g_table.slice(0, 7, 8).abs().sum().item<float>() > 0);
}

// Issue 30 item 9: a negative index counted from the end (gather wrapped it). PyTorch's
// embedding raises IndexError; so does kiln's eager call (kiln::IndexError, naming embedding
// and the index), and a compiled one raises from gather, naming the index, under every
// backend and after a valid call, as torch.compile's kernels raise.
BOOST_AUTO_TEST_CASE(embedding_out_of_range_raises_eager_and_compiled) {
    Tensor table = randn({10, 4});
    auto look_up = [&](const Tensor& index) { return embedding(index, table) * 2; };
    for (int64_t bad : {-1, -10, 10, 11}) {
        Tensor index = ints({3, bad, 0}, {3});
        BOOST_TEST_CONTEXT("index " << bad) {
            try {
                look_up(index);
                BOOST_ERROR("eager: no error");
            } catch (const IndexError& e) {
                BOOST_TEST(std::string(e.what()).find("embedding: index " + std::to_string(bad) +
                                                      " is out of range for 10 embeddings") !=
                               std::string::npos,
                           e.what());
            }
            for (const char* backend : {"eager", "aot_eager", "inductor"}) {
                jit::reset();
                auto compiled = compile(look_up, {.backend = backend});
                BOOST_TEST(allclose(compiled(ints({3, 9, 0}, {3})), look_up(ints({3, 9, 0}, {3}))));
                try {
                    compiled(index);
                    BOOST_ERROR(backend << ": no error");
                } catch (const Error& e) {
                    BOOST_TEST(std::string(e.what()).find(
                                   "index " + std::to_string(bad) +
                                   " is out of bounds for dim 0 with size 10") != std::string::npos,
                               backend << ": " << e.what());
                }
            }
        }
    }
}

// gather and scatter_add split their rows over kiln's threads (tensor/kernels_index.cpp):
// sizes of many blocks, along each dim, equal direct loops (scatter_add's repeated indices
// within a row add up in any split), and of several bad indices, in different blocks, the
// error names the first.
BOOST_AUTO_TEST_CASE(gather_and_scatter_add_over_threads_equal_direct_loops) {
    set_num_threads(2);
    manual_seed(44);
    Shape shape{6, 300, 40};
    Tensor x = randn(shape);
    std::vector<float> xv = x.to_vector<float>();
    for (int64_t dim = 0; dim < 3; ++dim) {
        Shape ishape = shape;
        ishape[size_t(dim)] = 2 * shape[size_t(dim)];  // repeated indices: scatter_add collides
        Tensor index = randint(0, shape[size_t(dim)], ishape);
        Tensor src = randn(ishape);
        std::vector<int64_t> iv = index.to_vector<int64_t>();
        std::vector<float> sv = src.to_vector<float>();
        std::vector<float> want_g(iv.size()), want_s = xv;
        for (int64_t a = 0; a < ishape[0]; ++a)
            for (int64_t b = 0; b < ishape[1]; ++b)
                for (int64_t c = 0; c < ishape[2]; ++c) {
                    int64_t at = (a * ishape[1] + b) * ishape[2] + c;
                    int64_t pos[3] = {a, b, c};
                    pos[dim] = iv[size_t(at)];
                    int64_t from = (pos[0] * shape[1] + pos[1]) * shape[2] + pos[2];
                    want_g[size_t(at)] = xv[size_t(from)];
                    want_s[size_t(from)] += sv[size_t(at)];
                }
        BOOST_TEST(gather(x, dim, index).to_vector<float>() == want_g, "dim " << dim);
        std::vector<float> got_s = scatter_add(x, dim, index, src).to_vector<float>();
        float worst = 0;  // the order of additions differs from the loop's
        for (size_t i = 0; i < got_s.size(); ++i)
            worst = std::max(worst, std::abs(got_s[i] - want_s[i]));
        BOOST_TEST(worst < 1e-4f, "dim " << dim);
    }
    std::vector<int64_t> iv(size_t(6 * 300 * 40), 0);
    iv[iv.size() - 1] = -1;   // the last block
    iv[iv.size() / 3] = 301;  // an earlier one: named
    iv[iv.size() / 2] = 999;
    Tensor index = tensor(iv, {6, 300, 40});
    const std::string want = "index 301 is out of bounds for dim 1 with size 300";
    for (bool scatter : {false, true}) {
        try {
            scatter ? scatter_add(x, 1, index, randn({6, 300, 40})) : gather(x, 1, index);
            BOOST_ERROR("no error for out-of-range indices");
        } catch (const Error& e) {
            BOOST_TEST(std::string(e.what()).find(want) != std::string::npos, e.what());
        }
    }
    set_num_threads(0);
}

// An index that repeats one value along the dims after `dim` (stride 0 there: embedding's
// and index_select's expanded [N, 1]) takes gather's row path (kernels_index.cpp,
// gather_rows): its values equal direct loops over the materialized index, in each dim of a
// 3-D input with more than one outer row, at 1 and 2 threads, for float32, int64 and bool; a
// bad index among the rows raises naming the lowest row's value, as the general path does.
BOOST_AUTO_TEST_CASE(gather_of_an_index_expanded_along_the_inner_dims_copies_rows) {
    manual_seed(45);
    Shape shape{3, 200, 40};
    Tensor x = randn(shape);
    for (int threads : {1, 2}) {
        set_num_threads(threads);
        for (int64_t dim = 0; dim < 2; ++dim) {  // dim 2 has no inner dims: the general path
            Shape ishape = shape, one = shape;
            ishape[size_t(dim)] = 150;
            for (size_t d = size_t(dim) + 1; d < one.size(); ++d) one[d] = 1;
            one[size_t(dim)] = 150;
            Tensor index = randint(0, shape[size_t(dim)], one).expand(ishape);
            BOOST_TEST(index.strides()[2] == 0);
            Tensor dense = index.contiguous();  // the same values, the general path
            for (DType dt : {DType::float32, DType::int64, DType::boolean}) {
                Tensor xd = dt == DType::boolean ? x > 0.0 : x.to(dt);
                Tensor got = gather(xd, dim, index), want = gather(xd, dim, dense);
                BOOST_TEST(got.shape() == ishape);
                BOOST_TEST(equal(got, want),
                           "dim " << dim << ", " << dt << ", " << threads << " threads");
            }
        }
        // Out of range in two rows of different ranges at 2 threads (3000 rows): the lower
        // row's value is named, whichever thread finds its bad row first.
        Tensor wide = randn({3, 1000, 40});
        std::vector<int64_t> iv(3000, 0);
        iv[1000] = -1;
        iv[999] = 1001;
        Tensor bad = tensor(iv, {3, 1000, 1}).expand({3, 1000, 40});
        try {
            gather(wide, 1, bad);
            BOOST_ERROR("no error for out-of-range indices");
        } catch (const Error& e) {
            std::string what = e.what();
            BOOST_TEST(what.find("gather: index 1001 is out of bounds for dim 1 with size 1000") !=
                           std::string::npos,
                       what);
        }
    }
    Tensor w = arange(15).reshape({5, 3}).to(float32);  // embedding's own call
    BOOST_TEST(embedding(ints({4, 0, 4}, {3}), w).to_vector<float>() ==
               (std::vector<float>{12, 13, 14, 0, 1, 2, 12, 13, 14}));
    set_num_threads(0);
}

BOOST_AUTO_TEST_SUITE_END()
