"""torch.matmul on GPT's GEMM shapes, as bench/gemm_shapes.cpp times kiln's matmul on them.

    OMP_WAIT_POLICY=passive python3 bench/torch_gemm_shapes.py THREADS [--reps N]

Milliseconds per call (the median of per-repetition medians of 20 calls); one JSON object.
"""
import json
import sys
import time

SHAPES = [  # name, batch, M, N, K, a read transposed, b read transposed (as bench/gemm_shapes.cpp)
    ("q/k/v/out_proj x @ W^T", 1, 1024, 256, 256, False, True),
    ("c_fc, lm_head x @ W^T", 1, 1024, 1024, 256, False, True),
    ("c_proj x @ W^T", 1, 1024, 256, 1024, False, True),
    ("dX of q/k/v/out_proj", 1, 1024, 256, 256, False, False),
    ("dX of c_fc", 1, 1024, 256, 1024, False, False),
    ("dX of c_proj", 1, 1024, 1024, 256, False, False),
    ("dW of q/k/v/out_proj", 1, 256, 256, 1024, True, False),
    ("dW of c_fc", 1, 1024, 256, 1024, True, False),
    ("dW of c_proj", 1, 256, 1024, 1024, True, False),
    ("attention q @ k^T, 32 heads", 32, 128, 128, 64, False, True),
    ("attention p @ v, 32 heads", 32, 128, 64, 128, False, False),
]


def main():
    import torch

    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 5
    torch.set_num_threads(threads)
    rows = []
    for name, batch, m, n, k, ta, tb in SHAPES:
        lead = (batch,) if batch > 1 else ()
        a = torch.randn(*lead, k, m).transpose(-2, -1) if ta else torch.randn(*lead, m, k)
        b = torch.randn(*lead, n, k).transpose(-2, -1) if tb else torch.randn(*lead, k, n)
        per_rep = []
        for _ in range(reps):
            torch.matmul(a, b)
            ms = []
            for _ in range(20):
                t0 = time.perf_counter()
                torch.matmul(a, b)
                ms.append((time.perf_counter() - t0) * 1e3)
            per_rep.append(sorted(ms)[len(ms) // 2])
        rows.append({"shape": name, "batch": batch, "M": m, "N": n, "K": k, "torch_ms": round(sorted(per_rep)[len(per_rep) // 2], 3)})
    print(json.dumps({"bench": "torch_gemm_shapes", "threads": threads, "torch": torch.__version__, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
