#!/usr/bin/env bash
# The differential testers in parallel processes (one per core), each with its own seed, and
# the total of their "programs N, mismatches M" lines. For a many-core machine (the GPU one).
#   tests/gpu/fuzz.sh BUILD_DIR PROCS N SUITES [DEVICE]
#   e.g. tests/gpu/fuzz.sh build-gpu-check 16 1200 jit_differential:jit_differential_wide
#        tests/gpu/fuzz.sh build-gpu-check 16 320 jit_differential_wide cuda
# N is KILN_FUZZ_PROGRAMS per process (per backend; a tenth of it under inductor); process i
# uses KILN_FUZZ_SEED = KILN_FUZZ_SEED_BASE (default 500) + i.
set -uo pipefail
build=$(cd "$1" && pwd); procs=$2; n=$3; suites=$4; device=${5:-cpu}
logs="$build/fuzz-$device"
rm -rf "$logs" && mkdir -p "$logs"
start=$(date +%s)
for i in $(seq 1 "$procs"); do
  (cd "$build" && KILN_NUM_THREADS=1 KILN_FUZZ_DEVICE=$device KILN_FUZZ_PROGRAMS=$n KILN_FUZZ_SEED=$((${KILN_FUZZ_SEED_BASE:-500} + i)) \
     KILN_CACHE_DIR="$build/kernel-cache" ./test_jit --run_test="$suites" --log_level=message > "$logs/$i.log" 2>&1) &
done
wait
failed=$(grep -L "No errors detected" "$logs"/*.log | wc -l)
grep -h "jit differential" "$logs"/*.log | sort | awk '
  { split($0, a, ": programs "); split(a[2], b, ", mismatches "); p[a[1]] += b[1]; m[a[1]] += b[2] }
  END { for (k in p) { printf "%s: programs %d, mismatches %d\n", k, p[k], m[k]; tp += p[k]; tm += m[k] }
        printf "total: programs %d, mismatches %d\n", tp, tm }'
echo "== $procs processes, N=$n each, $device, $(( $(date +%s) - start )) s; processes with errors: $failed"
[ "$failed" -eq 0 ] || { grep -h -A3 "error" "$logs"/*.log | head -40; exit 1; }
