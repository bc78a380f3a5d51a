# Joins bench_gpu's and torch_gpu.py's JSON (one object per file) into one markdown table.
#   python3 bench/compare_gpu.py kiln.json torch.json
import json
import sys

kiln, torch = (json.load(open(p)) for p in sys.argv[1:3])
by_name = {r["workload"]: r for r in torch["rows"]}
print(f"kiln on {kiln['device']}; PyTorch {torch['torch']} on {torch['device']}; microseconds (median)\n")
print("| workload | measure | kiln eager | kiln compiled | kiln reduce-overhead | torch eager | torch.compile | torch reduce-overhead | kiln best vs torch best |")
print("|---|---|---|---|---|---|---|---|---|")
for r in kiln["rows"]:
    t = by_name.get(r["workload"], {})
    best = min([v for k, v in t.items() if k.startswith("torch_") and k.endswith("_us")] or [float("nan")])
    ro = r.get("kiln_reduce_overhead_us", float("nan"))
    cells = [r["kiln_eager_us"], r["kiln_compiled_us"], ro, t.get("torch_eager_us", float("nan")),
             t.get("torch_compiled_us", float("nan")), t.get("torch_reduce_overhead_us", float("nan"))]
    kiln_best = min(r["kiln_compiled_us"], ro) if ro == ro else r["kiln_compiled_us"]
    print(f"| {r['workload']} | {r['measure']} | " + " | ".join(f"{c:.1f}" for c in cells) + f" | {best / kiln_best:.2f}x |")
