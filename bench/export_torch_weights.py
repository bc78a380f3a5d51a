#!/usr/bin/env python3
"""Builds kiln's two models in PyTorch, with the same names, and saves what kiln needs to
check that it computes what PyTorch computes from the same weights.

  python3 bench/export_torch_weights.py --out DIR [--num-classes 10] [--vocab-size 64 ...]

writes, for MODEL in resnet18 and gpt:
  DIR/MODEL/<key>.npy   every entry of model.state_dict() (kiln: nn::load_state_dict_npy)
  DIR/MODEL.input.npy   one input (resnet18: float32 [2, 3, 32, 32]; gpt: int64 tokens [2, 12])
  DIR/MODEL.logits.npy  the model's output for it, in eval mode

resnet18 is torchvision's (models/resnet.h has its layout), defined here when torchvision is
not installed. gpt mirrors models/gpt.h: wte, wpe, h.N.{ln_1, attn (nn.MultiheadAttention),
ln_2, mlp.c_fc, mlp.c_proj}, ln_f, and lm_head tied to wte (so its state dict names the head
twice, as PyTorch's GPT-2 ports do). Batch-norm statistics and affine parameters are
randomized so that eval mode is not the identity. NumPy is not needed (.npy is written by
hand). PyTorch is a reference here only: nothing in kiln's build or tests needs it
(tests/nn/test_state_dict.cpp runs this when python3 can import torch, and skips otherwise).
"""
import argparse
import ctypes
import os
import sys
import warnings

warnings.filterwarnings("ignore")  # "Failed to initialize NumPy" when NumPy is absent
try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    sys.exit("export_torch_weights.py: torch is not installed (pip install torch)")

NPY_DESCR = {torch.float32: "<f4", torch.float64: "<f8", torch.int64: "<i8", torch.bool: "|b1"}


def save_npy(t, path):
    """NPY v1.0, C order, little-endian: what np.save writes, without NumPy."""
    t = t.detach().cpu().contiguous().clone()  # a storage of exactly this tensor's bytes
    shape = tuple(t.shape)
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (NPY_DESCR[t.dtype], repr(shape))
    pad = (64 - (10 + len(header) + 1) % 64) % 64  # magic 6 + version 2 + length 2, data 64-aligned
    header += " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode("latin1"))
        # the bytes at once: bytes(t.untyped_storage()) reads them one Python call per byte
        # (ResNet-18's 45 MB took minutes, longer than the rest of test_nn)
        f.write(ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()) if t.numel() else b"")


# ---- ResNet-18: torchvision's, or the same layout here
class BasicBlock(nn.Module):
    def __init__(self, inp, out, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inp, out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out)
        self.conv2 = nn.Conv2d(out, out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out)
        self.downsample = None
        if stride != 1 or inp != out:
            self.downsample = nn.Sequential(nn.Conv2d(inp, out, 1, stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (self.downsample(x) if self.downsample is not None else x))


class ResNet18(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        inp = 64
        for stage in range(4):
            out = 64 << stage
            setattr(self, f"layer{stage + 1}", nn.Sequential(BasicBlock(inp, out, 1 if stage == 0 else 2), BasicBlock(out, out, 1)))
            inp = out
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        y = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        for stage in range(4):
            y = getattr(self, f"layer{stage + 1}")(y)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


def resnet18(num_classes):
    try:
        import torchvision

        return torchvision.models.resnet18(num_classes=num_classes), "torchvision"
    except ImportError:
        return ResNet18(num_classes), "defined inline (no torchvision)"


# ---- GPT: models/gpt.h
class Mlp(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.c_proj = nn.Linear(4 * d, d)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = Mlp(d)

    def forward(self, x):
        T = x.size(1)
        future = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)  # True: may not attend
        h = self.ln_1(x)
        y = x + self.attn(h, h, h, attn_mask=future, need_weights=False)[0]
        return y + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(y))))


class Gpt(nn.Module):
    def __init__(self, vocab_size, max_positions, layers, d_model, heads):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, d_model)
        self.wpe = nn.Embedding(max_positions, d_model)
        self.h = nn.Sequential(*[Block(d_model, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.size(1)))
        return self.lm_head(self.ln_f(self.h(x)))


def randomize(model):
    """Every parameter and buffer away from its initial value, so each one matters."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.uniform_(-0.5, 0.5)
            elif p.dim() == 1:  # batch/layer norm scales
                p.uniform_(0.5, 1.5)
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.num_batches_tracked.fill_(7)


def export(model, name, x, out):
    model.eval()
    with torch.no_grad():
        logits = model(x)
    os.makedirs(os.path.join(out, name), exist_ok=True)
    sd = model.state_dict()
    for key, t in sd.items():
        save_npy(t, os.path.join(out, name, key + ".npy"))
    save_npy(x, os.path.join(out, name + ".input.npy"))
    save_npy(logits, os.path.join(out, name + ".logits.npy"))
    return len(sd), tuple(logits.shape)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--num-classes", type=int, default=10)
    ap.add_argument("--vocab-size", type=int, default=64)
    ap.add_argument("--max-positions", type=int, default=16)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=32)
    ap.add_argument("--heads", type=int, default=4)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(min(2, torch.get_num_threads()))

    net, source = resnet18(a.num_classes)
    randomize(net)
    n, shape = export(net, "resnet18", torch.randn(2, 3, 32, 32), a.out)
    print(f"resnet18 ({source}): {n} state_dict entries, logits {list(shape)}")

    gpt = Gpt(a.vocab_size, a.max_positions, a.layers, a.d_model, a.heads)
    randomize(gpt)
    tokens = torch.randint(0, a.vocab_size, (2, min(12, a.max_positions)))
    n, shape = export(gpt, "gpt", tokens, a.out)
    print(f"gpt: {n} state_dict entries (lm_head.weight is wte.weight), logits {list(shape)}")


if __name__ == "__main__":
    main()
