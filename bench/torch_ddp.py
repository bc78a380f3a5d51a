#!/usr/bin/env python3
"""PyTorch's side of bench/ddp.cpp: torch.nn.parallel.DistributedDataParallel's step time on
1 rank and on N (weak scaling: the same batch per rank), printed as one JSON object in
bench_ddp's keys. The models are bench_ddp's: torchvision's ResNet-18 (1000 classes, 224x224
by default) and the GPT decoder of bench/torch_models.py in kiln's models/gpt.h sizes
(vocab 256, 128 positions, 4 layers, d 256, 4 heads). Eager or torch.compile
(`--compiled`: DDP(torch.compile(model)), Dynamo splits the graph at DDP's buckets).

Like bench_ddp, it runs itself through torchrun once per world size:

    python3 bench/torch_ddp.py --model resnet18 --device cuda --batch 32 --nproc 1,2,4 [--compiled]
    python3 bench/torch_ddp.py --model gpt --device cuda --batch 8 --nproc 1,2,4 [--compiled] [--graph]
    python3 bench/torch_ddp.py --model mlp --device cpu --nproc 1,2      # gloo, a CPU check

NCCL for cuda, gloo for cpu. bench/compare_ddp.py joins its output with bench_ddp's.
PyTorch is a benchmark reference only: nothing in kiln's build or tests needs it.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

from torch_gpt import make_gpt


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="mlp", choices=["mlp", "resnet18", "gpt"])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--nproc", default="1,2", help="world sizes, comma-separated")
    p.add_argument("--batch", type=int, default=32, help="examples per rank")
    p.add_argument("--image", type=int, default=224, help="resnet18's image size")
    p.add_argument("--seq", type=int, default=128, help="gpt's sequence length")
    p.add_argument("--steps", type=int, default=10, help="timed steps (median)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (compiling)")
    p.add_argument("--bucket-cap-mb", type=float, default=25, help="DDP's bucket size")
    p.add_argument("--compiled", action="store_true", help="DDP(torch.compile(model))")
    p.add_argument("--capture-timeout", type=float, default=100,
                   help="--graph: seconds the warm-up and capture may take before the rank exits with its stacks")
    p.add_argument("--graph", action="store_true",
                   help="each rank's whole step captured as one CUDA graph (torch.cuda.graph, as bench_ddp --graph)")
    p.add_argument("--worker", action="store_true", help="internal: one rank of a run")
    return p.parse_args(argv)


def make_model(a):
    import torch
    import torch.nn as nn

    if a.model == "resnet18":
        from torchvision.models import resnet18

        return resnet18(num_classes=1000)
    if a.model == "mlp":  # bench_ddp's mlp
        return nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 10))

    # models/gpt.h's decoder (bench/torch_gpt.py)
    return make_gpt(vocab=256)


def worker(a):
    """One rank: DDP steps (forward, backward with the all-reduces, SGD); rank 0 prints a line."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    cuda = a.device == "cuda"
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local_rank)
    if a.graph and not cuda:
        sys.exit("torch_ddp: --graph needs --device cuda")
    if a.graph:  # the torch.cuda.graph docs' recipe for DDP: no async error handling in NCCL
        os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "0"
        os.environ["NCCL_ASYNC_ERROR_HANDLING"] = "0"
    dist.init_process_group("nccl" if cuda else "gloo")
    dev = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    # Like for like with kiln: exact float32 unless KILN_CUDNN_TF32=1 (as bench/torch_models.py).
    torch.backends.cudnn.allow_tf32 = os.environ.get("KILN_CUDNN_TF32") == "1"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    net = make_model(a).to(dev)
    if a.model == "gpt":
        x = torch.randint(0, 256, (a.batch, a.seq), device=dev)
        y = torch.randint(0, 256, (a.batch * a.seq,), device=dev)
    else:
        shape = (a.batch, 3, a.image, a.image) if a.model == "resnet18" else (a.batch, 1024)
        x = torch.randn(*shape, device=dev)
        y = torch.randint(0, 10, (a.batch,), device=dev)
    model = torch.compile(net) if a.compiled else net
    side = torch.cuda.Stream() if a.graph else None
    if side is not None:  # the docs: DDP built, and warmed up 11 steps, on a side stream before the capture
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            ddp = DDP(model, device_ids=[local_rank], bucket_cap_mb=a.bucket_cap_mb)
    else:
        ddp = DDP(model, device_ids=[local_rank] if cuda else None, bucket_cap_mb=a.bucket_cap_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def train_step():
        out = ddp(x)
        if a.model == "gpt":
            out = out.reshape(-1, out.size(-1))
        F.cross_entropy(out, y).backward()
        opt.step()

    def step():
        opt.zero_grad()
        train_step()
        sync()

    if side is not None:
        # A hang in the warm-up or the capture (one was seen on 4 H100s: no output within 150 s)
        # ends the rank with every thread's Python stack instead of waiting for the launcher.
        import faulthandler
        faulthandler.dump_traceback_later(a.capture_timeout, exit=True)
        print(f"torch_ddp rank {dist.get_rank()}: 11 warm-up steps on a side stream", file=sys.stderr, flush=True)
        with torch.cuda.stream(side):
            for _ in range(11):
                opt.zero_grad(set_to_none=True)
                train_step()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        dist.barrier()  # every rank's warm-up collectives done before any rank captures
        torch.cuda.synchronize()
        print(f"torch_ddp rank {dist.get_rank()}: capturing", file=sys.stderr, flush=True)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        # Captured on the stream DDP was built and warmed up on: the autograd engine's
        # AccumulateGrad nodes keep the stream they first ran on, and a capture on another
        # stream makes them wait for one outside the capture (Megatron-LM's fix for full-step
        # graphs with DDP, NVIDIA/Megatron-LM#6021).
        with torch.cuda.graph(graph, stream=side):
            train_step()
        torch.cuda.synchronize()
        faulthandler.cancel_dump_traceback_later()
        print(f"torch_ddp rank {dist.get_rank()}: captured", file=sys.stderr, flush=True)

        def step():
            graph.replay()
            sync()

    times = []
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        step()
        if i >= a.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    if dist.get_rank() == 0:
        # PyTorch's DDP does not report its all-reduce wait: -1 where bench_ddp gives one.
        print(json.dumps({"world_size": dist.get_world_size(), "step_ms": round(times[len(times) // 2], 3),
                          "allreduce_wait_ms": -1}), flush=True)
    dist.destroy_process_group()


def torchrun():
    exe = shutil.which("torchrun")
    return [exe] if exe else [sys.executable, "-m", "torch.distributed.run"]


def main(argv):
    a = parse(argv)
    if a.worker:
        worker(a)
        return 0
    try:
        import torch
    except ImportError:
        print(json.dumps({"bench": "torch_ddp", "error": "torch is not installed (pip install torch torchvision)"}))
        return 1
    runs = []
    for n in [int(s) for s in a.nproc.split(",") if s]:
        cmd = torchrun() + ["--standalone", f"--nproc-per-node={n}", os.path.abspath(__file__), "--worker",
                            "--model", a.model, "--device", a.device, "--batch", str(a.batch), "--image", str(a.image),
                            "--seq", str(a.seq), "--steps", str(a.steps), "--warmup", str(a.warmup),
                            "--bucket-cap-mb", str(a.bucket_cap_mb)] + (["--compiled"] if a.compiled else [])
        if a.graph:
            cmd += ["--graph", "--capture-timeout", str(a.capture_timeout)]
        env = dict(os.environ)
        if a.device == "cpu":  # n ranks share the cores, as bench_ddp's MPI ranks do
            env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // n)))
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        lines = [line for line in p.stdout.splitlines() if line.startswith("{") and "step_ms" in line]
        if p.returncode != 0 or not lines:
            sys.stderr.write(f"torch_ddp: the run on {n} rank(s) failed: {' '.join(cmd)}\n{p.stdout}{p.stderr}")
            return 1
        runs.append(json.loads(lines[-1]))
    eff = {}
    if runs and runs[0]["world_size"] == 1:
        eff = {str(r["world_size"]): runs[0]["step_ms"] / r["step_ms"] for r in runs}
    print(json.dumps({"bench": "torch_ddp", "model": a.model, "device": a.device, "compiled": a.compiled, "graph": a.graph,
                      "batch_per_rank": a.batch, "runs": runs, "scaling_efficiency": eff, "torch": torch.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
