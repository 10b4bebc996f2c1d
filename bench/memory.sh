#!/bin/sh
# Remembered decisions: a ~2 s two-thread OpenMP program (workloads/ompwork.c, imbalance
# mode: the master computes while the other thread waits) run RUNS times under autopin with
# one fresh decision store. Run 1 searches; later runs start on the remembered pinning and
# check it. Each run's time is divided by the best fixed pinning with hindsight (the fastest
# of the OS placement and the pinnings autopin considers, each timed alone in the same
# setting). With BUSY=1 (default) a busy loop holds CPU 0 throughout; BUSY=0 is idle.
# usage: bench/memory.sh [RUNS]   (default 6)
set -eu
RUNS=${1:-6}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
AUTOPIN=${AUTOPIN:-$ROOT/target/release/autopin}
[ -x "$AUTOPIN" ] || (cd "$ROOT" && cargo build -q --release)
W=$(mktemp -d)
BUSY_PID=
cleanup() { [ -n "$BUSY_PID" ] && kill "$BUSY_PID" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
gcc -O2 -fopenmp -o "$W/omp" "$ROOT/workloads/ompwork.c"
ARGS="-m imbalance -r ${ROUNDS:-400} -w 2000000"
export OMP_NUM_THREADS=2 OMP_WAIT_POLICY=active
if [ "${BUSY:-1}" = 1 ]; then
  taskset -c 0 sh -c 'while :; do :; done' & BUSY_PID=$!
fi
secs() { "$@" | sed -n 's/^ompwork [a-z]*: \([0-9.]*\) s.*/\1/p'; }
best=""
for pin in os 0,1 1,0 1,1; do
  if [ "$pin" = os ]; then t=$(secs "$W/omp" $ARGS); else t=$(secs "$AUTOPIN" pin -c "$pin" -- "$W/omp" $ARGS); fi
  echo "fixed $pin: $t s"
  best=$(python3 -c "b='$best'; print(min(float(b), $t) if b else $t)")
done
echo "best fixed: $best s   (busy CPU 0: ${BUSY:-1})"
echo "run  seconds  ÷best  decision_at  memory"
: > "$W/ratios"
i=1
while [ "$i" -le "$RUNS" ]; do
  t=$(secs "$AUTOPIN" run -q --memory "$W/d.db" --report "$W/r.json" -- "$W/omp" $ARGS)
  info=$(python3 -c "
import json; r=json.load(open('$W/r.json')); d=r.get('decision') or {}; m=r.get('memory') or {}
print('%s %s/%s' % (('%.2f' % d['at']) if 'at' in d else '-', 'hit' if m.get('hit') else 'miss', m.get('outcome')))")
  ratio=$(python3 -c "print('%.3f' % ($t / $best))")
  [ "$i" -gt 1 ] && echo "$ratio" >> "$W/ratios"
  printf "%3d  %7.3f  %5s  %s\n" "$i" "$t" "$ratio" "$info"
  i=$((i + 1))
done
python3 -c "import statistics;print('median of runs 2-$RUNS ÷ best fixed: %.3f' % statistics.median(float(l) for l in open('$W/ratios')))"
