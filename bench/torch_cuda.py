# PyTorch's side of bench/cuda_eager.cpp on the same GPU: the same ops and sizes, eager and
# torch.compile, best of 20 after a warm-up. Prints one JSON object. Needs torch with CUDA.
import json
import torch

def best_ms(f, reps=20):
    f()
    torch.cuda.synchronize()
    best = 1e30
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        f()
        e.record()
        torch.cuda.synchronize()
        best = min(best, s.elapsed_time(e))
    return best

n = 1 << 26
x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
dst = torch.empty(n, device="cuda")
m = torch.randn(4096, 4096, device="cuda")
a, b = torch.randn(4096, 4096, device="cuda"), torch.randn(4096, 4096, device="cuda")
sig_c = torch.compile(torch.sigmoid)
out = {
    "bench": "torch_cuda", "torch": torch.__version__, "device": torch.cuda.get_device_name(),
    "copy_ms": best_ms(lambda: dst.copy_(x)),
    "sigmoid_ms": best_ms(lambda: torch.sigmoid(x)),
    "sigmoid_compiled_ms": best_ms(lambda: sig_c(x)),
    "add_ms": best_ms(lambda: x + y),
    "sum_rows_4096x4096_ms": best_ms(lambda: m.sum(1)),
    "softmax_4096x4096_ms": best_ms(lambda: m.softmax(1)),
    "matmul_4096_ms": best_ms(lambda: a @ b, 5),
}
print(json.dumps(out))
