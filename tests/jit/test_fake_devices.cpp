// Shape-only tracing on a GPU, checked without one (jit/fake.h, docs/jit.md "Shape-only
// tracing"): a fake tensor on Device cuda holds no data, so the ops' shape rules run on it
// here. Each rule must put its result where the kernel would (tensor/kernels_cuda.cpp,
// cuda_forward: the CUDA inputs' device, a 0-d CPU tensor mixing in), factories where their
// attributes say, and AOT's joint graph (derivative formulas, tangents) likewise.
#include <boost/test/unit_test.hpp>
#include <map>

#include "jit/aot/joint.h"
#include "jit/fake.h"
#include "jit/graph.h"
#include "kiln.h"
#include "models/gpt.h"
#include "models/resnet.h"
#include "tensor/storage.h"

using namespace kiln;

namespace {

const Device kCuda{DeviceType::cuda, 0};

Tensor fake_cuda(const Shape& shape, DType dtype = DType::float32) {
    return jit::fake_empty(shape, dtype, kCuda);
}

// Runs every op through its shape rule (as the tracer's shape-only recording does) and
// records a graph of them, so AOT can build a joint graph over it.
struct FakeRecorder final : DispatchHook {
    jit::GraphBuilder b;
    std::map<const TensorImpl*, int> ids;
    std::vector<Tensor> keep, examples;
    std::vector<std::string> no_rule;

    int input(const Tensor& t) {
        int id = b.placeholder("x", jit::meta_of(t), "argument");
        examples.push_back(t);
        return add(t, id);
    }
    int add(const Tensor& t, int id) {
        ids[t.impl()] = id;
        keep.push_back(t);
        return id;
    }
    int id_of(const Tensor& t) {
        auto it = ids.find(t.impl());
        return it != ids.end() ? it->second : input(t);  // a constant: an input of the graph
    }
    Tensor call(OpId op, std::span<const Tensor> in, const Attrs& a) override {
        std::vector<int> args;
        for (const Tensor& t : in) args.push_back(id_of(t));
        Tensor out = jit::fake_call(op, in, a);
        if (!out.defined()) {  // the tracer would run it for real: record why, go on
            no_rule.push_back(op_info(op).name);
            out = jit::fake_empty({}, DType::float32, cpu);
        }
        add(out, b.call(op, a, std::move(args), out, autograd::grad_enabled()));
        return out;
    }
    void escape(const Tensor& t, Escape, const std::source_location& loc) override {
        BOOST_FAIL("a value was read (a tensor of " << t.dim() << " dims) at " << loc.file_name()
                                                    << ":" << loc.line());
    }
    void assign(const Tensor& target, const Tensor& value) override {
        // functionalized: the target takes the value's place (batch norm's running stats)
        ids[target.impl()] = id_of(value);
    }
};

struct HookScope {
    DispatchHook* prev;
    explicit HookScope(DispatchHook* h) : prev(dispatch_hook()) { set_dispatch_hook(h); }
    ~HookScope() { set_dispatch_hook(prev); }
};

// The module's parameters and buffers become fake tensors on kCuda (module.to(cuda) without
// a GPU): same shapes, strides and dtypes, no data.
void to_fake_cuda(nn::Module& m) {
    std::vector<Tensor> all = m.parameters();
    for (const auto& [name, t] : m.named_buffers()) all.push_back(t);
    for (const Tensor& t : all) {
        auto st = std::make_shared<Storage>();
        st->fake = true;
        st->device = kCuda;
        t.impl()->storage = std::move(st);
        t.impl()->offset = 0;
    }
}

// Every value of `g` with a dimension is on kCuda; 0-d values may be CPU scalars (as eager's
// scalar_tensor in derivative formulas) only where they are factories' results.
void check_all_on_cuda(const jit::Graph& g, const std::string& what) {
    int on_gpu = 0;
    for (const jit::Node& n : g.nodes()) {
        if (n.kind == jit::NodeKind::output) continue;
        if (n.meta.device == kCuda) {
            ++on_gpu;
            continue;
        }
        bool cpu_scalar = n.meta.shape.empty() && n.kind == jit::NodeKind::call &&
                          op_info(n.op).kind != OpKind::pointwise;
        BOOST_CHECK_MESSAGE(cpu_scalar, what << ": node " << n.name << " (" << n.meta.shape.size()
                                             << " dims) is on " << n.meta.device);
    }
    BOOST_CHECK_GT(on_gpu, 0);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(jit_fake_trace_devices)

BOOST_AUTO_TEST_CASE(a_fake_cuda_tensor_needs_no_gpu) {
    Tensor t = fake_cuda({2, 3});
    BOOST_TEST((t.device() == kCuda));
    BOOST_TEST(jit::is_fake(t));
    BOOST_CHECK_THROW(t.raw_data(), FakeTensorRead);
    Tensor v = jit::fake_call(OpId::permute, std::vector<Tensor>{t}, {.dims = {1, 0}});
    BOOST_TEST((v.device() == kCuda));
    BOOST_TEST((v.shape() == Shape{3, 2}));
}

// Every pointwise op of the table: CUDA with CUDA, with a 0-d CPU tensor either side (a
// scalar_tensor in a derivative formula; the kernel moves it to the GPU), with a scalar.
BOOST_AUTO_TEST_CASE(pointwise_rules_put_results_on_the_cuda_operand_device) {
    Tensor x = fake_cuda({2, 3}), y = fake_cuda({3}), s = scalar_tensor(2.0, DType::float32);
    for (int k = 0; k < kOpCount; ++k) {
        OpId op = OpId(k);
        const OpInfo& info = op_info(op);
        if (info.kind != OpKind::pointwise || !info.math) continue;
        BOOST_TEST_CONTEXT(info.name) {
            std::vector<std::vector<Tensor>> cases;
            std::vector<Attrs> attrs;
            if (info.arity == 1) {
                cases = {{x}};
                attrs = {{}};
            } else {
                cases = {{x, y}, {x, s}, {s, x}, {x}, {x}};
                attrs = {{},
                         {},
                         {},
                         {.scalar = 3, .scalar_pos = ScalarPos::right},
                         {.scalar = 3, .scalar_pos = ScalarPos::left}};
            }
            for (size_t c = 0; c < cases.size(); ++c) {
                Tensor out = jit::fake_call(op, cases[c], attrs[c]);
                BOOST_REQUIRE_MESSAGE(out.defined(), "case " << c << " has no rule");
                BOOST_TEST((out.device() == kCuda), "case " << c << ": " << out.device());
                BOOST_TEST((out.shape() == Shape{2, 3}), "case " << c);
            }
        }
    }
    // A CPU tensor with dimensions beside a CUDA one is eager's device error: no rule, so
    // the op runs for real and raises it.
    BOOST_TEST(!jit::fake_call(OpId::mul, std::vector<Tensor>{x, randn({2, 3})}, {}).defined());
    BOOST_TEST(!jit::fake_call(OpId::mul, std::vector<Tensor>{randn({2, 3}), x}, {}).defined());
}

// The other rules: reductions' outputs, where with a CPU scalar, casts, matmul, cat, views,
// windows, indexing, factories (their attributes' device), to(device).
BOOST_AUTO_TEST_CASE(other_rules_follow_their_inputs_or_attributes) {
    FakeRecorder rec;
    HookScope hook(&rec);
    Tensor x = fake_cuda({2, 3}), img = fake_cuda({2, 3, 8, 8}), w = fake_cuda({4, 3, 3, 3});
    Tensor idx = fake_cuda({2, 1}, DType::int64);
    std::vector<std::pair<std::string, Tensor>> outs = {
        {"sum", x.sum({1})},
        {"sum all", x.sum()},
        {"amax", x.amax({0}, true)},
        {"mean", x.mean()},
        {"where", where(x > 0, x, scalar_tensor(0.0, DType::float32))},
        {"cast", x.to(DType::float64)},
        {"matmul", x.matmul(fake_cuda({3, 5}))},
        {"cat", cat({x, x}, 0)},
        {"reshape", x.reshape({3, 2})},
        {"transpose contiguous", x.t().contiguous()},
        {"expand", x.unsqueeze(0).expand({4, 2, 3})},
        {"slice", x.slice(1, 0, 2)},
        {"softmax", softmax(x, 1)},
        {"conv2d", conv2d(img, w, {}, {1, 1}, {1, 1})},
        {"max_pool2d", max_pool2d(img, {.kernel = {2, 2}, .stride = {2, 2}})},
        {"gather", gather(x, 1, idx)},
        {"ones_like", ones_like(x)},
        {"zeros cuda", zeros({2}, {.device = kCuda})},
        {"full cuda", full({2}, 1.5, {.device = kCuda})},
        {"arange cuda", arange(0, 4, 1, {.device = kCuda})},
        {"randn cuda", randn({3}, {.device = kCuda})},
        {"randint cuda", randint(0, 5, {3}, {.device = kCuda})},
        {"to cuda", randn({2}).to(kCuda)},
    };
    for (const auto& [what, t] : outs)
        BOOST_TEST((t.device() == kCuda), what << ": " << t.device());
    BOOST_TEST((zeros({2}).device() == cpu));  // a factory without a device: the CPU, as eager
    BOOST_TEST((x.to(cpu).device() == cpu));
    BOOST_TEST(jit::is_fake(x.to(cpu)));
    BOOST_TEST(rec.no_rule.empty(), "no rule: " << rec.no_rule.size());
}

// AOT's joint graph of a loss over fake CUDA examples: tangents, derivative formulas and
// the gradients all on the GPU (never a real run: the examples have no values).
BOOST_AUTO_TEST_CASE(the_joint_graph_of_cuda_examples_stays_on_the_gpu) {
    jit::FakeTraceScope on(true);
    FakeRecorder rec;
    Tensor x = fake_cuda({4, 8}).requires_grad_(), w = fake_cuda({8, 5}).requires_grad_();
    Tensor t = fake_cuda({4, 1}, DType::int64);
    int out;
    {
        HookScope hook(&rec);
        rec.input(x), rec.input(w), rec.input(t);
        Tensor h = (x.matmul(w) * 2 + 1).relu();
        Tensor loss = -gather(log_softmax(h, 1), 1, t).mean() + h.amax({1}).sum() * 0.5 +
                      (h.tanh() / 3).sum();
        out = rec.ids.at(loss.impl());
    }
    BOOST_REQUIRE(rec.no_rule.empty());
    auto g = rec.b.build({out});
    jit::aot::JointGraph j = jit::aot::build_joint(*g, rec.examples);
    check_all_on_cuda(*j.graph, "joint graph");
    for (int i : j.input_grads)
        if (i >= 0) BOOST_TEST((j.graph->nodes()[size_t(i)].meta.device == kCuda));
}

// The two bench models on a fake GPU: every op of a training step's forward and loss has a
// rule that keeps it on the GPU, and so does the joint graph over it.
void check_model(nn::Module& net, const Tensor& input, const Tensor& target, const char* what) {
    jit::FakeTraceScope on(true);
    to_fake_cuda(net);
    FakeRecorder rec;
    int out;
    {
        HookScope hook(&rec);
        rec.input(input), rec.input(target);
        for (const Tensor& p : net.parameters()) rec.input(p);
        for (const auto& [name, b] : net.named_buffers()) rec.input(b);
        Tensor logits = net.forward(input);
        Tensor loss = nn::functional::cross_entropy(
            logits.reshape({target.size(0), logits.size(-1)}), target);
        out = rec.ids.at(loss.impl());
        BOOST_TEST((loss.device() == kCuda));
    }
    BOOST_TEST_CONTEXT(what) {
        BOOST_TEST(rec.no_rule.empty(),
                   "ops without a rule: " << rec.no_rule.size() << ", the first "
                                          << (rec.no_rule.empty() ? "" : rec.no_rule[0]));
        auto g = rec.b.build({out});
        check_all_on_cuda(*g, std::string(what) + " forward");
        jit::aot::JointGraph j = jit::aot::build_joint(*g, rec.examples);
        check_all_on_cuda(*j.graph, std::string(what) + " joint graph");
    }
}

BOOST_AUTO_TEST_CASE(resnet18_and_the_gpt_decoder_record_on_a_fake_gpu) {
    manual_seed(1);
    models::ResNet18 resnet(10);
    resnet.train();
    check_model(resnet, fake_cuda({2, 3, 32, 32}), fake_cuda({2}, DType::int64), "resnet18");
    models::Gpt gpt(models::GptConfig{
        .vocab_size = 64, .max_positions = 16, .layers = 2, .d_model = 32, .heads = 4});
    gpt.train();
    check_model(gpt, fake_cuda({2, 16}, DType::int64), fake_cuda({32}, DType::int64), "gpt");
}

// KILN_FAKE_TRACE_CUDA=0 (set_fake_trace_cuda(false)): recordings over GPU tensors are real
// again, CPU ones stay shape-only.
BOOST_AUTO_TEST_CASE(the_cuda_switch_turns_gpu_recordings_real) {
    jit::FakeTraceScope on(true);
    std::vector<Tensor> gpu = {fake_cuda({2}), randn({2})}, host = {randn({2})};
    BOOST_TEST(jit::fake_trace_for(gpu));
    jit::set_fake_trace_cuda(false);
    BOOST_TEST(!jit::fake_trace_for(gpu));
    BOOST_TEST(jit::fake_trace_for(host));
    jit::set_fake_trace_cuda(true);
    jit::FakeTraceScope off(false);
    BOOST_TEST(!jit::fake_trace_for(host));
}

BOOST_AUTO_TEST_SUITE_END()
