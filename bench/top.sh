#!/bin/sh
# autopin top's own cost: the CPU time of `autopin top -b --json -d 1 -n ROUNDS` (its output
# read and thrown away) as a share of one CPU, beside a program of THREADS threads
# (bench/many_threads.c), for each count, two kinds of threads:
# - busy: each thread computes a little and sleeps 10 ms, so every thread ran between two
#   refreshes and each is read at every refresh (stat, schedstat, sched, its mask): the
#   worst case;
# - idle: the threads only sleep; their process is not read again (one file a refresh)
#   except every 5 s.
# CPU% counts the whole run (start, the first look, ROUNDS refreshes); ms/refresh is the
# CPU time over ROUNDS. "seen" is how many threads the last refresh listed (the whole
# machine's). A count the machine cannot start (kernel.pid_max, kernel.threads-max, memory)
# is said and skipped.
# usage: bench/top.sh [COUNTS (default "1000 10000")] [ROUNDS (default 10)]
set -eu
COUNTS=${1:-"1000 10000"}
ROUNDS=${2:-10}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/autopin
W=$(mktemp -d)
MP=
trap '[ -n "$MP" ] && kill "$MP" 2>/dev/null; rm -rf "$W"' EXIT
cc -O2 -pthread "$ROOT/bench/many_threads.c" -o "$W/many"
[ -x "$BIN" ] || (cd "$ROOT" && cargo build -q --release -p autopin)

echo "autopin top -b --json -d 1 -n $ROUNDS on $(nproc) CPUs ($(uname -r)); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%8s %-5s %7s %11s %8s\n' threads kind 'CPU%' 'ms/refresh' seen
for n in $COUNTS; do
  for kind in busy idle; do
    nap=10
    [ "$kind" = idle ] && nap=0
    "$W/many" "$n" $((ROUNDS + 60)) "$nap" >/dev/null 2>"$W/err" &
    MP=$!
    # Until every thread runs (or the program gave up making them).
    t=0
    while [ "$(ls "/proc/$MP/task" 2>/dev/null | wc -l)" -lt "$n" ] && [ $t -lt 600 ]; do
      if ! kill -0 "$MP" 2>/dev/null || [ -s "$W/err" ]; then break; fi
      sleep 0.1
      t=$((t + 1))
    done
    made=$(ls "/proc/$MP/task" 2>/dev/null | wc -l)
    if [ "$made" -lt "$n" ]; then
      printf '%8s %-5s   not run: only %s threads could be made (%s)\n' "$n" "$kind" "$made" "$(head -c 80 "$W/err")"
      kill "$MP" 2>/dev/null || true
      wait "$MP" 2>/dev/null || true
      MP=
      continue
    fi
    python3 - "$BIN" "$ROUNDS" "$n" "$kind" <<'PY'
import json, os, subprocess, sys, time
binary, rounds, n, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
t0 = time.monotonic()
p = subprocess.Popen([binary, "top", "-b", "--json", "-d", "1", "-n", str(rounds)],
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
last = None
for line in p.stdout:
    last = line
_, status, ru = os.wait4(p.pid, 0)
wall = time.monotonic() - t0
cpu = ru.ru_utime + ru.ru_stime
seen = sum(len(q["threads"]) for q in json.loads(last)["processes"]) if last else 0
print(f"{n:>8} {kind:<5} {100 * cpu / wall:6.1f}% {1000 * cpu / rounds:11.1f} {seen:8}")
PY
    kill "$MP" 2>/dev/null || true
    wait "$MP" 2>/dev/null || true
    MP=
  done
done
