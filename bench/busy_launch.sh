#!/bin/sh
# A program launched beside CPUs already busy with other work, on a machine wider than two
# CPUs: autopin run against the pinning that avoids the busy CPUs, fixed from the start
# (the best one with hindsight), side by side in alternating order, round after round.
#   omp/sync THREADS: workloads/ompwork (imbalanced OpenMP, spinning barriers) and
#   workloads/syncbench (OpenMP progress at barriers) with THREADS threads beside a spinning
#   loop on CPU 0, fixed pinning `1-(THREADS-1),0` (one thread has to share CPU 0);
#   omp/sync HALF: half the CPUs' threads beside loops on the first quarter of the CPUs,
#   fixed pinning the HALF CPUs after them.
#   idle THREADS: ompwork with THREADS threads and nothing busy, against the program run
#   alone (the OS placement): what the search costs where there is nothing to gain. Two
#   more sides there split that cost: `pin` (autopin pin -c 0-(THREADS-1): the pinning
#   alone) and `watch` (autopin run --strategy fixed on the same pinning: the pinning with
#   autopin's watch and counting, no search); ap ÷ watch is then the search's own cost.
# With AUTOPIN_OLD=<another autopin binary> each round also runs that one, in the same
# rounds: a change to the search is judged against the build before it on the same machine
# minute. Printed: one line per side and setting, median seconds and the median of the
# per-round ratios to the fixed pinning, then when each autopin run decided and how it
# started (`pinned_at_birth` or `os`). The idle setting's reference is the OS placement.
# Nothing is written outside a temporary folder.
# usage: bench/busy_launch.sh [ROUNDS]
#   (default: 3 rounds a setting, ompwork -r 50000, syncbench -b 400000)
# AUTOPIN=path picks the binary (default target/release/autopin, else the one on PATH).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${1:-3}
N=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
if [ "$N" -lt 4 ]; then
  echo "busy_launch.sh wants 4 CPUs or more (this machine lets us use $N)" >&2
  exit 2
fi
AUTOPIN=${AUTOPIN:-$ROOT/target/release/autopin}
[ -x "$AUTOPIN" ] || AUTOPIN=$(command -v autopin)
OLD=${AUTOPIN_OLD:-}
W=$(mktemp -d)
BUSY_PIDS=""
stop_busy() { for p in $BUSY_PIDS; do kill "$p" 2>/dev/null || true; done; BUSY_PIDS=""; }
trap 'stop_busy; rm -rf "$W"' EXIT
gcc -O2 -fopenmp -o "$W/ompwork" "$ROOT/workloads/ompwork.c"
gcc -O2 -I"$ROOT/include" -fopenmp -o "$W/syncbench" "$ROOT/workloads/syncbench.c"
export AUTOPIN_MEMORY=off
: >"$W/times"
# A run that a placement stalls (spinning barrier threads on a busy CPU) ends at 120 s.
t() {
  s=$(date +%s.%N)
  timeout 120 "$@" >/dev/null 2>>"$W/err" || true
  e=$(date +%s.%N)
  python3 -c "print(f'{$e - $s:.3f}')"
}
# rounds SETTING THREADS [FIXED_CPUS]: the reference side is the pinning FIXED_CPUS, fixed
# from the start, or without it the program run alone (the OS placement).
rounds() {
  export OMP_NUM_THREADS=$2
  ref=fixed
  [ -n "${3:-}" ] || ref=os
  i=1
  while [ "$i" -le "$ROUNDS" ]; do
    order="$ref ap old"
    [ "$ref" = os ] && order="os pin watch ap old"
    [ $((i % 2)) = 0 ] && order=$(echo $order | tr ' ' '\n' | tac | tr '\n' ' ')
    for s in $order; do
      case $s in
        fixed) v=$(t "$AUTOPIN" pin -c "$3" -- $P) ;;
        os) v=$(t $P) ;;
        pin) v=$(t "$AUTOPIN" pin -c "0-$(($2 - 1))" -- $P) ;;
        watch) v=$(t "$AUTOPIN" run --strategy fixed --schedule "$(seq -s, 0 $(($2 - 1)))" -- $P) ;;
        ap) v=$(t "$AUTOPIN" run --report "$W/$1.ap.$i.json" -- $P) ;;
        old) [ -n "$OLD" ] || continue
          v=$(t "$OLD" run --report "$W/$1.old.$i.json" -- $P) ;;
      esac
      echo "$1 $s $i $v" >>"$W/times"
    done
    i=$((i + 1))
  done
}
busy() { # cpus...
  for c in "$@"; do
    taskset -c "$c" sh -c 'while :; do :; done' &
    BUSY_PIDS="$BUSY_PIDS $!"
  done
  sleep 0.5
}
echo "$N CPUs, $ROUNDS rounds a setting; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
P="$W/ompwork -m imbalance -r 50000"
rounds "idle$N" "$N"
busy 0
P="$W/ompwork -m imbalance -r 50000"
rounds "omp$N" "$N" "1-$((N - 1)),0"
P="$W/syncbench -s 0 -b 400000 -r 1"
rounds "sync$N" "$N" "1-$((N - 1)),0"
stop_busy
Q=$((N / 4))
H=$((N / 2))
busy $(seq 0 $((Q - 1)))
P="$W/ompwork -m imbalance -r 50000"
rounds "omp$H" "$H" "$Q-$((Q + H - 1))"
P="$W/syncbench -s 0 -b 400000 -r 1"
rounds "sync$H" "$H" "$Q-$((Q + H - 1))"
stop_busy
python3 - "$W" <<'PY'
import collections, glob, json, statistics, sys
w = sys.argv[1]
times = collections.defaultdict(lambda: collections.defaultdict(dict))
for line in open(f"{w}/times"):
    setting, side, i, v = line.split()
    times[setting][side][int(i)] = float(v)
for setting, sides in times.items():
    fixed = sides.get("fixed") or sides["os"]
    cols = []
    for side, runs in sides.items():
        ratio = statistics.median(runs[i] / fixed[i] for i in runs)
        cols.append(f"{side} {statistics.median(runs.values()):.3f} s (x{ratio:.3f})")
    print(f"{setting:8}", "  ".join(cols))
    for who in ("ap", "old"):
        seen = []
        for f in sorted(glob.glob(f"{w}/{setting}.{who}.*.json")):
            try:
                r = json.load(open(f))
            except (OSError, ValueError):
                continue
            at = (r.get("decision") or {}).get("at")
            seen.append(f"{'-' if at is None else f'{at:.2f}'}/{r.get('start')}")
        if seen:
            print(f"{'':8} {who} decided at (s)/start: {' '.join(seen)}")
PY
[ -s "$W/err" ] && { echo "last messages of the runs:"; tail -3 "$W/err"; }
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
