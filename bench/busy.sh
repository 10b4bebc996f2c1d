#!/bin/sh
# autopin beside a busy neighbour: a busy loop owns CPU 0, a one-thread program does a fixed
# amount of work. `autopin run` with its default (topology) candidates — nothing tells it
# which CPU is busy — is timed against the best fixed pinning from the start (taskset -c 1)
# and the OS placement (no pinning), in interleaved rounds (the order rotates, so drift of
# the machine's load hits every side). Also printed: when the decision fell (seconds after
# the start) and what it was. On an idle machine (BUSY=0) the reference is the OS placement.
# usage: bench/busy.sh [ROUNDS] [MILLION_STEPS]   (default 5 rounds, 4000 ≈ 4 s alone)
set -eu
# Every round searches afresh: remembered decisions would turn later rounds into checks.
export AUTOPIN_MEMORY=off
ROUNDS=${1:-5}
STEPS=${2:-4000}
. "$(cd "$(dirname "$0")" && pwd)/busy_common.sh"
calc() { python3 -c "print($1)"; }
t() { s=$(date +%s.%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s.%N); calc "$e - $s"; }
if [ "${BUSY:-1}" = 1 ]; then
  busy_neighbour
  echo "busy neighbour: a spinning shell on CPU 0 (pid $BUSY_PID)"
else
  echo "no busy neighbour (BUSY=0)"
fi
echo "work: $STEPS million steps; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "round  taskset1_s  os_s  autopin_s  ap/taskset1  ap/os  decision  decided_at_s"
: > "$W/r1"; : > "$W/ros"; : > "$W/at"
i=1
while [ "$i" -le "$ROUNDS" ]; do
  run_best() { t taskset -c 1 "$W/work" "$STEPS"; }
  run_os() { t "$W/work" "$STEPS"; }
  run_ap() { t "$AUTOPIN" run -q --report "$W/r$i.json" -- "$W/work" "$STEPS"; }
  rotated3 "$i" run_best run_os run_ap
  a=$R1; o=$R2; b=$R3
  d=$(python3 -c "import json;d=json.load(open('$W/r$i.json'));x=d.get('decision') or {};print(x.get('candidate','none').replace(' ','_'), '%.2f' % (x.get('at') or -1))")
  echo "$(calc "$b / $a")" >> "$W/r1"
  echo "$(calc "$b / $o")" >> "$W/ros"
  echo "$d" | awk '{print $2}' >> "$W/at"
  printf "%5d  %10.3f  %5.3f  %9.3f  %11.3f  %5.3f  %s\n" "$i" "$a" "$o" "$b" "$(calc "$b / $a")" "$(calc "$b / $o")" "$d"
  i=$((i + 1))
done
python3 - "$W" <<'PY'
import statistics, sys
w = sys.argv[1]
med = lambda f: statistics.median(float(l) for l in open(f"{w}/{f}") if l.strip())
print("median ratio autopin / best fixed pinning (taskset -c 1): %.3f" % med("r1"))
print("median ratio autopin / OS placement: %.3f" % med("ros"))
print("median time of the decision after the start: %.2f s" % med("at"))
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
