# PyTorch's side of bench/gpu.cpp on the same GPU: the same workloads and sizes, eager,
# torch.compile (default) and torch.compile(mode="reduce-overhead"), timed the same way (CUDA
# events, median of 100 calls after warm-up; wall time per call for the tiny calls). Prints
# one JSON object. Needs torch with CUDA.
import json
import statistics
import time

import torch


def median_gpu_us(f, reps=100):
    for _ in range(10):
        f()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        f()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    return statistics.median(times)


def wall_us_per_call(f, calls=2000):
    for _ in range(50):
        f()
    torch.cuda.synchronize()
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            f()
        torch.cuda.synchronize()
        rounds.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(rounds)


def sin_cos(x, y):
    return torch.sin(x) + torch.cos(y)


def gelu(x, y):
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def modified_sigmoid(x, y):
    x = 1.0 / (torch.exp(-x) + 5)
    if x.mean() > 0.5:
        x = x / 1.1
    return x * y


def softmax_rows(x, y):
    return torch.softmax(x, 1)


def layernorm_rows(x, y):
    mu = x.mean(1, keepdim=True)
    d = x - mu
    return d * torch.rsqrt((d * d).mean(1, keepdim=True) + 1e-5)


def variants(fn):
    return {"eager": fn, "compiled": torch.compile(fn), "reduce_overhead": torch.compile(fn, mode="reduce-overhead")}


rows = []
n = 1 << 24
x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
dst = torch.empty(n, device="cuda")
copy_us = median_gpu_us(lambda: dst.copy_(x))
rows.append({"workload": "copy_16M", "measure": "gpu", "torch_eager_us": copy_us, "GBps": 2 * n * 4 / (copy_us * 1e3)})
for name, fn in [("sin_plus_cos_16M", sin_cos), ("gelu_16M", gelu), ("modified_sigmoid_16M", modified_sigmoid)]:
    row = {"workload": name, "measure": "gpu"}
    for k, f in variants(fn).items():
        row["torch_" + k + "_us"] = median_gpu_us(lambda: f(x, y))
    rows.append(row)
m = torch.randn(4096, 1024, device="cuda")
for name, fn in [("softmax_4096x1024", softmax_rows), ("layernorm_4096x1024", layernorm_rows)]:
    row = {"workload": name, "measure": "gpu"}
    for k, f in variants(fn).items():
        row["torch_" + k + "_us"] = median_gpu_us(lambda: f(m, m))
    rows.append(row)
# More row kernels (bench/gpu.cpp's names): torch eager layer_norm is PyTorch's fused kernel.
w, bias = torch.randn(1024, device="cuda"), torch.randn(1024, device="cuda")
scores = torch.randn(8, 12, 256, 256, device="cuda")
causal = torch.arange(256, device="cuda")[:, None] < torch.arange(256, device="cuda")[None, :]
for name, fn, args in [
    ("log_softmax_4096x1024", lambda x: torch.log_softmax(x, 1), (m,)),
    ("layer_norm_wb_4096x1024", lambda x, w, b: torch.nn.functional.layer_norm(x, (1024,), w, b), (m, w, bias)),
    ("attention_softmax_8x12x256x256",
     lambda s, mask: torch.softmax((s * 0.125).masked_fill(mask, float("-inf")), -1), (scores, causal)),
]:
    row = {"workload": name, "measure": "gpu"}
    for k, f in variants(fn).items():
        row["torch_" + k + "_us"] = median_gpu_us(lambda: f(*args))
    rows.append(row)
a, b = torch.randn(10, device="cuda"), torch.randn(10, device="cuda")
row = {"workload": "sin_plus_cos_n10_call", "measure": "wall"}
for k, f in variants(sin_cos).items():
    row["torch_" + k + "_us"] = wall_us_per_call(lambda: f(a, b))
rows.append(row)
rows.append({"workload": "one_eager_kernel_n10", "measure": "wall", "torch_eager_us": wall_us_per_call(lambda: torch.neg(a))})


def walk(a, b, c, d):
    return (a + b + c + d).cos().cos()


ins = [torch.randn(10, device="cuda", requires_grad=True) for _ in range(4)]
row = {"workload": "walkthrough_fwd_bwd_n10", "measure": "wall"}
for k, f in variants(walk).items():
    def step(f=f):
        for t in ins:
            t.grad = None
        f(*ins).sum().backward()
    row["torch_" + k + "_us"] = wall_us_per_call(step, 500)
rows.append(row)

torch.manual_seed(0)
ps = [(torch.randn(784, 512) * 0.03), torch.zeros(512), torch.randn(512, 512) * 0.03, torch.zeros(512),
      torch.randn(512, 10) * 0.03, torch.zeros(10)]
ps = [p.cuda().requires_grad_() for p in ps]
xb = torch.randn(256, 784, device="cuda")
onehot = torch.nn.functional.one_hot(torch.randint(0, 10, (256,)), 10).float().cuda()


def loss_fn(inp, t):
    h = torch.relu(inp @ ps[0] + ps[1])
    h = torch.relu(h @ ps[2] + ps[3])
    return -(torch.log_softmax(h @ ps[4] + ps[5], 1) * t).sum() * (1.0 / 256)


row = {"workload": "mlp_train_step_b256", "measure": "wall"}
for k, f in variants(loss_fn).items():
    def step(f=f):
        for p in ps:
            p.grad = None
        f(xb, onehot).backward()
        with torch.no_grad():
            for p in ps:
                p.add_(p.grad, alpha=-0.01)
    row["torch_" + k + "_us"] = wall_us_per_call(step, 200)
rows.append(row)
print(json.dumps({"bench": "torch_gpu", "torch": torch.__version__, "device": torch.cuda.get_device_name(), "rows": rows}))
