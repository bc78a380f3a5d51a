# PyTorch F.conv2d on the 11 convolution shapes of ResNet-18 224x224 (batch 8), NCHW and
# channels_last, min of 7 calls each, and the per-call sum over the 20 convolutions; compare
# with ONEDNN_VERBOSE=1 build/bench_models --part resnet18_224 compiled infer 1 cpu
# (docs/perf-models.md, "Channels-last between convolutions").
#   OMP_WAIT_POLICY=passive python3 bench/torch_conv_shapes.py [threads]
import torch, time, sys
torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
shapes = [  # (C, O, H, k, s, count per call)
    (3, 64, 224, 7, 2, 1), (64, 64, 56, 3, 1, 4), (64, 128, 56, 3, 2, 1), (64, 128, 56, 1, 2, 1),
    (128, 128, 28, 3, 1, 3), (128, 256, 28, 3, 2, 1), (128, 256, 28, 1, 2, 1), (256, 256, 14, 3, 1, 3),
    (256, 512, 14, 3, 2, 1), (256, 512, 14, 1, 2, 1), (512, 512, 7, 3, 1, 3)]
tot = {"nchw": 0, "cl": 0}
with torch.no_grad():
    for C, O, H, k, s, n in shapes:
        row = []
        for fmt in ("nchw", "cl"):
            x = torch.randn(8, C, H, H); w = torch.randn(O, C, k, k)
            if fmt == "cl": x = x.to(memory_format=torch.channels_last); w = w.to(memory_format=torch.channels_last)
            f = lambda: torch.nn.functional.conv2d(x, w, None, s, k // 2)
            for _ in range(3): f()
            ts = []
            for _ in range(7):
                t0 = time.perf_counter(); f(); ts.append((time.perf_counter() - t0) * 1e3)
            m = min(ts); row.append(m); tot[fmt] += m * n
        print(f"C{C} O{O} H{H} k{k} s{s} x{n}: nchw {row[0]:.2f} ms, channels_last {row[1]:.2f} ms")
print("per call (min x count):", {k: round(v, 1) for k, v in tot.items()})
