// The view rules (tensor/view_rules.h) that the JIT's shape rules and codegen's strided
// access both read: every view op of the table has one, and each says where its dims come
// from.
#include <boost/test/unit_test.hpp>

#include "kiln.h"
#include "tensor/view_rules.h"

using namespace kiln;

BOOST_AUTO_TEST_SUITE(view_rules)

// A view op added to tensor/ops.def without a rule would be fallen back on by codegen and
// pinned by the JIT without a word: it fails here instead.
BOOST_AUTO_TEST_CASE(every_view_op_of_the_table_has_a_rule_and_no_other_op_does) {
    Attrs a{.dims = {1, 0}};
    for (int i = 0; i < kOpCount; ++i) {
        OpId op = OpId(i);
        bool is_view = op_info(op).kind == OpKind::view;
        BOOST_TEST_CONTEXT(op_name(op)) {
            BOOST_CHECK_EQUAL(view_rule(op, a, 2, 2).kind != ViewRule::Kind::none, is_view);
        }
    }
}

BOOST_AUTO_TEST_CASE(each_output_dim_names_the_input_dim_it_reads) {
    ViewRule p = view_rule(OpId::permute, {.dims = {2, 0, -2}}, 3, 3);
    BOOST_CHECK(p.kind == ViewRule::Kind::dims);
    BOOST_CHECK(p.from == std::vector<int>({2, 0, 1}));

    ViewRule e = view_rule(OpId::expand, {.shape = {2, 3, 4}}, 2, 3);
    BOOST_CHECK(e.from == std::vector<int>({-1, 0, 1}));  // a new leading dim
    BOOST_CHECK(e.broadcasts({3, 1}, {2, 3, 4}, 0));
    BOOST_CHECK(!e.broadcasts({3, 1}, {2, 3, 4}, 1));
    BOOST_CHECK(e.broadcasts({3, 1}, {2, 3, 4}, 2));  // the size-1 dim, read at stride 0

    ViewRule s = view_rule(OpId::slice, {.dim = -1, .start = 1, .end = 3, .step = 1}, 2, 2);
    BOOST_CHECK(s.from == std::vector<int>({0, 1}));
    BOOST_CHECK_EQUAL(s.sliced, 1);
    BOOST_CHECK(!s.broadcasts({4, 5}, {4, 2}, 1));  // a slice changes a size, broadcasts none

    BOOST_CHECK(view_rule(OpId::contiguous, {}, 2, 2).copies);
    BOOST_CHECK(view_rule(OpId::reshape, {.shape = {6}}, 2, 1).kind == ViewRule::Kind::regroup);
}

BOOST_AUTO_TEST_CASE(a_dim_out_of_range_is_an_error_naming_the_op) {
    BOOST_CHECK_EXCEPTION(
        view_rule(OpId::permute, {.dims = {0, 2}}, 2, 2), Error, [](const Error& e) {
            return std::string(e.what()).find("permute: dimension out of range") !=
                   std::string::npos;
        });
}

BOOST_AUTO_TEST_SUITE_END()
