// Bad input raises kiln::Error whose message names the op and the offending values
// (docs/architecture.md), and leaves the input tensors as they were.
#include <boost/test/unit_test.hpp>

#include <functional>

#include "kiln.h"

using kiln::Shape;
using kiln::Tensor;

namespace {

// What a tensor looks like from outside: enough to tell that an error left it alone.
struct Snapshot {
    Shape shape, strides;
    int64_t offset;
    kiln::DType dtype;
    bool requires_grad;
    uint64_t version;
    std::vector<double> values;
    explicit Snapshot(const Tensor& t)
        : shape(t.shape()), strides(t.strides()), offset(t.offset()), dtype(t.dtype()), requires_grad(t.requires_grad()),
          version(t.impl()->storage->version), values(t.detach().to_vector<double>()) {}
    bool operator==(const Snapshot& o) const {
        // NaN-free inputs in these tests, so plain == on values is fine.
        return shape == o.shape && strides == o.strides && offset == o.offset && dtype == o.dtype &&
               requires_grad == o.requires_grad && version == o.version && values == o.values;
    }
};

// Runs `call`, which must throw kiln::Error mentioning every one of `parts`; then checks that
// `inputs` are unchanged.
void expect_error(const std::string& what, const std::function<void()>& call, const std::vector<std::string>& parts,
                  const std::vector<Tensor>& inputs = {}) {
    BOOST_TEST_CONTEXT(what) {
        std::vector<Snapshot> before;
        for (const Tensor& t : inputs) before.emplace_back(t);
        auto mentions_all = [&](const kiln::Error& e) {
            std::string msg = e.what();
            bool ok = true;
            for (const std::string& p : parts)
                if (msg.find(p) == std::string::npos) {
                    BOOST_TEST_MESSAGE("message '" << msg << "' lacks '" << p << "'");
                    ok = false;
                }
            return ok;
        };
        BOOST_CHECK_EXCEPTION(call(), kiln::Error, mentions_all);
        for (size_t i = 0; i < inputs.size(); ++i) BOOST_TEST((Snapshot(inputs[i]) == before[i]), "input " << i << " changed");
    }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(errors)

BOOST_AUTO_TEST_CASE(broadcast_mismatch_names_op_and_both_shapes) {
    Tensor a = kiln::ones({2, 3}), b = kiln::ones({4});
    expect_error("add", [&] { (void)(a + b); }, {"add", "[2, 3]", "[4]"}, {a, b});
    expect_error("mul", [&] { (void)kiln::mul(b, a); }, {"mul", "[4]", "[2, 3]"}, {a, b});
    expect_error("lt", [&] { (void)(a < b); }, {"lt", "[2, 3]", "[4]"}, {a, b});
    expect_error("where", [&] { (void)kiln::where(a > 0.0, a, b); }, {"where", "[2, 3]", "[4]"}, {a, b});
}

BOOST_AUTO_TEST_CASE(bad_reshape) {
    Tensor x = kiln::arange(6.).reshape({2, 3});
    expect_error("size", [&] { (void)x.reshape({4, 4}); }, {"reshape", "[4, 4]", "6", "[2, 3]"}, {x});
    expect_error("two -1", [&] { (void)x.reshape({-1, -1}); }, {"reshape", "only one dimension can be -1", "[-1, -1]"}, {x});
    expect_error("-1 that cannot fit", [&] { (void)x.reshape({4, -1}); }, {"reshape", "[4, -1]", "6"}, {x});
    expect_error("view of strided", [&] { (void)x.t().view({6}); }, {"view", "[3, 2]", "not contiguous"}, {x});
}

BOOST_AUTO_TEST_CASE(out_of_range_dims) {
    Tensor x = kiln::ones({2, 3});
    expect_error("sum", [&] { (void)x.sum({2}); }, {"sum", "[-2, 1]", "got 2"}, {x});
    expect_error("sum negative", [&] { (void)x.sum({-3}); }, {"sum", "got -3"}, {x});
    expect_error("sum repeated", [&] { (void)x.sum({1, -1}); }, {"sum", "dim 1 appears twice", "[1, -1]"}, {x});
    expect_error("amax", [&] { (void)x.amax({5}); }, {"amax", "got 5"}, {x});
    expect_error("mean", [&] { (void)x.mean({2}); }, {"mean", "got 2"}, {x});
    expect_error("permute", [&] { (void)x.permute({0, 2}); }, {"permute", "got 2"}, {x});
    expect_error("permute rank", [&] { (void)x.permute({0}); }, {"permute", "[0]", "rank 2"}, {x});
    expect_error("permute repeated", [&] { (void)x.permute({1, 1}); }, {"permute", "dim 1 repeated", "[1, 1]"}, {x});
    expect_error("transpose", [&] { (void)x.transpose(0, 5); }, {"transpose", "got 5"}, {x});
    expect_error("select dim", [&] { (void)x.select(2, 0); }, {"select", "got 2"}, {x});
    expect_error("select index", [&] { (void)x.select(1, 3); }, {"select", "index 3", "dimension 1", "size 3"}, {x});
    expect_error("narrow dim", [&] { (void)x.narrow(-3, 0, 1); }, {"narrow", "got -3"}, {x});
    expect_error("narrow length", [&] { (void)x.narrow(1, 2, 5); }, {"narrow", "start (2)", "length (5)", "size (3)"}, {x});
    expect_error("slice step", [&] { (void)x.slice(1, 0, 3, 0); }, {"slice", "step", "got 0"}, {x});
    expect_error("softmax", [&] { (void)x.softmax(2); }, {"softmax", "got 2"}, {x});
    expect_error("unsqueeze", [&] { (void)x.unsqueeze(4); }, {"unsqueeze", "got 4"}, {x});
}

BOOST_AUTO_TEST_CASE(matmul_shape_and_dtype_mismatch) {
    Tensor a = kiln::ones({2, 3}), b = kiln::ones({4, 5});
    expect_error("inner dim", [&] { (void)kiln::matmul(a, b); }, {"matmul", "[2, 3]", "[4, 5]", "3 vs 4"}, {a, b});
    Tensor d = kiln::ones({3, 5}, {.dtype = kiln::float64});
    expect_error("dtype", [&] { (void)kiln::matmul(a, d); }, {"matmul", "float32", "float64"}, {a, d});
    Tensor i = kiln::ones({3, 5}, {.dtype = kiln::int64});
    expect_error("int64", [&] { (void)kiln::matmul(a, i); }, {"matmul", "int64"}, {a, i});
    Tensor s = kiln::scalar_tensor(2);
    expect_error("0-d", [&] { (void)kiln::matmul(s, a); }, {"matmul", "at least 1 dim", "[]", "[2, 3]"}, {s, a});
    Tensor p = kiln::ones({2, 3, 4}), q = kiln::ones({3, 4, 5});
    expect_error("batch broadcast", [&] { (void)kiln::matmul(p, q); }, {"matmul", "[2]", "[3]"}, {p, q});
}

BOOST_AUTO_TEST_CASE(scalar_conversions_of_many_elements) {
    Tensor x = kiln::tensor({1.0, 2.0, 3.0});
    expect_error("item", [&] { (void)x.item<float>(); }, {"item", "3 elements", "[3]"}, {x});
    Tensor two = kiln::tensor({1.0, 0.0});
    expect_error("bool", [&] { (void)bool(two); }, {"bool", "2 elements", "[2]"}, {two});
}

BOOST_AUTO_TEST_CASE(requires_grad_on_integers) {
    Tensor i = kiln::ones({2}, {.dtype = kiln::int64});
    expect_error("requires_grad_", [&] { i.requires_grad_(); }, {"requires_grad_", "int64"}, {i});
    expect_error("factory option", [] { (void)kiln::zeros({2}, {.dtype = kiln::int64, .requires_grad = true}); },
                 {"requires_grad", "int64"});
    Tensor b = kiln::ones({2}, {.dtype = kiln::boolean});
    expect_error("bool", [&] { b.requires_grad_(); }, {"requires_grad_", "bool"}, {b});
}

BOOST_AUTO_TEST_CASE(expand_and_cat_mismatches) {
    Tensor x = kiln::ones({3});
    expect_error("expand", [&] { (void)x.expand({2, 4}); }, {"expand", "[3]", "[2, 4]", "3 vs 4"}, {x});
    expect_error("expand fewer dims", [&] { (void)kiln::ones({2, 3}).expand({3}); }, {"expand", "[3]", "[2, 3]"});
    expect_error("expand negative", [&] { (void)kiln::ones({1}).expand({-2}); }, {"expand", "-2"});
    Tensor a = kiln::ones({2, 3});
    expect_error("cat rank", [&] { (void)kiln::cat({a, x}); }, {"cat", "same rank", "[2, 3]", "[3]"}, {a, x});
    Tensor c = kiln::ones({2, 4});
    expect_error("cat sizes", [&] { (void)kiln::cat({a, c}, 0); }, {"cat", "except in dim 0", "[2, 3]", "[2, 4]"}, {a, c});
    expect_error("cat dim", [&] { (void)kiln::cat({a, a}, 2); }, {"cat", "got 2"}, {a});
    expect_error("cat empty", [] { (void)kiln::cat({}); }, {"cat", "non-empty"});
    Tensor s = kiln::scalar_tensor(1);
    expect_error("cat 0-d", [&] { (void)kiln::cat({s, s}); }, {"cat", "zero-dimensional"}, {s});
}

BOOST_AUTO_TEST_CASE(backward_misuse) {
    Tensor plain = kiln::ones({2}).sum();
    expect_error("no grad", [&] { plain.backward(); }, {"backward", "does not require grad"}, {plain});
    Tensor x = kiln::tensor({1.0, 2.0}, {.requires_grad = true});
    Tensor nonscalar = x * 2;
    expect_error("non-scalar", [&] { nonscalar.backward(); }, {"backward", "scalar outputs", "[2]"}, {x});
    Tensor y = (x * x).sum();
    y.backward();
    expect_error("twice", [&] { y.backward(); }, {"backward", "second time", "SumBackward0", "retain_graph"});
    // With retain_graph the second pass works and accumulates.
    Tensor z = kiln::tensor({3.0}, {.requires_grad = true});
    Tensor w = (z * z).sum();
    w.backward({}, true);
    w.backward();
    BOOST_TEST(z.grad().item<float>() == 12.0f);
}

BOOST_AUTO_TEST_CASE(other_bad_arguments) {
    Tensor i = kiln::ones({2}, {.dtype = kiln::int64});
    expect_error("mean of int64", [&] { (void)i.mean(); }, {"mean", "int64"}, {i});
    Tensor x = kiln::ones({3}), big = kiln::ones({2, 3});
    expect_error("copy_", [&] { x.copy_(kiln::ones({4})); }, {"copy_", "[4]", "[3]"}, {x});
    expect_error("add_ broadcasting up", [&] { x.add_(big); }, {"in-place", "[2, 3]", "[3]"}, {x, big});
    expect_error("tensor ragged", [] { (void)kiln::tensor({{1.0, 2.0}, {3.0}}); }, {"tensor", "ragged"});
    expect_error("tensor count", [] { (void)kiln::tensor(std::vector<float>{1, 2, 3}, {2, 2}); }, {"tensor", "3 values", "[2, 2]"});
    expect_error("negative size", [] { (void)kiln::zeros({2, -1}); }, {"negative size", "[2, -1]"});
    expect_error("randint range", [] { (void)kiln::randint(3, 3, {2}); }, {"randint", "low (3)", "high (3)"});
    expect_error("arange step", [] { (void)kiln::arange(0, 1, 0); }, {"arange", "step"});
    expect_error("unknown op", [] { (void)kiln::op_by_name("no_such_op"); }, {"unknown op", "no_such_op"});
    expect_error("undefined tensor", [] { (void)(Tensor() + 1.0); }, {"undefined"});
}

BOOST_AUTO_TEST_SUITE_END()
