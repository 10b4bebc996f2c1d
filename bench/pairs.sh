#!/bin/sh
# Two commands timed side by side: PAIRS interleaved pairs (which one goes first alternates,
# so a slow drift of the machine's load hits both alike), each run's whole-process wall time
# read around it (python's monotonic clock), the command's output thrown away. Printed: the
# median seconds of each, and the median over pairs of A ÷ B with a 95% bootstrap interval.
# BUSY=1 spins a shell on CPU 0 for the whole bench (the busy neighbour of docs/threads.md).
# A command is one string, run by sh -c (so it may set variables: 'AUTOPIN_MEMORY=off ...').
# usage: bench/pairs.sh PAIRS 'COMMAND_A' 'COMMAND_B'
#   e.g. BUSY=1 bench/pairs.sh 30 \
#     'AUTOPIN_MEMORY=off target/release/autopin run -q -- workloads/ompwork -m loops -w 20000 -r 600000' \
#     'target/release/autopin pin -c 1:1 -- workloads/ompwork -m loops -w 20000 -r 600000'
set -eu
if [ $# -ne 3 ]; then
  echo "usage: bench/pairs.sh PAIRS 'COMMAND_A' 'COMMAND_B'" >&2
  exit 2
fi
case $1 in
  '' | *[!0-9]* | 0) echo "bench/pairs.sh: PAIRS must be a whole number of 1 or more, not '$1'" >&2; exit 2 ;;
esac
BUSY_PID=
cleanup() { [ -n "$BUSY_PID" ] && kill "$BUSY_PID" 2>/dev/null; true; }
trap cleanup EXIT
if [ "${BUSY:-0}" = 1 ]; then
  taskset -c 0 sh -c 'while :; do :; done' &
  BUSY_PID=$!
fi
python3 - "$@" <<'PY'
import random, statistics, subprocess, sys, time
pairs, cmds = int(sys.argv[1]), sys.argv[2:4]
def run(cmd):
    t = time.monotonic()
    rc = subprocess.call(["sh", "-c", cmd], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if rc != 0:
        sys.exit(f"bench/pairs.sh: exit status {rc} from: {cmd}")
    return time.monotonic() - t
run(cmds[0]); run(cmds[1])  # warm-up, not counted
a, b = [], []
for i in range(pairs):
    if i % 2 == 0:
        a.append(run(cmds[0])); b.append(run(cmds[1]))
    else:
        b.append(run(cmds[1])); a.append(run(cmds[0]))
r = [x / y for x, y in zip(a, b)]
rng = random.Random(1)
boot = sorted(statistics.median(rng.choices(r, k=len(r))) for _ in range(2000))
print(f"A median {statistics.median(a):.3f} s (min {min(a):.3f}, max {max(a):.3f})")
print(f"B median {statistics.median(b):.3f} s (min {min(b):.3f}, max {max(b):.3f})")
print(f"A ÷ B median over {pairs} pairs {statistics.median(r):.3f} (95% CI {boot[50]:.3f}–{boot[1949]:.3f})")
PY
