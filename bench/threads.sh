#!/bin/sh
# autopin's own CPU on a program of THREADS mostly sleeping threads (bench/many_threads.c):
# its user+sys time (/proc/PID/stat, 10 ms ticks, its three processes together) while it searches (the first WINDOW s of a
# default run, a 2-candidate race over the threads) and after a decision is in force (a
# fixed pinning decided at once, measured from 4 s on, after the threads were created and
# pinned). With AUTOPIN_OLD=<another autopin binary> the same for it, side by side.
# usage: bench/threads.sh [THREADS] [SECONDS]   (default 2000 threads, 16 s)
set -eu
# Every round searches afresh: remembered decisions would turn later rounds into checks.
export AUTOPIN_MEMORY=off
N=${1:-2000}
SECS=${2:-16}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cc -O2 -pthread "$ROOT/bench/many_threads.c" -o "$W/many"
[ -x "$ROOT/target/release/autopin" ] || (cd "$ROOT" && cargo build -q --release)
NEW="$ROOT/target/release/autopin"
HZ=$(getconf CLK_TCK)

# User+sys ticks of autopin's processes: $1 and its descendants named autopin, two levels
# down (the keeper, the engine, the engine's guardian; the program is not one of them).
own() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
kids() { cat "/proc/$1/task/$1/children" 2>/dev/null || true; }
ours() { [ "$(cat "/proc/$1/comm" 2>/dev/null)" = autopin ]; }
ticks() {
  t=$(own "$1")
  for e in $(kids "$1"); do
    ours "$e" || continue
    t=$((t + $(own "$e")))
    for g in $(kids "$e"); do
      ours "$g" && t=$((t + $(own "$g")))
    done
  done
  echo "$t"
}

# share BIN FROM TO ARGS...: autopin's CPU share (% of one CPU) between FROM and TO s.
share() {
  bin=$1; from=$2; to=$3; shift 3
  "$bin" run -q --report "$W/r.json" "$@" -- "$W/many" "$N" "$SECS" >/dev/null 2>&1 &
  ap=$!
  sleep "$from"; a=$(ticks $ap)
  sleep $((to - from)); b=$(ticks $ap)
  wait $ap || true
  python3 -c "print('%.2f' % (100.0 * ($b - $a) / $HZ / ($to - $from)))"
}

echo "program: $N threads, each 1000 additions then 10 ms asleep, $SECS s"
for side in new old; do
  if [ "$side" = old ]; then BIN=${AUTOPIN_OLD:-}; [ -n "$BIN" ] || continue; else BIN=$NEW; fi
  s=$(share "$BIN" 1 4)
  d=$(share "$BIN" 4 14 --strategy fixed --schedule 0,1)
  dn=$(share "$BIN" 4 14 --strategy fixed --schedule 0,1 --no-watch)
  echo "$side: searching ${s}% of one CPU; decided ${d}% (phase watch on), ${dn}% (--no-watch)"
done
