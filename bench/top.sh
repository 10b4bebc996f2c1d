#!/bin/sh
# autopin top's own cost: the CPU time of `autopin top -b --json -d 1 -n ROUNDS` (its output
# read and thrown away) as a share of one CPU, beside a program of THREADS threads
# (bench/many_threads.c), for each count, two kinds of threads:
# - busy: each thread computes a little and sleeps 100 ms, so every thread ran between two
#   refreshes and each is read at every refresh (stat, schedstat, sched, its mask): the
#   worst case (with 10 ms naps, 10000 threads saturate 2 CPUs before they are all made);
# - idle: the threads only sleep; their process is not read again (one file a refresh)
#   except every 5 s.
# CPU% and ms/refresh: steady state, autopin's CPU time (utime + stime, clock ticks) from
# the first document to the last but one, over that wall time and over those refreshes;
# "start ms": its CPU time until the first document (start, the first look, which reads
# every thread in full, and the first refresh); "all%": the whole run over its wall time.
# "seen" is how many threads the last refresh listed (the whole machine's). A count the machine cannot start (kernel.pid_max, kernel.threads-max, memory)
# is said and skipped.
# usage: bench/top.sh [COUNTS (default "1000 10000")] [ROUNDS (default 12)]
set -eu
COUNTS=${1:-"1000 10000"}
ROUNDS=${2:-12}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/autopin
W=$(mktemp -d)
MP=
trap '[ -n "$MP" ] && kill "$MP" 2>/dev/null; rm -rf "$W"' EXIT
cc -O2 -pthread "$ROOT/bench/many_threads.c" -o "$W/many"
[ -x "$BIN" ] || (cd "$ROOT" && cargo build -q --release -p autopin)

echo "autopin top -b --json -d 1 -n $ROUNDS on $(nproc) CPUs ($(uname -r)); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%8s %-5s %7s %11s %9s %7s %8s\n' threads kind 'CPU%' 'ms/refresh' 'start ms' 'all%' seen
for n in $COUNTS; do
  for kind in busy idle; do
    nap=100
    [ "$kind" = idle ] && nap=0
    "$W/many" "$n" $((ROUNDS + 60)) "$nap" >/dev/null 2>"$W/err" &
    MP=$!
    # Until every thread runs (or the program gave up making them).
    t=0
    threads() { awk '/^Threads:/ { print $2 }' "/proc/$MP/status" 2>/dev/null || echo 0; }
    while [ "$(threads)" -lt "$n" ] && [ $t -lt 600 ]; do
      if ! kill -0 "$MP" 2>/dev/null || [ -s "$W/err" ]; then break; fi
      sleep 0.1
      t=$((t + 1))
    done
    made=$(threads)
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
hz = os.sysconf("SC_CLK_TCK")

def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / hz

t0 = time.monotonic()
p = subprocess.Popen([binary, "top", "-b", "--json", "-d", "1", "-n", str(rounds)],
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
docs, marks, last = 0, [], None
for line in p.stdout:
    docs += 1
    last = line
    if docs < rounds:
        marks.append((time.monotonic(), cpu(p.pid)))
_, status, ru = os.wait4(p.pid, 0)
wall = time.monotonic() - t0
total = ru.ru_utime + ru.ru_stime
(w1, c1), (w2, c2) = marks[0], marks[-1]
steady = (c2 - c1) / (w2 - w1)
seen = sum(len(q["threads"]) for q in json.loads(last)["processes"]) if last else 0
print(f"{n:>8} {kind:<5} {100 * steady:6.1f}% {1000 * (c2 - c1) / (len(marks) - 1):11.1f} "
      f"{1000 * c1:9.0f} {100 * total / wall:6.1f}% {seen:8}")
PY
    kill "$MP" 2>/dev/null || true
    wait "$MP" 2>/dev/null || true
    MP=
  done
done
