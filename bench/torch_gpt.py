"""The GPT-style decoder of models/gpt.h written in PyTorch, for the benches that compare with
PyTorch (bench/torch_models.py, bench/torch_ddp.py). Imports torch only when called."""


def make_gpt(vocab, positions=128, layers=4, d=256, heads=4):
    import torch
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.ln_1 = nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
            self.ln_2 = nn.LayerNorm(d)
            self.mlp = nn.Module()
            self.mlp.c_fc = nn.Linear(d, 4 * d)
            self.mlp.c_proj = nn.Linear(4 * d, d)

        def forward(self, x):
            h = self.ln_1(x)
            t = x.size(1)
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            y = x + self.attn(h, h, h, attn_mask=mask, need_weights=False, is_causal=True)[0]
            return y + self.mlp.c_proj(nn.functional.gelu(self.mlp.c_fc(self.ln_2(y))))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, d)
            self.wpe = nn.Embedding(positions, d)
            self.h = nn.Sequential(*[Block(d, heads) for _ in range(layers)])
            self.ln_f = nn.LayerNorm(d)

        def forward(self, tokens):
            pos = torch.arange(tokens.size(1), device=tokens.device)
            x = self.ln_f(self.h(self.wte(tokens) + self.wpe(pos)))
            return x @ self.wte.weight.t()

    return Gpt()
