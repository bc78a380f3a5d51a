#!/usr/bin/env python3
"""Joins bench_ddp's and bench/torch_ddp.py's JSON objects into one table: per model, mode
(eager, compiled) and world size, the step time of kiln and of PyTorch DDP, each one's
scaling efficiency (step time on 1 rank / on N, the same batch per rank) and kiln / PyTorch.

    build/bench_ddp --model resnet18 --device cuda --batch 32 --nproc 1,2,4 > ddp.jsonl
    python3 bench/torch_ddp.py --model resnet18 --device cuda --batch 32 --nproc 1,2,4 >> ddp.jsonl
    python3 bench/compare_ddp.py ddp.jsonl          # or: ... | python3 bench/compare_ddp.py

Each input line that starts with '{' is one object; other lines are ignored. Prints a
Markdown table (docs/perf.md's form).
"""
import json
import sys


def read(paths):
    objs = []
    for path in paths or ["-"]:
        f = sys.stdin if path == "-" else open(path)
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                o = json.loads(line)
                if o.get("bench") in ("ddp", "torch_ddp") and "runs" in o:
                    objs.append(o)
    return objs


def table(objs):
    # (model, device, compiled, batch) -> {"ddp": obj, "torch_ddp": obj}
    groups = {}
    for o in objs:
        key = (o["model"], o["device"], bool(o["compiled"]), o["batch_per_rank"])
        groups.setdefault(key, {})[o["bench"]] = o
    rows = ["| model | device | mode | batch/rank | GPUs | kiln ms | PyTorch ms | kiln eff. | PyTorch eff. | kiln / PyTorch |",
            "|---|---|---|---|---|---|---|---|---|---|"]

    def cell(v, fmt):
        return "–" if v is None else fmt.format(v)

    for (model, device, compiled, batch), g in sorted(groups.items()):
        by_n = {}
        for side in ("ddp", "torch_ddp"):
            o = g.get(side)
            for r in (o or {}).get("runs", []):
                n = r["world_size"]
                eff = (o.get("scaling_efficiency") or {}).get(str(n))
                by_n.setdefault(n, {})[side] = (r["step_ms"], eff)
        for n in sorted(by_n):
            k_ms, k_eff = by_n[n].get("ddp", (None, None))
            t_ms, t_eff = by_n[n].get("torch_ddp", (None, None))
            ratio = k_ms / t_ms if k_ms and t_ms else None
            rows.append(f"| {model} | {device} | {'compiled' if compiled else 'eager'} | {batch} | {n} | "
                        f"{cell(k_ms, '{:.2f}')} | {cell(t_ms, '{:.2f}')} | {cell(k_eff, '{:.0%}')} | "
                        f"{cell(t_eff, '{:.0%}')} | {cell(ratio, '{:.2f}')} |")
    return "\n".join(rows)


def main(argv):
    objs = read(argv)
    if not objs:
        sys.stderr.write("compare_ddp: no bench_ddp or torch_ddp objects in the input\n")
        return 1
    print(table(objs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
