// nn and optim builtins: layers (nn.Linear, nn.ReLU, nn.Sequential), losses, the
// functional API (F.relu, F.cross_entropy ...), optimizers, and their methods.
#include "cli/interp/builtins.h"
#include "cli/interp/operators.h"
#include "nn/functional.h"
#include "nn/attention.h"
#include "nn/conv.h"
#include "nn/layers.h"

namespace kiln::interp {
namespace {

namespace Fn = kiln::nn::functional;

ModulePtr module_arg(Bound& b, const Value& v) {
    if (auto m = v.as<ModulePtr>()) return *m;
    b.in.raise("TypeError", "nn.Sequential() takes modules, not " + type_name(v));
}

Value b_linear(Bound& b) {
    int64_t in = b.integer(0), out = b.integer(1);
    if (in <= 0 || out <= 0) b.in.raise("ValueError", "nn.Linear(in_features, out_features): sizes must be positive");
    return ModulePtr(std::make_shared<nn::Linear>(in, out, b.flag_or(2, true)));
}
// nn.Parameter(t): a leaf sharing t's data that requires grad, which is what makes a module
// attribute register as a parameter (kiln has no separate Parameter type).
Value b_parameter(Bound& b) {
    Tensor t = b.has(0) ? b.tensor(0).detach() : zeros({0});
    if (b.flag_or(1, true) && !is_floating(t.dtype()))
        b.in.raise(
            "RuntimeError",
            "nn.Parameter(): only tensors of floating point dtype can require gradients, not " +
                std::string(dtype_name(t.dtype())));
    t.requires_grad_(b.flag_or(1, true));
    return t;
}
Value b_relu_module(Bound&) { return ModulePtr(std::make_shared<nn::ReLU>()); }
Value b_sequential(Bound& b) {
    auto seq = std::make_shared<nn::Sequential>();
    for (const Value& v : b.rest) seq->push_back(module_arg(b, v));
    return ModulePtr(seq);
}
// Loss "modules" are the functional losses, called with (input, target).
Value b_mse_loss_module(Bound&) { return std::make_shared<BoundMethod>(BoundMethod{None{}, find_builtin("F.mse_loss")}); }

Fn::Reduction reduction(Bound& b, size_t i) {
    std::string r = b.has(i) ? b.string(i) : "mean";
    if (r == "mean") return Fn::Reduction::mean;
    if (r == "sum") return Fn::Reduction::sum;
    if (r == "none") return Fn::Reduction::none;
    b.in.raise("ValueError", "reduction must be 'mean', 'sum' or 'none', not '" + r + "'");
}
Value b_relu(Bound& b) { return Fn::relu(b.tensor(0)); }
Value b_softmax(Bound& b) { return Fn::softmax(b.tensor(0), b.integer_or(1, -1)); }
Value b_log_softmax(Bound& b) { return Fn::log_softmax(b.tensor(0), b.integer_or(1, -1)); }
// PyTorch's positions: (input, target, weight, size_average, ignore_index, reduce, reduction,
// label_smoothing); the deprecated size_average and reduce are refused.
Tensor class_weight(Bound& b) {
    if (b.has(3) || b.has(5))
        b.in.raise(
            "TypeError",
            "size_average and reduce are deprecated in PyTorch and not in kiln: use reduction=");
    return b.has(2) ? b.tensor(2) : Tensor();
}
Value b_cross_entropy(Bound& b) {
    Tensor weight = class_weight(b);
    return Fn::cross_entropy(b.tensor(0), b.tensor(1), reduction(b, 6), weight,
                             b.integer_or(4, -100), b.number_or(7, 0.0));
}
Value b_nll_loss(Bound& b) {
    Tensor weight = class_weight(b);
    return Fn::nll_loss(b.tensor(0), b.tensor(1), reduction(b, 6), weight, b.integer_or(4, -100));
}
// nn.CrossEntropyLoss(weight=, ignore_index=, reduction=, label_smoothing=): F.cross_entropy
// with the given options as keywords (a call's own keywords for them raise, as a duplicate).
Value b_cross_entropy_loss(Bound& b) {
    if (b.has(1) || b.has(3))
        b.in.raise(
            "TypeError",
            "size_average and reduce are deprecated in PyTorch and not in kiln: use reduction=");
    const char* names[] = {"weight", "size_average", "ignore_index", "reduce", "reduction", "label_smoothing"};
    auto partial = std::make_shared<Partial>(Partial{find_builtin("F.cross_entropy"), {}});
    for (size_t i = 0; i < std::size(names); ++i)
        if (b.has(i)) partial->kwargs.emplace_back(names[i], b.value(i));
    return partial;
}
Value b_mse_loss(Bound& b) { return Fn::mse_loss(b.tensor(0), b.tensor(1), reduction(b, 2)); }
Value b_one_hot(Bound& b) { return Fn::one_hot(b.tensor(0), b.integer(1)); }

std::vector<Tensor> params_arg(Bound& b) {
    std::vector<Tensor> params;
    if (auto m = b.value(0).as<ModulePtr>()) return (*m)->parameters();
    for (const Value& v : iterate(b.in, b.value(0))) params.push_back(to_tensor(b.in, v, "a parameter"));
    return params;
}
Value b_sgd(Bound& b) {
    return OptimizerPtr(std::make_shared<optim::SGD>(params_arg(b), b.number_or(1, 0.01), b.number_or(2, 0), b.number_or(3, 0)));
}
Value b_adam(Bound& b) {
    std::pair<double, double> betas{0.9, 0.999};
    if (b.has(2)) {
        const std::vector<Value>* seq = as_sequence(b.value(2));
        if (!seq || seq->size() != 2 || !as_double((*seq)[0]) || !as_double((*seq)[1])) b.type_error(2, "a pair of numbers");
        betas = {*as_double((*seq)[0]), *as_double((*seq)[1])};
    }
    return OptimizerPtr(std::make_shared<optim::Adam>(params_arg(b), b.number_or(1, 1e-3), betas, b.number_or(3, 1e-8), b.number_or(4, 0)));
}

// ---- methods
const ModulePtr& self_module(Bound& b) { return *b.self.as<ModulePtr>(); }
Value m_parameters(Bound& b) {
    std::vector<Value> out;
    for (const Tensor& t : self_module(b)->parameters()) out.emplace_back(t);
    return make_list(std::move(out));
}
Value m_named_parameters(Bound& b) {
    std::vector<Value> out;
    for (const auto& [name, t] : self_module(b)->named_parameters()) out.push_back(make_tuple({name, t}));
    return make_list(std::move(out));
}
Value m_module_zero_grad(Bound& b) {
    self_module(b)->zero_grad();
    return None{};
}
// module.to(device) / .cuda() / .cpu(): parameters move in place; the module comes back.
Value m_module_to(Bound& b) {
    std::string op = b.fn.name;
    Device d = b.fn.name == "Module.cuda" ? device_arg(b.in, Value("cuda"), op)
               : b.fn.name == "Module.cpu" ? kiln::cpu
                                           : device_arg(b.in, b.value(0), op);
    self_module(b)->to(d);
    return b.self;
}
Value m_train(Bound& b) {
    self_module(b)->train(b.flag_or(0, true));
    return b.self;
}
Value m_eval(Bound& b) {
    self_module(b)->eval();
    return b.self;
}
Value m_forward(Bound& b) { return self_module(b)->forward(b.tensor(0)); }
Value m_step(Bound& b) {
    (*b.self.as<OptimizerPtr>())->step();
    return None{};
}
Value m_opt_zero_grad(Bound& b) {
    (*b.self.as<OptimizerPtr>())->zero_grad();  // set_to_none is the only behaviour kiln has
    return None{};
}

const Builtin kNN[] = {
    {"nn.Parameter", "data=None, requires_grad=True", b_parameter,
     "a leaf tensor that requires grad: a module parameter"},
    {"nn.Linear", "in_features, out_features, bias=True", b_linear, "y = x W^T + b"},
    {"nn.ReLU", "", b_relu_module, "max(x, 0) as a module"},
    {"nn.Sequential", "*modules", b_sequential, "modules applied in order"},
    {"nn.CrossEntropyLoss",
     "weight=None, size_average=None, ignore_index=-100, reduce=None, reduction='mean', "
     "label_smoothing=0.0",
     b_cross_entropy_loss, "a callable (input, target) -> F.cross_entropy with these options"},
    {"nn.MSELoss", "", b_mse_loss_module, "a callable (input, target) -> F.mse_loss"},
    {"F.relu", "input", b_relu, "max(x, 0)"},
    {"F.softmax", "input, dim=-1", b_softmax, "softmax along dim"},
    {"F.log_softmax", "input, dim=-1", b_log_softmax, "log of softmax along dim"},
    {"F.cross_entropy",
     "input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, "
     "reduction='mean', label_smoothing=0.0",
     b_cross_entropy, "nll_loss(log_softmax(input), target)"},
    {"F.nll_loss",
     "input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, "
     "reduction='mean'",
     b_nll_loss, "-weight[t] * input[i, t], t = target[i]"},
    {"F.mse_loss", "input, target, reduction='mean'", b_mse_loss, "(input - target) ** 2"},
    {"F.one_hot", "tensor, num_classes", b_one_hot, "one-hot rows of int64 class indices"},
    {"optim.SGD", "params, lr=0.01, momentum=0, weight_decay=0", b_sgd,
     "stochastic gradient descent"},
    {"optim.Adam", "params, lr=0.001, betas=None, eps=1e-08, weight_decay=0", b_adam, "Adam"},
    {"Module.parameters", "", m_parameters, ""},
    {"Module.named_parameters", "", m_named_parameters, ""},
    {"Module.zero_grad", "", m_module_zero_grad, ""},
    {"Module.train", "mode=True", m_train, ""},
    {"Module.to", "device", m_module_to, ""},
    {"Module.cuda", "", m_module_to, ""},
    {"Module.cpu", "", m_module_to, ""},
    {"Module.eval", "", m_eval, ""},
    {"Module.forward", "input", m_forward, ""},
    {"Optimizer.step", "", m_step, ""},
    {"Optimizer.zero_grad", "set_to_none=True", m_opt_zero_grad, ""},
};

}  // namespace

std::span<const Builtin> nn_builtins() { return kNN; }

std::optional<Value> module_attr(const ModulePtr& m, const std::string& name) {
    if (auto lin = dynamic_cast<nn::Linear*>(m.get())) {
        if (name == "weight") return Value(lin->weight);
        if (name == "bias") return lin->bias.defined() ? Value(lin->bias) : Value(None{});
        if (name == "in_features") return lin->in_features;
        if (name == "out_features") return lin->out_features;
    }
    if (auto mha = dynamic_cast<nn::MultiheadAttention*>(m.get())) {
        if (name == "embed_dim") return mha->embed_dim;
        if (name == "num_heads") return mha->num_heads;
        if (name == "batch_first") return mha->batch_first;
        if (name == "dropout") return mha->dropout;
    }
    if (name == "training") return m->is_training();
    if (name.find('.') == std::string::npos)  // a module's own parameters (Conv2d.weight, Embedding.weight, ...)
        for (const auto& [param, t] : m->named_parameters())
            if (param == name) return Value(t);
    if (name.find('.') == std::string::npos)  // its buffers (BatchNorm2d.running_mean, num_batches_tracked)
        for (const auto& [buffer, t] : m->named_buffers())
            if (buffer == name) return Value(t);
    for (const auto& [child, module] : m->children())
        if (child == name) return Value(module);
    return std::nullopt;
}

}  // namespace kiln::interp
