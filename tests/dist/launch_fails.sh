#!/bin/sh
# `kiln launch` when one rank fails: the launcher ends with that rank's exit code, stops the
# others (rank 0 would sleep 60 s) and shows the failing rank's error. $1: kiln, $2: --mpi mode.
kiln=$1 mode=$2
start=$(date +%s)
out=$("$kiln" launch --nproc 2 --mpi "$mode" sh -c 'if [ "$RANK" = 1 ]; then echo "boom from rank $RANK of $WORLD_SIZE" >&2; exit 3; fi; sleep 60' 2>&1)
rc=$?
elapsed=$(( $(date +%s) - start ))
echo "$out"
[ "$rc" = 3 ] || { echo "launch_fails: expected exit code 3, got $rc"; exit 1; }
echo "$out" | grep -q "rank 1 of 2 failed first (exit code 3)" || { echo "launch_fails: no report naming rank 1"; exit 1; }
echo "$out" | grep -q "boom from rank 1 of 2" || { echo "launch_fails: rank 1's error not shown"; exit 1; }
[ "$elapsed" -lt 30 ] || { echo "launch_fails: took $elapsed s: rank 0 was not stopped"; exit 1; }
echo "launch_fails ($mode): ok in $elapsed s"
