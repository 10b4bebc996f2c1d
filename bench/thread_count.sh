#!/bin/sh
# The thread count in the search (#61, docs/threads.md), on OpenMP programs of 2 threads beside
# a busy loop on CPU 0 (BUSY=0: an idle machine). Sides, interleaved in rotating order each
# round so that drift of the machine's load hits all alike:
#   os      the program as started (2 threads, where the OS places them)
#   pin01   autopin pin -c 0,1        pin10   autopin pin -c 1,0
#   one     one thread on CPU 1 (autopin pin -c 1:1; GROMACS: OMP_NUM_THREADS=1 under pin -c 1)
#   first   autopin run with memory off: what a first run does, every round
#   mem     autopin run with one decision store kept over the rounds: round 1 is a first run,
#           round 2 may try fewer threads from its start (when the count could not change
#           mid-run), round 3 on run what memory settled
# Printed per program: each round's seconds and what autopin decided, then medians, and
# ratios per round (medians, with 95% bootstrap intervals): mem from round 3 on ÷ the best of
# {os, pin01, pin10, one} (chosen with hindsight by median), first ÷ the best 2-thread side,
# mem ÷ one, and first ÷ the best of all (where the count may change mid-run, the first run
# is held to that). Programs: workloads/ompwork -m imbalance (a master computing alone
# between barriers, in one long region), ompwork -m loops (short static parallel loops, one
# region each: its team may change mid-run, and is asked for at birth beside a busy CPU),
# workloads/syncbench -s 0 (back-to-back barriers), and GROMACS mdrun when `gmx`
# is installed (Debian's gromacs, its count from OMP_NUM_THREADS=2 as a job script sets it:
# it names its own thread counts, which no change reaches mid-run, so the count is tried at
# its next start and judged by whole runs; docs/threads.md), and gettext's msgmerge when it
# is installed (a made-up catalogue matched fuzzily in one long OpenMP region, where two
# threads beat one even beside the busy CPU: its second run tries one thread and drops it).
# usage: bench/thread_count.sh [ROUNDS] [SECONDS_SCALE]   (default 6 rounds, scale 1)
set -eu
ROUNDS=${1:-6}
SCALE=${2:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
AUTOPIN=${AUTOPIN:-$ROOT/target/release/autopin}
. "$ROOT/bench/programs_common.sh"
PROGS=${PROGS:-"$ALL loops"}
cmd() {
  case $1 in
    ompwork) echo "$W/ompwork -m imbalance -r $(sc 20000)" ;;
    loops) echo "$W/ompwork -m loops -w 20000 -r $(sc 600000)" ;;
    syncbench) echo "$W/syncbench -s 0 -b $(sc 2000000) -r 1" ;;
    gromacs) echo "gmx mdrun -s $W/md.tpr -ntmpi 1 -pin off -nb cpu -nsteps $(sc 2000) -deffnm $W/gmx" ;;
    msgmerge) echo "msgmerge -q $W/def.po $W/ref.pot -o $W/out.po" ;;
  esac
}
# Seconds a command took; a command that fails stops the bench (its time would be a
# program's error path, not its run: GROMACS ends at once when OMP_NUM_THREADS and -ntomp
# differ).
t() {
  s=$(date +%s%N)
  "$@" >/dev/null 2>"$W/err" || { echo "bench: failed: $*" >&2; tail -n 5 "$W/err" >&2; echo FAILED; return; }
  e=$(date +%s%N)
  python3 -c "print(($e - $s) / 1e9)"
}
if [ "${BUSY:-1}" = 1 ]; then
  taskset -c 0 sh -c 'while :; do :; done' & BUSY_PID=$!
  sleep 1
  echo "busy neighbour: a spinning shell on CPU 0; $ROUNDS rounds; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
else
  echo "idle machine (BUSY=0); $ROUNDS rounds; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
fi
SIDES="os pin01 pin10 one first mem"
for prog in $PROGS; do
  C=$(cmd "$prog")
  echo "== $prog: $C"
  for s in $SIDES; do : > "$W/$prog.$s"; done
  : > "$W/$prog.what"
  i=1
  while [ "$i" -le "$ROUNDS" ]; do
    order=$(python3 -c "s='$SIDES'.split(); k=$i % len(s); print(' '.join(s[k:] + s[:k]))")
    for s in $order; do
      case $s in
        os) v=$(t $C) ;;
        pin01) v=$(t "$AUTOPIN" pin -c 0,1 -- $C) ;;
        pin10) v=$(t "$AUTOPIN" pin -c 1,0 -- $C) ;;
        one) if [ "$prog" = gromacs ]; then v=$(OMP_NUM_THREADS=1 t "$AUTOPIN" pin -c 1 -- $C); else v=$(t "$AUTOPIN" pin -c 1:1 -- $C); fi ;;
        first) v=$(AUTOPIN_MEMORY=off t "$AUTOPIN" run --report "$W/first.json" -- $C) ;;
        mem) v=$(AUTOPIN_MEMORY="$W/$prog.db" t "$AUTOPIN" run --report "$W/mem.json" -- $C) ;;
      esac
      [ "$v" != FAILED ] || exit 1
      echo "$v" >> "$W/$prog.$s"
    done
    python3 - "$W" "$prog" "$i" "$SIDES" <<'PY'
import json, sys
w, prog, i, sides = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split()
def what(name):
    try:
        d = json.load(open(f"{w}/{name}.json"))
    except Exception:
        return "no report"
    x = d.get("decision") or {}
    t = d.get("threads") or {}
    m = d.get("memory") or {}
    bits = [x.get("candidate") or "no decision", "count " + t.get("searched", "?")]
    if m.get("team_trial"):
        bits.append(m["team_trial"])
    return "; ".join(bits)
last = {s: float(open(f"{w}/{prog}.{s}").read().split()[-1]) for s in sides}
print("  round %s: " % i + "  ".join("%s %.2f" % (s, last[s]) for s in sides))
print("     first: %s\n     mem:   %s" % (what("first"), what("mem")))
PY
    i=$((i + 1))
  done
  python3 - "$W" "$prog" "$SIDES" <<'PY'
import random, statistics, sys
w, prog, sides = sys.argv[1], sys.argv[2], sys.argv[3].split()
v = {s: [float(x) for x in open(f"{w}/{prog}.{s}").read().split()] for s in sides}
med = {s: statistics.median(x) for s, x in v.items()}
print("  median s: " + "  ".join("%s %.2f" % (s, med[s]) for s in sides))
def ci(x):
    rng = random.Random(1)
    m = sorted(statistics.median(rng.choices(x, k=len(x))) for _ in range(2000))
    return m[50], m[1949]
def ratio(a, b, skip=0, label=""):
    r = [x / y for x, y in zip(v[a][skip:], v[b][skip:])]
    if not r:
        return
    lo, hi = ci(r)
    print(f"  {label}: {statistics.median(r):.3f} (95% CI {lo:.3f}–{hi:.3f}, {len(r)} rounds)")
best = min(["os", "pin01", "pin10", "one"], key=lambda s: med[s])
best2 = min(["os", "pin01", "pin10"], key=lambda s: med[s])
ratio("mem", best, 2, f"autopin with memory, round 3 on ÷ best of all ({best})")
ratio("first", best2, 0, f"autopin first run ÷ best 2-thread side ({best2})")
ratio("first", best, 0, f"autopin first run ÷ best of all ({best})")
ratio("mem", "one", 2, "autopin with memory, round 3 on ÷ one thread on CPU 1")
ratio("first", "os", 0, "autopin first run ÷ OS placement")
ratio("mem", "os", 2, "autopin with memory, round 3 on ÷ OS placement")
PY
done
