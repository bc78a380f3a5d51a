// A GPT-2-style decoder: token and position embeddings, N pre-LayerNorm blocks of causal
// self-attention and a GELU MLP, a final LayerNorm and a head tied to the token embedding.
// Names follow GPT-2's layout as PyTorch ports write it (wte, wpe, h.0.ln_1, h.0.attn,
// h.0.ln_2, h.0.mlp.c_fc, h.0.mlp.c_proj, ln_f, lm_head); attention is PyTorch's
// nn.MultiheadAttention (in_proj_weight, out_proj), the MLP nn.Linear ([out, in] weights).
#pragma once
#include <memory>

#include "kiln.h"

namespace kiln::models {

struct GptConfig {
    int64_t vocab_size = 256, max_positions = 128, layers = 4, d_model = 256, heads = 4;
};

// A named group of layers with no forward of its own (GPT-2's "mlp").
struct ModuleGroup : nn::Module {
    Tensor forward(const Tensor&) override { fail("ModuleGroup: a group of layers has no forward of its own"); }
};

class GptBlock : public nn::Module {
   public:
    GptBlock(int64_t d, int64_t heads) {
        ln_1 = register_module("ln_1", std::make_shared<nn::LayerNorm>(Shape{d}));
        attn = register_module("attn", std::make_shared<nn::MultiheadAttention>(d, heads));
        ln_2 = register_module("ln_2", std::make_shared<nn::LayerNorm>(Shape{d}));
        mlp = register_module("mlp", std::make_shared<ModuleGroup>());
        c_fc = mlp->register_module("c_fc", std::make_shared<nn::Linear>(d, 4 * d));
        c_proj = mlp->register_module("c_proj", std::make_shared<nn::Linear>(4 * d, d));
    }
    Tensor forward(const Tensor& x) override {
        Tensor h = ln_1->forward(x);
        Tensor y = x + attn->attend(h, h, h, {}, /*is_causal=*/true);
        return y + c_proj->forward(nn::functional::gelu(c_fc->forward(ln_2->forward(y))));
    }

   private:
    std::shared_ptr<nn::LayerNorm> ln_1, ln_2;
    std::shared_ptr<nn::MultiheadAttention> attn;
    std::shared_ptr<ModuleGroup> mlp;
    std::shared_ptr<nn::Linear> c_fc, c_proj;
};

class Gpt : public nn::Module {
   public:
    explicit Gpt(GptConfig c = {}) : config(c) {
        wte = register_module("wte", std::make_shared<nn::Embedding>(c.vocab_size, c.d_model));
        wpe = register_module("wpe", std::make_shared<nn::Embedding>(c.max_positions, c.d_model));
        {
            autograd::NoGradGuard no_grad;  // GPT-2's N(0, 0.02) start
            wte->weight.mul_(0.02);
            wpe->weight.mul_(0.01);
        }
        auto h = register_module("h", std::make_shared<nn::Sequential>());
        for (int64_t i = 0; i < c.layers; ++i) h->push_back(std::make_shared<GptBlock>(c.d_model, c.heads));
        blocks = h;
        ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(Shape{c.d_model}));
        // The head is tied to wte: one tensor registered under two names, so parameters() and
        // state_dict() list it once (as wte.weight) and load_state_dict() takes either name
        // (PyTorch ports of GPT-2 save both).
        lm_head = register_module("lm_head", std::make_shared<nn::Linear>(c.d_model, c.vocab_size, false));
        lm_head->unregister("weight");
        lm_head->weight = lm_head->register_parameter("weight", wte->weight);
    }
    // tokens: int64 [B, T] (T <= max_positions) -> logits [B, T, vocab]; the head is wte's weight.
    Tensor forward(const Tensor& tokens) override {
        KILN_CHECK(tokens.dim() == 2 && tokens.size(1) <= config.max_positions, "Gpt: expected tokens [B, T] with T <= ",
                   config.max_positions, ", got ", tokens.shape());
        Tensor positions = arange(double(tokens.size(1)), {.dtype = DType::int64, .device = tokens.device()});
        Tensor x = wte->forward(tokens) + wpe->forward(positions);
        x = ln_f->forward(blocks->forward(x));
        return lm_head->forward(x);
    }

    GptConfig config;
    std::shared_ptr<nn::Embedding> wte, wpe;
    std::shared_ptr<nn::Sequential> blocks;
    std::shared_ptr<nn::LayerNorm> ln_f;
    std::shared_ptr<nn::Linear> lm_head;  // weight is wte->weight
};

}  // namespace kiln::models
