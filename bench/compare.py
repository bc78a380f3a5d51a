#!/usr/bin/env python3
"""Side-by-side table: kiln (bench_cpu_codegen JSON) vs PyTorch (bench/torch_cpu.py JSON).

usage: compare.py KILN_JSON TORCH_JSON
Ratios > 1 mean kiln is faster. Both files come from the same machine and session.
"""
import json
import sys


def main():
    kiln = json.load(open(sys.argv[1]))
    torch = json.load(open(sys.argv[2]))
    if "error" in torch:
        print("PyTorch reference unavailable:", torch["error"])
        torch = {"throughput": [], "compile": []}
    ref = {(r["workload"], r["numel"], r["threads"]): r for r in torch["throughput"]}
    head = f"{'workload':28} {'numel':>9} {'thr':>3} {'kiln eager':>10} {'kiln comp':>10} {'torch eager':>11} " \
           f"{'torch.comp':>10} {'vs t.eager':>10} {'vs t.comp':>9} {'of memcpy':>9}"
    print("ns/element (median); 'vs' columns: torch time / kiln compiled time")
    print(head)
    print("-" * len(head))
    for r in kiln["throughput"]:
        t = ref.get((r["workload"], r["numel"], r["threads"]))
        te = f"{t['eager_ns_per_elem']:11.3f}" if t else f"{'-':>11}"
        tc = f"{t['compiled_ns_per_elem']:10.3f}" if t else f"{'-':>10}"
        ve = f"{t['eager_ns_per_elem'] / r['compiled_ns_per_elem']:10.2f}" if t else f"{'-':>10}"
        vc = f"{t['compiled_ns_per_elem'] / r['compiled_ns_per_elem']:9.2f}" if t else f"{'-':>9}"
        print(f"{r['workload']:28} {r['numel']:>9} {r['threads']:>3} {r['eager_ns_per_elem']:10.3f} "
              f"{r['compiled_ns_per_elem']:10.3f} {te} {tc} {ve} {vc} {r['fraction_of_memcpy_bandwidth']:9.2f}")
    tcomp = {r["workload"]: r["cold_first_call_s"] for r in torch["compile"]}
    print("\nfirst call (trace + compile), seconds")
    print(f"{'workload':28} {'kiln cold':>9} {'kiln warm':>9} {'torch cold':>10}")
    for r in kiln["compile"]:
        tc = tcomp.get(r["workload"])
        print(f"{r['workload']:28} {r['cold_first_call_s']:9.3f} {r['warm_first_call_s']:9.4f} "
              f"{(f'{tc:10.3f}' if tc is not None else f'{chr(45):>10}')}")


if __name__ == "__main__":
    main()
