#!/usr/bin/env python3
"""PyTorch's side of bench/models.cpp on the CPU: the same models (torchvision's ResNet-18,
and a GPT-style decoder written like models/gpt.h), shapes, tasks and thread counts, in
eager mode and under torch.compile. Each measurement runs in a subprocess of its own, so its
peak RSS is its own. Prints one JSON object; bench/compare_models.py joins it with kiln's.

    python3 bench/torch_models.py [--quick] [--cuda]
On the GPU the training step also runs "graphed" (the eager step captured whole with
torch.cuda.graph) and "compiled_graphed" (the torch.compile'd model's step captured the same
way), beside bench_models' modes of those names. One part alone, with one more mode,
"reduce-overhead" (torch.compile(mode="reduce-overhead"): PyTorch's CUDA graphs per graph):
    python3 bench/torch_models.py --part gpt reduce-overhead train 1 cuda

PyTorch is a benchmark reference only: nothing in kiln's build or tests needs it.
"""
import json
import os
import resource
import subprocess
import sys
import time

from torch_gpt import make_gpt


def build(model):
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    if model.startswith("resnet18"):
        from torchvision.models import resnet18

        side = 224 if model == "resnet18_224" else 32
        net = resnet18(num_classes=1000)
        x = torch.randn(8, 3, side, side)
        target = torch.randint(0, 1000, (8,))
        return net, x, target, (3 if side == 224 else 10)

    # models/gpt.h's decoder (bench/torch_gpt.py)
    net = make_gpt(vocab=1024)
    x = torch.randint(0, 1024, (8, 128))
    target = torch.randint(0, 1024, (8 * 128,))
    return net, x, target, 5


def run_part(model, mode, task, threads, device="cpu"):
    import torch

    torch.set_num_threads(threads)
    # Like for like with kiln: exact float32 convolutions unless KILN_CUDNN_TF32=1 (kiln's own
    # switch, docs/env.md) asks both for TF32, PyTorch's default for cuDNN convolutions.
    tf32 = os.environ.get("KILN_CUDNN_TF32") == "1"
    torch.backends.cudnn.allow_tf32 = tf32
    net, x, target, reps = build(model)
    net, x, target = net.to(device), x.to(device), target.to(device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    fwd = torch.compile(net) if mode in ("compiled", "compiled_graphed") else net
    if mode == "reduce-overhead":  # torch.compile's own CUDA graphs (cudagraph trees), per graph
        fwd = torch.compile(net, mode="reduce-overhead")
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    if task == "infer":
        net.eval()

        def call():
            with torch.no_grad():
                fwd(x)
            sync()
    else:
        net.train()

        def train_step():
            logits = fwd(x)
            loss = torch.nn.functional.cross_entropy(logits.reshape(target.size(0), -1), target)
            loss.backward()
            opt.step()

        def call():
            opt.zero_grad()
            train_step()
            sync()

        if mode.endswith("graphed"):
            # The whole step as one CUDA graph, as the torch.cuda.graph docs capture a training
            # step ("whole network capture"): warm-up on a side stream, grads set to None before
            # the capture (the captured backward allocates them from the graph's pool), replays.
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    opt.zero_grad(set_to_none=True)
                    train_step()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            opt.zero_grad(set_to_none=True)
            with torch.cuda.graph(graph):
                train_step()

            def call():
                graph.replay()
                sync()

    t0 = time.perf_counter()
    call()
    first_s = time.perf_counter() - t0
    call()
    process_peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # compiling included
    try:  # the steps' own peak: the high-water mark starts again from what is resident now
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        reset = True
    except OSError:
        reset = False
    # KILN_BENCH_REPS: more steps, as build/bench_models takes it; cpu_ms: the process's CPU
    # time per step (all threads), which a shared machine stretches less than wall time;
    # main_cpu_ms: the calling thread's alone (a floor for the wall time on an idle machine)
    reps = max(reps, int(os.environ.get("KILN_BENCH_REPS", "0")))
    times, cpu, main_cpu = [], [], []
    for _ in range(reps):
        t0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
        call()
        times.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
        main_cpu.append((time.thread_time() - m0) * 1e3)
    steps = [round(v, 2) for v in times]  # in order, before sorting (KILN_BENCH_STEPS=1)
    times.sort()
    cpu.sort()
    main_cpu.sort()
    steps_peak_mb = -1.0
    if reset:
        with open("/proc/self/status") as f:
            steps_peak_mb = next(float(line.split()[1]) / 1024.0 for line in f if line.startswith("VmHWM:"))
    extra = {"steps_ms": steps} if os.environ.get("KILN_BENCH_STEPS") == "1" else {}
    return {"model": model, "device": device, "mode": mode, "task": task, "threads": threads, "first_call_s": round(first_s, 3),
            "ms": round(times[len(times) // 2], 3), "min_ms": round(times[0], 3),
            "cpu_ms": round(cpu[len(cpu) // 2], 3),
            "main_cpu_ms": round(main_cpu[len(main_cpu) // 2], 3), "peak_rss_mb": round(process_peak_mb, 1),
            "steps_peak_rss_mb": round(steps_peak_mb, 1), "torch": torch.__version__, "cudnn_tf32": tf32, **extra}


def main():
    if len(sys.argv) == 7 and sys.argv[1] == "--part":
        print(json.dumps(run_part(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6])))
        return
    try:
        import torch  # noqa: F401
    except ImportError:
        print(json.dumps({"bench": "torch_models", "error": "torch is not installed (pip install torch torchvision)"}))
        return
    quick, device = "--quick" in sys.argv, "cuda" if "--cuda" in sys.argv else "cpu"
    models = ["resnet18_32", "gpt"] if quick else ["resnet18_224", "resnet18_32", "gpt"]
    rows = []
    for model in models:
        for task in ("infer", "train"):
            for threads in ((1,) if device == "cuda" else (1, 2)):
                for mode in ("eager", "compiled", "graphed", "compiled_graphed"):
                    if mode.endswith("graphed") and not (device == "cuda" and task == "train"):
                        continue  # the whole step as one CUDA graph: GPU training only
                    print(f"torch_models: {model} {task} {mode}, {threads} threads", file=sys.stderr, flush=True)
                    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
                    p = subprocess.run([sys.executable, __file__, "--part", model, mode, task, str(threads), device],
                                       capture_output=True, text=True, env=env)
                    lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
                    if p.returncode != 0 or not lines:
                        rows.append({"model": model, "mode": mode, "task": task, "threads": threads,
                                     "error": (p.stderr.strip().splitlines() or ["failed"])[-1][:300]})
                    else:
                        rows.append(json.loads(lines[-1]))
    print(json.dumps({"bench": "torch_models", "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
