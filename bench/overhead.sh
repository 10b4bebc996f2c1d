#!/bin/sh
# Overhead of autopin with one candidate only: runtime under `autopin run` vs the same
# pinning applied by taskset, side by side, N pairs (alternating which goes first); median
# difference. Also autopin's own CPU share (its user+sys ÷ wall, getrusage(RUSAGE_SELF) of
# the autopin process, written to the report as monitor_cpu_share). The reference pins each
# thread to its own CPU like autopin does (OMP_PLACES={0},{1}); taskset -c 0,1 is a mask
# under which both threads can still meet on one CPU. BENCH_NICE=-10 runs both sides at a
# higher priority on a shared machine.
# usage: bench/overhead.sh [PAIRS] [OBJECTIVE]   (default 5 pairs, objective heartbeat)
set -eu
# Every round searches afresh: remembered decisions would turn later rounds into checks.
export AUTOPIN_MEMORY=off
PAIRS=${1:-5}
OBJ=${2:-heartbeat}
. "$(cd "$(dirname "$0")" && pwd)/syncbench_common.sh"
ARGS=${SYNCBENCH_ARGS:--s 0 -b 10000000 -r 2}
echo "syncbench $ARGS; autopin: --schedule '0,1' --objective $OBJ"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "nice: ${BENCH_NICE:-0}"
echo "pair  places0,1_s  autopin_s  diff%  autopin_cpu%"
: > "$W/diffs"
: > "$W/cpu"
i=1
while [ "$i" -le "$PAIRS" ]; do
  run_ts() { t env OMP_PLACES='{0},{1}' OMP_PROC_BIND=true "$W/syncbench" $ARGS; }
  run_ap() { t "$AUTOPIN" run -q --schedule '0,1' --objective "$OBJ" --report "$W/r.json" -- "$W/syncbench" $ARGS; }
  if [ $((i % 2)) -eq 1 ]; then a=$(run_ts); b=$(run_ap); else b=$(run_ap); a=$(run_ts); fi
  c=$(python3 -c "import json;print(100*(json.load(open('$W/r.json')).get('monitor_cpu_share') or 0))")
  d=$(calc "100 * ($b - $a) / $a")
  echo "$d" >> "$W/diffs"
  echo "$c" >> "$W/cpu"
  printf "%4d  %11.3f  %9.3f  %5.2f  %6.3f\n" "$i" "$a" "$b" "$d" "$c"
  i=$((i + 1))
done
python3 -c "import statistics;print('median difference: %.2f%%' % statistics.median(float(l) for l in open('$W/diffs')))"
python3 -c "import statistics;print('median autopin CPU share: %.3f%% of one CPU' % statistics.median(float(l) for l in open('$W/cpu')))"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
