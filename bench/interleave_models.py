#!/usr/bin/env python3
"""Runs one bench_models part in many fresh processes, variants interleaved (A B T, B T A, ...),
and prints each variant's distribution over processes with the load average at each run: for
telling a change from this shared machine's between-process spread (docs/perf-models.md).

    python3 bench/interleave_models.py [--rounds 10] [--reps 20] MODEL MODE TASK THREADS \\
        LABEL=SPEC [LABEL=SPEC ...]

SPEC is `torch` (bench/torch_models.py), or a bench_models binary, optionally preceded by
environment settings separated by commas: `build/bench_models`,
`KILN_GEMM=openblas,build/bench_models`. Every process runs with OMP_WAIT_POLICY=passive
(unless the environment sets it) and KILN_BENCH_STEPS=1; `--json FILE` keeps every run.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def load1():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def command(spec, part, threads, reps):
    env = dict(os.environ, KILN_BENCH_STEPS="1", KILN_BENCH_REPS=str(reps))
    env.setdefault("OMP_WAIT_POLICY", "passive")
    *settings, what = spec.split(",")
    for s in settings:
        k, _, v = s.partition("=")
        env[k] = v
    if what == "torch":
        env["OMP_NUM_THREADS"] = str(threads)
        return [sys.executable, os.path.join(HERE, "torch_models.py"), "--part", *part, "cpu"], env
    env["KILN_NUM_THREADS"] = env["OPENBLAS_NUM_THREADS"] = str(threads)
    return [what, "--part", *part, "cpu"], env


def quartiles(xs):
    xs = sorted(xs)
    q = lambda f: xs[min(len(xs) - 1, int(f * (len(xs) - 1) + 0.5))]
    return f"min {xs[0]:.1f}  q1 {q(0.25):.1f}  median {statistics.median(xs):.1f}  q3 {q(0.75):.1f}  max {xs[-1]:.1f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json")
    ap.add_argument("model")
    ap.add_argument("mode")
    ap.add_argument("task")
    ap.add_argument("threads", type=int)
    ap.add_argument("variants", nargs="+")
    a = ap.parse_args()
    variants = [v.split("=", 1) for v in a.variants]  # LABEL=SPEC
    part = [a.model, a.mode, a.task, str(a.threads)]
    runs = {label: [] for label, _ in variants}
    for r in range(a.rounds):
        # Each round starts one variant later (A B T, B T A, T A B, ...): a variant that always
        # ran right after another measured up to 10% apart from it with the same kernels
        # (docs/perf-models.md, "Self-attention's packed projection"), so no variant keeps a place.
        shift = r % len(variants)
        for label, spec in variants[shift:] + variants[:shift]:
            cmd, env = command(spec, part, a.threads, a.reps)
            before = load1()
            p = subprocess.run(cmd, capture_output=True, text=True, env=env)
            lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
            if p.returncode != 0 or not lines:
                print(f"{label}: failed: {p.stderr.strip()[-300:]}", file=sys.stderr)
                continue
            row = json.loads(lines[-1])
            row["load1"] = [before, load1()]
            runs[label].append(row)
            steps = row.get("steps_ms", [])
            print(f"round {r} {label:>10}: ms {row['ms']:7.2f}  cpu_ms {row['cpu_ms']:7.2f}  main_cpu_ms {row['main_cpu_ms']:7.2f}"
                  f"  steps {min(steps):.1f}-{max(steps):.1f}  load {before:.2f}", flush=True)
    print()
    for label, rows in runs.items():
        if not rows:
            continue
        print(f"{label:>10} wall   : {quartiles([x['ms'] for x in rows])}")
        print(f"{label:>10} cpu    : {quartiles([x['cpu_ms'] for x in rows])}")
        print(f"{label:>10} main   : {quartiles([x['main_cpu_ms'] for x in rows])}")
        print(f"{label:>10} load1  : {quartiles([x['load1'][0] for x in rows])}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(runs, f, indent=1)


if __name__ == "__main__":
    main()
