// jit::ddp_split_compile (jit/ddp_split.h): a graph recorded while a DDP is active is cut at
// its buckets into subgraphs, each its own node of the tape; values and gradients equal eager.
// (DDP itself, on 1 and 2 ranks: tests/dist/test_ddp.cpp.)
#include <boost/test/unit_test.hpp>
#include <set>

#include "jit/ddp_split.h"
#include "jit/explain.h"
#include "kiln.h"
#include "models/gpt.h"
#include "tests/codegen/compare.h"
#include "tests/codegen/random_programs.h"

using namespace kiln;

namespace {

std::shared_ptr<nn::Sequential> make_mlp() {
    manual_seed(0);
    return std::make_shared<nn::Sequential>(nn::sequential(
        nn::Linear(4, 8), nn::ReLU(), nn::Linear(8, 8), nn::ReLU(), nn::Linear(8, 2)));
}

std::shared_ptr<jit::DDPBuckets> buckets_of(nn::Module& net, double cap_bytes) {
    auto b = std::make_shared<jit::DDPBuckets>();
    b->cap_bytes = cap_bytes;
    for (const auto& [name, p] : net.named_parameters())
        b->params.push_back(p), b->names.push_back(name);
    return b;
}

// The compiled-segment nodes of the tape behind `t`.
int compiled_nodes(const Tensor& t) {
    std::set<autograd::Node*> seen;
    std::vector<autograd::Node*> todo{t.grad_fn().get()};
    int n = 0;
    while (!todo.empty()) {
        autograd::Node* node = todo.back();
        todo.pop_back();
        if (!node || !seen.insert(node).second) continue;
        n += node->name() == "CompiledFunctionBackward";
        for (const auto& e : node->next) todo.push_back(e.node.get());
    }
    return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(jit_ddp_split)

// CPU Linear records t(weight), matmul, add(bias). With a 300-byte cap, walking back from the
// end: 4.bias, 4.weight, 2.bias (8 + 64 + 32 bytes), then 2.weight (256) starts a subgraph,
// 0.bias (32) joins it, 0.weight (128) starts the first.
BOOST_AUTO_TEST_CASE(a_graph_recorded_under_an_active_ddp_is_cut_at_its_buckets) {
    auto net = make_mlp();
    auto buckets = buckets_of(*net, 300);
    const auto& names = buckets->names;
    auto f = compile(*net, {.backend = "aot_eager"});
    manual_seed(1);
    Tensor x = randn({3, 4});
    Tensor out;
    {
        jit::ActiveDDPScope active(buckets);
        out = f(x);
    }
    BOOST_CHECK_EQUAL(compiled_nodes(out), 3);
    out.sum().backward();
    std::vector<Tensor> grads;
    for (Tensor p : net->parameters()) grads.push_back(p.grad().clone()), p.zero_grad();
    Tensor want = (*net)(x);
    want.sum().backward();
    BOOST_CHECK(allclose(out, want, 1e-5, 1e-6));
    auto params = net->parameters();
    for (size_t k = 0; k < params.size(); ++k)
        BOOST_CHECK_MESSAGE(allclose(grads[k], params[k].grad(), 1e-5, 1e-6), names[k]);

    std::shared_ptr<const jit::DDPSplit> split;
    f.core().with_entries(
        [&](const auto& entries) { split = jit::ddp_split_of(*entries.at(0)->root->graph); });
    BOOST_REQUIRE(split);
    BOOST_REQUIRE_EQUAL(split->pieces.size(), 3u);
    using V = std::vector<std::string>;
    BOOST_CHECK(split->pieces[0].params == (V{names[0]}));
    BOOST_CHECK(split->pieces[1].params == (V{names[2], names[1]}));
    BOOST_CHECK(split->pieces[2].params == (V{names[5], names[4], names[3]}));
    BOOST_CHECK_EQUAL(split->pieces[0].bytes, 128u);
    BOOST_CHECK_EQUAL(split->pieces[1].bytes, 288u);
    BOOST_CHECK_EQUAL(split->pieces[2].bytes, 104u);

    // A cache hit runs the same subgraphs.
    manual_seed(2);
    Tensor x2 = randn({3, 4});
    Tensor again = f(x2);
    BOOST_CHECK_EQUAL(compiled_nodes(again), 3);
    BOOST_CHECK(allclose(again, (*net)(x2), 1e-5, 1e-6));

    std::ostringstream os;
    os << jit::explain_compiled(f);
    BOOST_CHECK_MESSAGE(
        os.str().find("Graph 1: 3 subgraphs (bucket cap 300 bytes)") != std::string::npos &&
            os.str().find("subgraph 1: 1 ops, bucket of 1 parameter (128 bytes): " + names[0]) !=
                std::string::npos,
        os.str());
}

BOOST_AUTO_TEST_CASE(without_an_active_ddp_the_graph_stays_whole) {
    auto net = make_mlp();
    auto f = compile(*net, {.backend = "aot_eager"});
    Tensor out = f(randn({3, 4}));
    BOOST_CHECK_EQUAL(compiled_nodes(out), 1);
    jit::ExplainOutput e = jit::explain_compiled(f);
    BOOST_REQUIRE_EQUAL(e.ddp_subgraphs.size(), 1u);
    BOOST_CHECK_EQUAL(e.ddp_subgraphs[0], 0);
}

BOOST_AUTO_TEST_CASE(parameters_that_fit_one_bucket_leave_the_graph_whole) {
    auto net = make_mlp();
    auto f = compile(*net, {.backend = "aot_eager"});
    Tensor out;
    {
        jit::ActiveDDPScope active(buckets_of(*net, 1 << 20));
        out = f(randn({3, 4}));
    }
    BOOST_CHECK_EQUAL(compiled_nodes(out), 1);
    jit::ExplainOutput e = jit::explain_compiled(f);
    BOOST_CHECK_EQUAL(e.ddp_subgraphs.at(0), 1);
    BOOST_CHECK_MESSAGE(
        e.ddp_splits.at(0).find("left whole, its parameters fit one bucket") != std::string::npos,
        e.ddp_splits.at(0));
}

BOOST_AUTO_TEST_CASE(a_graph_that_reads_no_parameter_of_the_ddp_stays_whole) {
    auto net = make_mlp();
    auto f = compile([](const Tensor& x) { return relu(x) * 2; }, {.backend = "aot_eager"});
    {
        jit::ActiveDDPScope active(buckets_of(*net, 1));
        f(randn({3, 4}));
    }
    jit::ExplainOutput e = jit::explain_compiled(f);
    BOOST_CHECK_EQUAL(e.ddp_subgraphs.at(0), 1);
    BOOST_CHECK_MESSAGE(e.ddp_splits.at(0).find("left whole, it reads no parameter of the DDP") !=
                            std::string::npos,
                        e.ddp_splits.at(0));
}

// GPT's LM head reads the tied token embedding (the first parameter, so the last DDP bucket)
// at the very end. The split counts a parameter at its first reader, where its gradient is
// complete: the head joins the last subgraph with ln_f, and the embedding's bucket is the
// first subgraph's. (Counting at the last reader left the whole graph one subgraph.)
BOOST_AUTO_TEST_CASE(a_tied_weight_read_again_at_the_end_does_not_keep_the_graph_whole) {
    manual_seed(0);
    auto net = std::make_shared<models::Gpt>(
        models::GptConfig{.vocab_size = 16, .max_positions = 8, .layers = 2, .d_model = 8, .heads = 2});
    auto buckets = buckets_of(*net, 0);
    // DDP's order: parameters reversed, a bucket per block of layers (cap ~ one block).
    const size_t n = buckets->params.size();
    buckets->bucket_of.resize(n);
    size_t bucket = 0, bytes = 0;
    for (size_t k = n; k-- > 0;) {
        if (bytes >= 1200) ++bucket, bytes = 0;
        buckets->bucket_of[k] = bucket, bytes += buckets->params[k].nbytes();
    }
    BOOST_REQUIRE_EQUAL(buckets->names[0], "wte.weight");
    auto f = compile(*net, {.backend = "aot_eager"});
    Tensor idx = randint(0, 16, {2, 8});
    Tensor out;
    {
        jit::ActiveDDPScope active(buckets);
        out = f(idx);
    }
    BOOST_CHECK_GE(compiled_nodes(out), 3);
    (out * out).sum().backward();
    std::vector<Tensor> grads;
    for (Tensor p : net->parameters()) grads.push_back(p.grad().clone()), p.zero_grad();
    Tensor want = (*net)(idx);
    (want * want).sum().backward();
    BOOST_CHECK(allclose(out, want, 1e-5, 1e-6));
    auto params = net->parameters();
    for (size_t k = 0; k < params.size(); ++k)
        BOOST_CHECK_MESSAGE(allclose(grads[k], params[k].grad(), 1e-5, 1e-6), buckets->names[k]);

    std::shared_ptr<const jit::DDPSplit> split;
    f.core().with_entries(
        [&](const auto& entries) { split = jit::ddp_split_of(*entries.at(0)->root->graph); });
    BOOST_REQUIRE(split);
    BOOST_REQUIRE_GE(split->pieces.size(), 3u);
    const auto& first = split->pieces.front().params;
    BOOST_CHECK_MESSAGE(std::find(first.begin(), first.end(), "wte.weight") != first.end(), split->str());
    const auto& last = split->pieces.back().params;
    BOOST_CHECK_MESSAGE(std::find(last.begin(), last.end(), "ln_f.weight") != last.end(), split->str());
}

// Random programs (tests/codegen/random_programs.h: pointwise, reductions, views, Linear
// layers; inputs read more than once) cut at random DDP buckets: every input is a DDP
// parameter with a random bucket, so the cut falls anywhere, tied reads included. Each
// subgraph is compiled with aot_eager: the outputs and every input's gradient equal the
// uncut graph run eagerly.
BOOST_AUTO_TEST_CASE(random_programs_cut_at_random_buckets_equal_eager) {
    manual_seed(77);
    kiln_test::ProgramGenerator generator(20261127);
    std::mt19937 rng(5);
    int cut = 0, failures = 0;
    for (int i = 0; i < 300; ++i) {
        kiln_test::Program p = generator.make();
        jit::DDPBuckets ddp;
        for (size_t k = 0; k < p.inputs.size(); ++k) {
            ddp.params.push_back(p.inputs[k]);
            ddp.names.push_back("p" + std::to_string(k));
            ddp.bucket_of.push_back(std::uniform_int_distribution<size_t>(0, 3)(rng));
        }
        jit::aot::AotPlan plan = jit::aot::plan(*p.graph, p.inputs);
        std::vector<Tensor> tangents;
        for (int k : plan.tangent_outputs)
            tangents.push_back(randn(p.graph->nodes()[p.graph->outputs()[k]].meta.shape));
        kiln_test::Reference ref = kiln_test::eager_reference(p, plan, tangents);

        jit::CompiledFn f = jit::ddp_split_compile("aot_eager", p.graph, p.inputs, {}, ddp);
        for (Tensor x : p.inputs) x.zero_grad();
        std::vector<Tensor> out = f(p.inputs);
        Tensor total;
        for (size_t t = 0; t < tangents.size(); ++t) {
            Tensor term = (out[size_t(plan.tangent_outputs[t])] * tangents[t]).sum();
            total = total.defined() ? total + term : term;
        }
        if (total.defined()) total.backward();
        cut += jit::ddp_split_of(*p.graph)->pieces.size() > 1;
        auto check = [&](const Tensor& got, const Tensor& want, const std::string& what) {
            double error = kiln_test::relative_error(got, want);
            if (error > 1e-5 && ++failures <= 5)
                BOOST_ERROR("program " << i << " " << what << ": error " << error << "\n"
                                       << *p.graph << jit::ddp_split_of(*p.graph)->str());
        };
        BOOST_REQUIRE_EQUAL(out.size(), ref.outputs.size());
        for (size_t k = 0; k < out.size(); ++k) check(out[k], ref.outputs[k], "output " + std::to_string(k));
        for (size_t k = 0; k < p.inputs.size(); ++k)
            check(p.inputs[k].grad(), ref.grads[k], "gradient of input " + std::to_string(k));
    }
    BOOST_TEST(failures == 0);
    BOOST_TEST(cut > 60, cut << " of 300 programs were cut");
    BOOST_TEST_MESSAGE(cut << " of 300 random programs cut into two or more subgraphs");
}

BOOST_AUTO_TEST_SUITE_END()
