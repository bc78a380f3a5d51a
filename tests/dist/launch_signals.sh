#!/bin/sh
# `kiln launch` forwards SIGTERM: every rank's program gets it (each says so and exits 7),
# and the launcher ends with 128 + 15. $1: kiln, $2: --mpi mode.
kiln=$1 mode=$2
out=$(mktemp)
marks=$(mktemp -d)  # each rank's trap leaves a file: under mpirun a rank's stderr can be cut
export LAUNCH_TEST_MARKS="$marks"  # off when mpirun tears the job down after rank 0 exits
"$kiln" launch --nproc 2 --mpi "$mode" sh -c 'trap "echo rank $RANK got TERM >&2; touch $LAUNCH_TEST_MARKS/term.$RANK; exit 7" TERM; echo "rank $RANK up" >&2; sleep 30 & wait' >"$out" 2>&1 &
pid=$!
for i in $(seq 1 100); do  # until both ranks are up (at most 10 s)
  [ "$(grep -c ' up' "$out")" = 2 ] && break
  sleep 0.1
done
kill -TERM $pid
wait $pid
rc=$?
cat "$out"
for r in 0 1; do sleep_left=20  # a rank's trap may still be running when the launcher returns
  while [ ! -e "$marks/term.$r" ] && [ $sleep_left -gt 0 ]; do sleep 0.1; sleep_left=$((sleep_left - 1)); done
done
[ -e "$marks/term.0" ] && [ -e "$marks/term.1" ] || { echo "launch_signals: a rank did not get SIGTERM ($(ls "$marks"))"; exit 1; }
rm -rf "$marks"
[ "$rc" = 143 ] || { echo "launch_signals: expected exit status 143, got $rc"; exit 1; }
grep -q "got signal 15" "$out" || { echo "launch_signals: the launcher did not say it passed the signal on"; exit 1; }
echo "launch_signals ($mode): ok"
