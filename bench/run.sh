#!/bin/sh
# autopin's decision on a real OpenMP program with barriers (OMP_WAIT_POLICY=active, 2
# threads): candidates 0,0 and 0,1; autopin must pick 0,1, and the whole run under autopin
# should be within 5% of the program pinned to 0,1 from the start (taskset). The program is
# workloads/syncbench in its barrier-only form (-s 0): one long phase, ~15 s when pinned
# well, so a few short probes are a small share of the run. Pairs alternate which run goes
# first, so slow drift of the machine's load hits both sides. Two references: taskset -c 0,1
# (a mask: both threads may still meet on one CPU) and each thread pinned to its own CPU
# from the start (OMP_PLACES={0},{1}, the same per-thread pinning autopin applies).
# Spinning barriers are very sensitive to any other runnable process: on a shared machine
# set BENCH_NICE=-10 to run every side (references and autopin alike) at a higher priority.
# usage: bench/run.sh [PAIRS] [OBJECTIVE]   (default 3 pairs, objective heartbeat)
set -eu
# Every round searches afresh: remembered decisions would turn later rounds into checks.
export AUTOPIN_MEMORY=off
PAIRS=${1:-3}
OBJ=${2:-heartbeat}
. "$(cd "$(dirname "$0")" && pwd)/syncbench_common.sh"
ARGS=${SYNCBENCH_ARGS:--s 0 -b 10000000 -r 5}
echo "syncbench $ARGS; autopin: --schedule '0,0;0,1' --objective $OBJ -i 0.1 -w 0.1 --probe 0.2 --budget 3"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "nice: ${BENCH_NICE:-0}"
echo "pair  taskset0,1_s  places0,1_s  autopin_s  ratio/taskset  ratio/places  decision  search_s"
: > "$W/ratios"
: > "$W/ratios_p"
i=1
while [ "$i" -le "$PAIRS" ]; do
  run_ts() { t taskset -c 0,1 "$W/syncbench" $ARGS; }
  run_pl() { t env OMP_PLACES='{0},{1}' OMP_PROC_BIND=true "$W/syncbench" $ARGS; }
  run_ap() { t "$AUTOPIN" run -q --schedule '0,0;0,1' --objective "$OBJ" -i 0.1 -w 0.1 --probe 0.2 --budget 3 --report "$W/r$i.json" -- "$W/syncbench" $ARGS; }
  if [ $((i % 2)) -eq 1 ]; then a=$(run_ts); p=$(run_pl); b=$(run_ap); else b=$(run_ap); p=$(run_pl); a=$(run_ts); fi
  d=$(python3 -c "import json;d=json.load(open('$W/r$i.json'));x=d.get('decision') or {};print(x.get('candidate'), '%.2f' % d.get('search_time', 0))")
  r=$(calc "$b / $a")
  rp=$(calc "$b / $p")
  echo "$r" >> "$W/ratios"
  echo "$rp" >> "$W/ratios_p"
  printf "%4d  %11.3f  %11.3f  %9.3f  %13.3f  %12.3f  %s\n" "$i" "$a" "$p" "$b" "$r" "$rp" "$d"
  i=$((i + 1))
done
python3 -c "import statistics;print('median ratio autopin/taskset: %.3f' % statistics.median(float(l) for l in open('$W/ratios')))"
python3 -c "import statistics;print('median ratio autopin/per-thread pinning from the start: %.3f' % statistics.median(float(l) for l in open('$W/ratios_p')))"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
