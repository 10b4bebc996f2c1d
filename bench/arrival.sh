#!/bin/sh
# Changing conditions: a one-thread program starts on an idle machine, and ARRIVE seconds in
# a busy loop arrives on the CPU the program is running on at that moment. Three sides, in
# interleaved rounds (the order rotating): the program pinned at the start to CPU 0
# (`taskset -c 0`, so the newcomer lands on it), the OS placement (no pinning: the kernel may
# move the program away), and `autopin run` with its defaults (it decides on the idle
# machine, then its phase watch sees the rate drop and searches again).
# Printed per round: seconds per side and autopin's ratios; then the medians of
# autopin ÷ pinned-at-start and autopin ÷ OS placement, and the decisions autopin took.
# usage: bench/arrival.sh [ROUNDS] [MILLION_STEPS] [ARRIVE_S]   (default 5, 10000 ≈ 10 s alone, 5)
set -eu
# Every round searches afresh: remembered decisions would turn later rounds into checks.
export AUTOPIN_MEMORY=off
ROUNDS=${1:-5}
STEPS=${2:-10000}
ARRIVE=${3:-5}
. "$(cd "$(dirname "$0")" && pwd)/busy_common.sh"
calc() { python3 -c "print($1)"; }

# Runs "$@" (which runs $W/work), starts the newcomer ARRIVE s in on the CPU the work
# program is on then, and prints the seconds the command took. The newcomer ends with it.
timed_with_arrival() {
  rm -f "$W/spinner"
  s=$(date +%s.%N)
  "$@" >/dev/null 2>&1 &
  prog=$!
  (
    sleep "$ARRIVE"
    pid=$(pgrep -n -f "^$W/work") || exit 0
    cpu=$(awk '{print $39}' "/proc/$pid/stat") || exit 0
    # The spinner's pid is the one that writes the file: sh execs into taskset, taskset
    # into the loop.
    sh -c 'echo $$ > "$1"; exec taskset -c "$2" sh -c "while :; do :; done"' sh "$W/spinner" "$cpu"
  ) &
  arrival=$!
  wait "$prog" || true
  e=$(date +%s.%N)
  kill "$arrival" 2>/dev/null || true
  [ -s "$W/spinner" ] && kill "$(cat "$W/spinner")" 2>/dev/null || true
  wait "$arrival" 2>/dev/null || true
  calc "$e - $s"
}

echo "work: $STEPS million steps; a busy loop arrives on the program's CPU $ARRIVE s in; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "round  pinned0_s   os_s  autopin_s  ap/pinned0  ap/os  decisions"
: > "$W/rpin"; : > "$W/ros"
i=1
while [ "$i" -le "$ROUNDS" ]; do
  run_pin() { timed_with_arrival taskset -c 0 "$W/work" "$STEPS"; }
  run_os() { timed_with_arrival "$W/work" "$STEPS"; }
  run_ap() { timed_with_arrival "$AUTOPIN" run -q --report "$W/r$i.json" -- "$W/work" "$STEPS"; }
  rotated3 "$i" run_pin run_os run_ap
  a=$R1; o=$R2; b=$R3
  d=$(python3 -c "
import json
d = json.load(open('$W/r$i.json'))
print('; '.join('%s at %.1f s' % (x['candidate'], x['at']) for x in d.get('decisions', [])) or 'none')")
  echo "$(calc "$b / $a")" >> "$W/rpin"
  echo "$(calc "$b / $o")" >> "$W/ros"
  printf "%5d  %8.3f  %5.3f  %9.3f  %10.3f  %5.3f  %s\n" "$i" "$a" "$o" "$b" "$(calc "$b / $a")" "$(calc "$b / $o")" "$d"
  i=$((i + 1))
done
python3 - "$W" <<'PY'
import statistics, sys
w = sys.argv[1]
med = lambda f: statistics.median(float(l) for l in open(f"{w}/{f}") if l.strip())
print("median ratio autopin / pinned at the start (taskset -c 0): %.3f" % med("rpin"))
print("median ratio autopin / OS placement: %.3f" % med("ros"))
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
