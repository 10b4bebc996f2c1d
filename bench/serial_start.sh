#!/bin/sh
# A program whose OpenMP threads come after a serial start-up: workloads/ompwork -m imbalance
# with -s (it computes alone for that long, then starts 2 OpenMP threads), beside a busy
# loop on CPU 0 (BUSY=0: an idle machine). Sides, in interleaved rounds (the order rotating):
# the OS placement, `autopin pin -c 1,0` (the best fixed pinning beside the busy CPU 0; on an
# idle machine it is one of the two equal ones) and `autopin run` with its defaults; with
# AUTOPIN_OLD=/path/to/autopin an older build's `autopin run` beside it. Printed: seconds per
# side and round, then the medians of autopin ÷ the pinning and autopin ÷ the OS placement,
# and autopin's first decision and number of searches per round.
# usage: bench/serial_start.sh [ROUNDS] [SERIAL_S] [ROUNDS_OF_WORK]   (default 5, 2.0, 150000)
set -eu
export AUTOPIN_MEMORY=off OMP_NUM_THREADS=2
ROUNDS=${1:-5}
SERIAL=${2:-2.0}
WORK=${3:-150000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
AUTOPIN=${AUTOPIN:-$ROOT/target/release/autopin}
W=$(mktemp -d)
cleanup() { [ -n "${BUSY_PID:-}" ] && kill "$BUSY_PID" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
gcc -O2 -fopenmp -o "$W/ompwork" "$ROOT/workloads/ompwork.c"
if [ "${BUSY:-1}" = 1 ]; then
  taskset -c 0 sh -c 'while :; do :; done' & BUSY_PID=$!
  echo "busy neighbour: a spinning shell on CPU 0"
else
  echo "idle machine (BUSY=0)"
fi
C="$W/ompwork -m imbalance -s $SERIAL -r $WORK"
echo "program: $C; $ROUNDS rounds"
t() { s=$(date +%s.%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s.%N); python3 -c "print($e - $s)"; }
SIDES="os pin ap"
[ -n "${AUTOPIN_OLD:-}" ] && SIDES="$SIDES old"
for s in $SIDES; do : > "$W/$s"; done
: > "$W/threads"
i=1
while [ "$i" -le "$ROUNDS" ]; do
  order=$(python3 -c "s='$SIDES'.split(); k=$i % len(s); print(' '.join(s[k:] + s[:k]))")
  line="round $i:"
  for s in $order; do
    case $s in
      os) v=$(t $C) ;;
      pin) v=$(t "$AUTOPIN" pin -c 1,0 -- $C) ;;
      ap) v=$(t "$AUTOPIN" run --report "$W/ap.json" -- $C)
          python3 -c "import json; r=json.load(open('$W/ap.json')); d=r['decisions']; print((d[0]['cpus'] or 'OS') if d else 'none', len(r['searches']))" >> "$W/threads" ;;
      old) v=$(t "$AUTOPIN_OLD" run -- $C) ;;
    esac
    echo "$v" >> "$W/$s"
    line="$line $s $(python3 -c "print(f'{$v:.2f}')")"
  done
  echo "$line"
  i=$((i + 1))
done
python3 - "$W" "$SIDES" <<'PY'
import statistics, sys
w, sides = sys.argv[1], sys.argv[2].split()
v = {s: [float(x) for x in open(f"{w}/{s}")] for s in sides}
print("median seconds: " + ", ".join(f"{s} {statistics.median(v[s]):.2f}" for s in sides))
for s in [x for x in sides if x in ("ap", "old")]:
    name = "autopin" if s == "ap" else "older autopin"
    pin = statistics.median(a / b for a, b in zip(v[s], v["pin"]))
    os_ = statistics.median(a / b for a, b in zip(v[s], v["os"]))
    print(f"{name}: {pin:.3f}x the pinning 1,0, {os_:.3f}x the OS placement (medians of the rounds' ratios)")
firsts = [x.strip() for x in open(f"{w}/threads")]
print("autopin's first decision (its CPUs; OS: unpinned; none: the program ended first) and searches, per round: " + "; ".join(firsts))
PY
