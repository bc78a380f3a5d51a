// Model builtins: nn.MultiheadAttention (PyTorch's call form), the models
// (torchvision.models.resnet18, kiln.models.gpt) and state dicts (model.state_dict(),
// model.load_state_dict(d); kiln.save_state_dict / read_state_dict_npy / load_state_dict_npy
// for .npy directories) over nn/state_dict.h.
// The models first: their checks print Shapes, whose operator<< error.h's fail() must see
// declared before it (cli/interp's headers include error.h earlier otherwise).
#include "models/gpt.h"
#include "models/resnet.h"
//
#include "cli/interp/builtins.h"
#include "cli/interp/classes.h"
#include "nn/state_dict.h"

namespace kiln::interp {
namespace {

// PyTorch's `_IncompatibleKeys`: what load_state_dict(strict=False) could not match, with
// PyTorch's repr. Not a tuple: `missing, unexpected = ...` does not unpack it.
struct IncompatibleKeysObj : Object {
    nn::IncompatibleKeys keys;
    explicit IncompatibleKeysObj(nn::IncompatibleKeys k) : keys(std::move(k)) {}
    std::string type_name() const override { return "_IncompatibleKeys"; }
    static Value names(const std::vector<std::string>& v) {
        std::vector<Value> items(v.begin(), v.end());
        return make_list(std::move(items));
    }
    std::string repr() const override {
        if (keys.missing_keys.empty() && keys.unexpected_keys.empty())
            return "<All keys matched successfully>";
        return "_IncompatibleKeys(missing_keys=" + interp::repr(names(keys.missing_keys)) +
               ", unexpected_keys=" + interp::repr(names(keys.unexpected_keys)) + ")";
    }
    std::optional<Value> attr(Interp&, const ObjectPtr&, const std::string& name) override {
        if (name == "missing_keys") return names(keys.missing_keys);
        if (name == "unexpected_keys") return names(keys.unexpected_keys);
        return std::nullopt;
    }
};

void no_positional(Bound& b) {
    if (!b.rest.empty())
        b.in.raise("TypeError", b.fn.name + "() takes no positional arguments (" +
                                    std::to_string(b.rest.size()) + " given)");
}

Value b_multihead_attention(Bound& b) {
    int64_t e = b.integer(0), h = b.integer(1);
    auto m = std::make_shared<nn::MultiheadAttention>(e, h, b.flag_or(3, true), b.number_or(2, 0.0));
    m->batch_first = b.flag_or(4, false);
    return ModulePtr(m);
}

// mha(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
// average_attn_weights=True, is_causal=False) -> (output, weights or None), as PyTorch's.
// Both bool masks mark what may NOT be attended (True = masked), as in PyTorch: attn_mask
// [L, S] or [B * num_heads, L, S], key_padding_mask [B, S]; float masks are added.
// is_causal=True without attn_mask applies the causal mask. The weights are averaged over
// heads ([B, L, S]) unless average_attn_weights=False ([B, num_heads, L, S]).
Value m_mha_forward(Bound& b) {
    auto& mha = dynamic_cast<nn::MultiheadAttention&>(**b.self.as<ModulePtr>());
    Tensor q = b.tensor(0), k = b.tensor(1), v = b.tensor(2);
    nn::AttentionOptions o;
    if (b.has(3)) o.key_padding_mask = b.tensor(3);
    o.need_weights = b.flag_or(4, true);
    o.average_attn_weights = b.flag_or(6, true);
    if (b.has(5)) {
        Tensor mask = b.tensor(5);
        if (mask.dtype() == DType::boolean)
            mask = mask == 0.0;  // PyTorch's True = masked; kiln's True = attend
        if (mask.dim() == 3) {
            int64_t B = q.size(mha.batch_first ? 0 : 1), L = q.size(mha.batch_first ? 1 : 0);
            int64_t S = k.size(mha.batch_first ? 1 : 0);
            if (mask.shape() != Shape{B * mha.num_heads, L, S})
                b.in.raise("RuntimeError",
                           "MultiheadAttention.forward: a 3-D attn_mask must be [batch * "
                           "num_heads, L, S] = [" +
                               std::to_string(B * mha.num_heads) + ", " + std::to_string(L) + ", " +
                               std::to_string(S) + "]");
            mask = mask.reshape({B, mha.num_heads, L, S});
        }
        o.attn_mask = mask;
    }
    o.is_causal =
        b.flag_or(7, false) && !o.attn_mask.defined();  // with a mask, is_causal is only a hint (PyTorch)
    nn::AttentionOutput out = mha.attention(q, k, v, o);
    return make_tuple({out.output, out.weights.defined() ? Value(out.weights) : Value(None{})});
}

Value b_resnet18(Bound& b) {
    no_positional(b);
    if (b.has(0))
        b.in.raise(
            "ValueError",
            "resnet18: kiln downloads no weights (weights must be None); load a state dict with "
            "model.load_state_dict(...)");
    int64_t classes = b.integer_or(2, 1000);
    if (classes <= 0)
        b.in.raise("ValueError",
                   "resnet18: num_classes must be positive, got " + std::to_string(classes));
    return ModulePtr(std::make_shared<models::ResNet18>(classes));
}

Value b_gpt(Bound& b) {
    no_positional(b);
    models::GptConfig c;
    c.vocab_size = b.integer_or(0, c.vocab_size);
    c.max_positions = b.integer_or(1, c.max_positions);
    c.layers = b.integer_or(2, c.layers);
    c.d_model = b.integer_or(3, c.d_model);
    c.heads = b.integer_or(4, c.heads);
    if (c.vocab_size <= 0 || c.max_positions <= 0 || c.layers < 0 || c.d_model <= 0 || c.heads <= 0)
        b.in.raise("ValueError", "kiln.models.gpt: sizes must be positive");
    return ModulePtr(std::make_shared<models::Gpt>(c));
}

const ModulePtr& self_module(Bound& b) { return *b.self.as<ModulePtr>(); }

// model.state_dict(): a dict of name -> tensor (detached, sharing the model's storage).
Value m_state_dict(Bound& b) {
    Value d = make_dict();
    auto& items = (*d.as<std::shared_ptr<DictObj>>())->items;
    for (auto& [name, t] : self_module(b)->state_dict()) items.emplace_back(name, t);
    return d;
}

Value m_load_state_dict(Bound& b) {
    auto dict = b.value(0).as<std::shared_ptr<DictObj>>();
    if (!dict) b.type_error(0, "a dict of str -> Tensor");
    if (b.flag_or(2, false))
        b.in.raise("NotImplementedError",
                   "load_state_dict: assign=True is not supported in kiln (it copies)");
    nn::StateDict entries;
    for (const auto& [key, value] : (*dict)->items) {
        const std::string* name = key.as<std::string>();
        if (!name)
            b.in.raise("TypeError", "load_state_dict: keys must be str, not " + type_name(key));
        const Tensor* t = value.as<Tensor>();
        if (!t || !t->defined())
            b.in.raise("TypeError", "load_state_dict: the value for '" + *name +
                                        "' must be a Tensor, not " + type_name(value));
        entries.emplace_back(*name, *t);
    }
    return std::make_shared<IncompatibleKeysObj>(
        self_module(b)->load_state_dict(entries, b.flag_or(1, true)));
}

ModulePtr module_arg(Bound& b, size_t i) {
    if (auto m = b.value(i).as<ModulePtr>()) return *m;
    if (auto o = b.value(i).object<InstanceObj>(); o && o->module) return o->module;
    b.type_error(i, "an nn.Module");
}
Value b_save_state_dict(Bound& b) {
    nn::save_state_dict(*module_arg(b, 0), b.string(1));
    return None{};
}
Value b_read_state_dict_npy(Bound& b) {
    Value d = make_dict();
    auto& items = (*d.as<std::shared_ptr<DictObj>>())->items;
    for (auto& [name, t] : nn::read_state_dict_npy(b.string(0))) items.emplace_back(name, t);
    return d;
}
Value b_load_state_dict_npy(Bound& b) {
    return std::make_shared<IncompatibleKeysObj>(
        nn::load_state_dict_npy(*module_arg(b, 0), b.string(1), b.flag_or(2, true)));
}

Value m_named_buffers(Bound& b) {
    std::vector<Value> out;
    for (const auto& [name, t] : self_module(b)->named_buffers())
        out.push_back(make_tuple({name, t}));
    return make_list(std::move(out));
}
Value m_buffers(Bound& b) {
    std::vector<Value> out;
    for (const auto& [name, t] : self_module(b)->named_buffers()) out.emplace_back(t);
    return make_list(std::move(out));
}

const Builtin kModels[] = {
    {"nn.MultiheadAttention", "embed_dim, num_heads, dropout=0.0, bias=True, batch_first=False",
     b_multihead_attention,
     "multi-head attention; call (query, key, value, key_padding_mask=None, need_weights=True, "
     "attn_mask=None, average_attn_weights=True, is_causal=False) -> (output, weights or None)"},
    {"MultiheadAttention.forward",
     "query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None, "
     "average_attn_weights=True, is_causal=False",
     m_mha_forward, ""},
    {"torchvision.models.resnet18", "*, weights=None, progress=True, num_classes=1000", b_resnet18,
     "ResNet-18 in torchvision's layout and names (models/resnet.h), freshly initialized"},
    {"kiln.models.gpt", "*, vocab_size=256, max_positions=128, layers=4, d_model=256, heads=4",
     b_gpt,
     "a GPT-2-style decoder (models/gpt.h): int64 tokens [B, T] -> logits [B, T, vocab_size]"},
    {"kiln.save_state_dict", "module, dir", b_save_state_dict,
     "write dir/<key>.npy for every entry of module.state_dict()"},
    {"kiln.read_state_dict_npy", "dir", b_read_state_dict_npy,
     "a dict of every dir/<key>.npy, sorted by key"},
    {"kiln.load_state_dict_npy", "module, dir, strict=True", b_load_state_dict_npy,
     "module.load_state_dict(kiln.read_state_dict_npy(dir), strict)"},
    {"Module.state_dict", "", m_state_dict, ""},
    {"Module.load_state_dict", "state_dict, strict=True, assign=False", m_load_state_dict, ""},
    {"Module.named_buffers", "", m_named_buffers, ""},
    {"Module.buffers", "", m_buffers, ""},
};

}  // namespace

std::span<const Builtin> models_builtins() { return kModels; }

}  // namespace kiln::interp
