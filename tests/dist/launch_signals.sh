#!/bin/sh
# `kiln launch` forwards SIGTERM: every rank's program gets it (each says so and exits 7),
# and the launcher ends with 128 + 15. $1: kiln, $2: --mpi mode.
kiln=$1 mode=$2
out=$(mktemp)
"$kiln" launch --nproc 2 --mpi "$mode" sh -c 'trap "echo rank $RANK got TERM >&2; exit 7" TERM; echo "rank $RANK up" >&2; sleep 30 & wait' >"$out" 2>&1 &
pid=$!
for i in $(seq 1 100); do  # until both ranks are up (at most 10 s)
  [ "$(grep -c ' up' "$out")" = 2 ] && break
  sleep 0.1
done
kill -TERM $pid
wait $pid
rc=$?
cat "$out"
grep -q "rank 0 got TERM" "$out" && grep -q "rank 1 got TERM" "$out" || { echo "launch_signals: a rank did not get SIGTERM"; exit 1; }
[ "$rc" = 143 ] || { echo "launch_signals: expected exit status 143, got $rc"; exit 1; }
grep -q "got signal 15" "$out" || { echo "launch_signals: the launcher did not say it passed the signal on"; exit 1; }
echo "launch_signals ($mode): ok"
