#!/usr/bin/env python3
"""PyTorch eager and torch.compile on the CPU, on bench/cpu_codegen.cpp's workloads.

Prints one JSON object (same workload names, numel and thread counts as bench_cpu_codegen),
so bench/compare.py can put kiln and PyTorch side by side. PyTorch is a benchmark reference
only: nothing in kiln's build or tests needs it.
"""
import json
import statistics
import sys
import time

try:
    import torch
except ImportError:
    print(json.dumps({"bench": "torch_cpu", "error": "torch is not installed (pip install torch)"}))
    sys.exit(0)

REPS = 7


def median_ns(fn):
    fn()
    times = []
    for _ in range(REPS):
        t0 = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t0)
    return statistics.median(times)


def sin_cos(x, y):
    return torch.sin(x) + torch.cos(y)


def gelu(x, y):
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def modified_sigmoid(x, y):
    x = 1.0 / (torch.exp(-x) + 5)
    if x.mean() > 0.5:
        x = x / 1.1
    return x * y


def exp_chain(x, y):
    return torch.exp(torch.exp(x * 0.1) * 0.1 - 1.0)


def softmax_rows(x, y):
    e = torch.exp(x - x.amax(1, keepdim=True))
    return e / e.sum(1, keepdim=True)


def layernorm_rows(x, y):
    mu = x.mean(1, keepdim=True)
    d = x - mu
    return d * torch.rsqrt((d * d).mean(1, keepdim=True) + 1e-5)


WORKLOADS = [
    ("sin_plus_cos", sin_cos, False), ("gelu_chain", gelu, False),
    ("modified_sigmoid", modified_sigmoid, False), ("exp_chain", exp_chain, False),
    ("softmax_rows_4096x1024", softmax_rows, True), ("layernorm_rows_4096x1024", layernorm_rows, True),
]


def main():
    out = {"bench": "torch_cpu", "torch": torch.__version__, "stat": "median", "reps": REPS,
           "compile": [], "throughput": []}
    with torch.no_grad():
        for name, fn, rows in WORKLOADS:
            x = torch.randn(4096, 1024) if rows else torch.randn(1_000_000)
            y = torch.randn_like(x)
            torch._dynamo.reset()
            f = torch.compile(fn)
            t0 = time.perf_counter()
            f(x, y)
            out["compile"].append({"workload": name, "cold_first_call_s": time.perf_counter() - t0})
        for n in (1_000_000, 10_000_000):
            for threads in (1, 2):
                torch.set_num_threads(threads)
                for name, fn, rows in WORKLOADS:
                    if rows and n != 10_000_000:
                        continue
                    x = torch.randn(4096, 1024) if rows else torch.randn(n)
                    y = torch.randn_like(x)
                    f = torch.compile(fn)
                    numel = x.numel()
                    out["throughput"].append({
                        "workload": name, "numel": numel, "threads": threads,
                        "eager_ns_per_elem": median_ns(lambda: fn(x, y)) / numel,
                        "compiled_ns_per_elem": median_ns(lambda: f(x, y)) / numel,
                    })
    print(json.dumps(out))


if __name__ == "__main__":
    main()
