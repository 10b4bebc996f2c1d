#!/bin/sh
# autopin's own CPU on a program of THREADS mostly sleeping threads (bench/many_threads.c):
# the CPU time of its three processes together (the keeper, the engine, the engine's
# guardian; each thread's /proc/TID/schedstat, in nanoseconds), sampled every 20 ms, as a
# share of one CPU:
# - searching: a default run (the race over the threads' candidates), from the search's
#   start to its decision as the report gives them (the program's clock, a few ms after
#   autopin's), pooled over ROUNDS runs;
# - decided: a fixed pinning decided at once, from 4 s on (the threads are made and pinned
#   by then) to 2 s before the program ends, with the phase watch and with --no-watch.
# With AUTOPIN_OLD=<another autopin binary> the same for it, each round of both run one
# after the other so that both see the same load.
# usage: bench/threads.sh [THREADS] [SECONDS] [ROUNDS]   (default 2000 threads, 16 s, 3)
set -eu
# Every round searches afresh: remembered decisions would turn later rounds into checks.
export AUTOPIN_MEMORY=off
N=${1:-2000}
SECS=${2:-16}
ROUNDS=${3:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cc -O2 -pthread "$ROOT/bench/many_threads.c" -o "$W/many"
[ -x "$ROOT/target/release/autopin" ] || (cd "$ROOT" && cargo build -q --release -p autopin)
# The processes are told apart by their name: each binary runs as `autopin`.
mkdir -p "$W/new" "$W/old"
cp "$ROOT/target/release/autopin" "$W/new/autopin"
SIDES=new
if [ -n "${AUTOPIN_OLD:-}" ]; then
  cp "$AUTOPIN_OLD" "$W/old/autopin"
  SIDES="new old"
fi

# sample OUT ARGS...: runs `autopin run --report OUT ARGS...` and writes to OUT.cpu the CPU
# nanoseconds of autopin's processes (it and its descendants named autopin, two levels down;
# the program is not one of them) every 20 ms, with the seconds since the start.
sample() {
  python3 - "$@" <<'PY'
import json, os, subprocess, sys, time

def children(p):
    try:
        return [int(x) for x in open(f"/proc/{p}/task/{p}/children").read().split()]
    except OSError:
        return []

def ours(p):
    try:
        return open(f"/proc/{p}/comm").read().strip() == "autopin"
    except OSError:
        return False

def cpu_ns(p):
    total = 0
    try:
        tasks = os.listdir(f"/proc/{p}/task")
    except OSError:
        return 0
    for t in tasks:
        try:
            total += int(open(f"/proc/{p}/task/{t}/schedstat").read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total

out, cmd = sys.argv[1], sys.argv[2:]
t0 = time.monotonic()
proc = subprocess.Popen(cmd[:2] + ["--report", out] + cmd[2:],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
last, samples = {}, []
while proc.poll() is None:
    # Looked at anew each time: the program is named autopin too between its fork and its
    # exec, and is no longer counted once it is not.
    procs = {proc.pid}
    for e in children(proc.pid):
        if ours(e):
            procs.add(e)
            procs.update(g for g in children(e) if ours(g))
    for p in list(last):
        if p not in procs and os.path.exists(f"/proc/{p}") and not ours(p):
            del last[p]
    for p in procs:
        # A process that ended keeps the time it had at its last look.
        last[p] = max(last.get(p, 0), cpu_ns(p))
    samples.append((time.monotonic() - t0, sum(last.values())))
    time.sleep(0.02)
json.dump(samples, open(out + ".cpu", "w"))
PY
}

# share FILE FROM TO: autopin's CPU share (% of one CPU) between FROM and TO s, as
# "nanoseconds seconds" for pooling.
share() {
  python3 - "$@" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
a, b = float(sys.argv[2]), float(sys.argv[3])
inside = [x for x in s if a <= x[0] <= b]
if len(inside) < 2:
    print("0 0")
else:
    print(inside[-1][1] - inside[0][1], inside[-1][0] - inside[0][0])
PY
}

# search_window REPORT: the first search's start and its decision (or the run's end).
search_window() {
  python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = r.get("searches") or [{}]
d = r.get("decision") or {}
print(s[0].get("start", 0.5), d.get("at") or r.get("wall_time", 0))
PY
}

echo "program: $N threads, each 1000 additions then 10 ms asleep, $SECS s; $ROUNDS rounds; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for side in $SIDES; do : > "$W/$side.search"; : > "$W/$side.decided"; : > "$W/$side.nowatch"; : > "$W/$side.at"; done
i=1
while [ "$i" -le "$ROUNDS" ]; do
  for side in $SIDES; do
    bin="$W/$side/autopin"
    sample "$W/r.json" "$bin" run -q -- "$W/many" "$N" "$SECS"
    set -- $(search_window "$W/r.json")
    share "$W/r.json.cpu" "$1" "$2" >> "$W/$side.search"
    python3 -c "import json; d=json.load(open('$W/r.json')).get('decision') or {}; print('%.2f' % d['at'] if 'at' in d else 'none')" >> "$W/$side.at"
    sample "$W/r.json" "$bin" run -q --strategy fixed --schedule 0,1 -- "$W/many" "$N" "$SECS"
    share "$W/r.json.cpu" 4 $((SECS - 2)) >> "$W/$side.decided"
    sample "$W/r.json" "$bin" run -q --strategy fixed --schedule 0,1 --no-watch -- "$W/many" "$N" "$SECS"
    share "$W/r.json.cpu" 4 $((SECS - 2)) >> "$W/$side.nowatch"
  done
  i=$((i + 1))
done
for side in $SIDES; do
  python3 - "$W/$side" "$side" <<'PY'
import sys
def pooled(path):
    rows = [tuple(map(float, l.split())) for l in open(path) if l.strip()]
    ns, secs = sum(r[0] for r in rows), sum(r[1] for r in rows)
    each = " ".join("%.2f" % (100 * r[0] / 1e9 / r[1]) for r in rows if r[1] > 0)
    return ("%.2f" % (100 * ns / 1e9 / secs) if secs else "-"), each, secs
w, side = sys.argv[1], sys.argv[2]
s, se, secs = pooled(w + ".search")
d, de, _ = pooled(w + ".decided")
n, ne, _ = pooled(w + ".nowatch")
at = " ".join(l.strip() for l in open(w + ".at"))
print("%s: searching %s%% of one CPU (%.1f s of search; each: %s; decided at %s s); decided %s%% (phase watch on; each: %s), %s%% (--no-watch; each: %s)"
      % (side, s, secs, se, at, d, de, n, ne))
PY
done
