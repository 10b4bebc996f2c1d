#!/bin/sh
# The search on a machine wider than two CPUs: workloads/ompwork (OpenMP, spinning barriers)
# with THREADS threads, first on the idle machine, then beside a spinning loop on each of
# the first BUSY CPUs. `autopin compare` runs the sides interleaved in random order: the OS
# placement (none), fixed pinnings, and `autopin run` with its defaults (topology
# candidates, the OS placement among them, the objective it finds). Idle, the fixed pinnings
# are compact and scatter; beside the busy CPUs, the THREADS CPUs after them (compact and
# scatter would put spinning barrier threads on the busy CPUs: 6 s to 2 min a run instead of
# 3 s on a 16-CPU machine, with no bound on how long). Printed:
# compare's table (medians, speed-ups with intervals, verdicts) for each setting, and the
# decision lines of one `autopin run` beside the busy CPUs. Nothing is written outside a
# temporary folder; RESULTS=DIR keeps the reports and the JSON of each comparison there.
# usage: bench/wide.sh [THREADS] [BUSY] [RUNS] [ROUNDS]
#   (default: half the CPUs, a quarter of them busy, 5 runs a side, 125000 barrier rounds)
# AUTOPIN=path picks the binary (default target/release/autopin, else the one on PATH).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# nproc honours OMP_NUM_THREADS: the CPUs this process may use, whatever that says.
N=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
THREADS=${1:-$((N / 2))}
BUSY=${2:-$((N / 4))}
RUNS=${3:-5}
ROUNDS=${4:-125000}
AUTOPIN=${AUTOPIN:-$ROOT/target/release/autopin}
[ -x "$AUTOPIN" ] || AUTOPIN=$(command -v autopin)
W=$(mktemp -d)
OUTDIR=${RESULTS:-$W}
BUSY_PIDS=""
cleanup() { for p in $BUSY_PIDS; do kill "$p" 2>/dev/null || true; done; rm -rf "$W"; }
trap cleanup EXIT
OMPWORK=${OMPWORK:-}
if [ -z "$OMPWORK" ]; then
  gcc -O2 -fopenmp -o "$W/ompwork" "$ROOT/workloads/ompwork.c"
  OMPWORK=$W/ompwork
fi
export OMP_NUM_THREADS=$THREADS AUTOPIN_MEMORY=off
P="$OMPWORK -m imbalance -r $ROUNDS"
echo "$N CPUs, $THREADS OpenMP threads, $RUNS runs a side; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
side() { # $1: label; the rest: the fixed pinnings
  label=$1
  shift
  echo "== $label"
  fixed=""
  for f in "$@"; do fixed="$fixed --strategy $f"; done
  "$AUTOPIN" compare -q -r "$RUNS" --seed 1 --strategy none $fixed --strategy autopin \
    --export-json "$OUTDIR/$label.json" -- $P
}
side idle compact scatter
i=0
while [ "$i" -lt "$BUSY" ]; do
  taskset -c "$i" sh -c 'while :; do :; done' &
  BUSY_PIDS="$BUSY_PIDS $!"
  i=$((i + 1))
done
sleep 0.5
side "busy-cpus-0-$((BUSY - 1))" "$BUSY-$((BUSY + THREADS - 1))"
echo "== one autopin run beside the busy CPUs"
"$AUTOPIN" run --report "$OUTDIR/busy-run.json" -- $P 2>&1 >/dev/null |
  grep -E 'search [0-9]+:|probe |decided|winner|final pinning' | cut -c1-200
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
