#!/usr/bin/env python3
"""Joins bench_models' and torch_models.py's JSON into one markdown table.
    python3 bench/compare_models.py kiln.json torch.json"""
import json
import sys

kiln, torch = (json.load(open(p)) for p in sys.argv[1:3])
key = lambda r: (r["model"], r["task"], r["threads"], r["mode"])
k = {key(r): r for r in kiln["rows"]}
t = {key(r): r for r in torch.get("rows", [])}
version = next((r.get("torch") for r in t.values() if r.get("torch")), "?")
print(f"milliseconds per call (median); first call in seconds; PyTorch {version}\n")
print("| model | task | threads | kiln eager | kiln compiled | torch eager | torch.compile | compiled: kiln vs torch | kiln compiled vs eager "
      "| first call: kiln compiled | first call: torch.compile | steps' peak RSS MB, kiln eager / compiled | steps' peak RSS MB, torch eager / compiled |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def ms(table, model, task, threads, mode):
    return table.get((model, task, threads, mode), {}).get("ms", float("nan"))


for model, task, threads in sorted({(m, ta, th) for (m, ta, th, _) in k}, key=lambda x: (x[0], x[1], x[2])):
    ke, kc = ms(k, model, task, threads, "eager"), ms(k, model, task, threads, "compiled")
    te, tc = ms(t, model, task, threads, "eager"), ms(t, model, task, threads, "compiled")
    kcr = k.get((model, task, threads, "compiled"), {})
    ker = k.get((model, task, threads, "eager"), {})
    tcr = t.get((model, task, threads, "compiled"), {})
    ter = t.get((model, task, threads, "eager"), {})
    cache = "cold" if threads == 1 else "warm"
    print(f"| {model} | {task} | {threads} | {ke:.1f} | {kc:.1f} | {te:.1f} | {tc:.1f} | {tc / kc:.2f}x | {ke / kc:.2f}x "
          f"| {kcr.get('first_call_s', float('nan')):.2f} ({cache}) | {tcr.get('first_call_s', float('nan')):.2f} "
          f"| {ker.get('steps_peak_rss_mb', float('nan')):.0f} / {kcr.get('steps_peak_rss_mb', float('nan')):.0f} "
          f"| {ter.get('steps_peak_rss_mb', float('nan')):.0f} / {tcr.get('steps_peak_rss_mb', float('nan')):.0f} |")

# The whole training step captured as one CUDA graph (bench_models --cuda and torch_models.py
# --cuda: modes "graphed", "compiled_graphed"), beside the other modes, where those rows exist.
graphed = sorted({(m, ta, th) for (m, ta, th, mode) in k if mode.endswith("graphed")})
if graphed:
    print("\nwhole training step as one CUDA graph (kiln: cuda::GraphedStep; torch: torch.cuda.graph), ms per step; "
          "operations = what kiln's stream got per step\n")
    print("| model | task | kiln eager | kiln compiled | kiln graphed | kiln compiled + graphed | torch.compile | torch graphed "
          "| torch compiled + graphed | kiln's best vs torch's best | kiln operations per step: eager / graphed |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for model, task, threads in graphed:
        row = lambda table, mode: ms(table, model, task, threads, mode)
        modes = ("eager", "compiled", "graphed", "compiled_graphed")
        kv, tv = [row(k, m) for m in modes], [row(t, m) for m in modes]
        best = lambda v: min((x for x in v if x == x), default=float("nan"))
        ops = lambda mode: k.get((model, task, threads, mode), {}).get("per_step", {}).get("operations", float("nan"))
        print(f"| {model} | {task} | {kv[0]:.2f} | {kv[1]:.2f} | {kv[2]:.2f} | {kv[3]:.2f} | {tv[1]:.2f} | {tv[2]:.2f} | {tv[3]:.2f} "
              f"| {best(tv) / best(kv):.2f}x | {ops('eager'):.0f} / {ops('graphed'):.0f} |")
