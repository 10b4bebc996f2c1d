#!/bin/sh
# The search on real OpenMP programs beside a busy CPU: a spinning shell owns CPU 0, and
# each program runs with 2 OpenMP threads under `autopin run` (default options: topology
# candidates, the OS placement among them, the OpenMP progress objective) and under fixed
# references: the OS placement (no pinning) and each thread-to-CPU pinning worth having
# (`autopin pin -c 0,1` and `-c 1,0`; `1,1` is left out, it is 100× slower here). Sides run
# in interleaved rounds, the order rotating, so drift of the machine's load hits all alike.
# Printed per program: median seconds per side, then the median over rounds of
# autopin ÷ best fixed pinning (the fastest reference by median, chosen with hindsight) and
# autopin ÷ OS placement, the median time of the decision from the program's start, and the
# median search cost the report states (and its median share of autopin's run time), with a
# 95% bootstrap interval for each median ratio. With AUTOPIN_OLD=/path/to/autopin a second autopin
# runs beside the first on the same rounds (e.g. an older build), for a side-by-side.
# Programs: workloads/ompwork -m imbalance (a master computing alone between barriers),
# workloads/syncbench -s 0 (back-to-back barriers, with its own heartbeat), and GROMACS
# mdrun on a 2.5 nm water box when `gmx` is installed (Debian's gromacs package); and, only
# when PROGS names it, `serial`: ompwork -m imbalance after a 2 s serial start-up (-s 2: it
# computes alone, then starts its OpenMP threads), whose threads come after a search of its
# first thread would have begun.
# PINNINGS="0,1;1,0;0,0;1,1" gives both autopins these pinnings (and the OS placement) instead
# of the topology's candidates: with four pinnings or more the race scouts them first.
# BUSY=0 runs on an idle machine (no neighbour; the OS placement is then the reference to
# beat); PROGS="ompwork" picks programs (default: ompwork syncbench gromacs; `serial` too
# when named). A round's line adds how many searches autopin began when there was more than
# one (a re-search: a rate drop, or threads that came after the search began).
# usage: bench/search_real.sh [ROUNDS] [SECONDS_SCALE]   (default 5 rounds, scale 1 ≈ 6–20 s a run)
set -eu
# Every round searches afresh: remembered decisions would turn later rounds into checks.
export AUTOPIN_MEMORY=off
ROUNDS=${1:-5}
SCALE=${2:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
AUTOPIN=${AUTOPIN:-$ROOT/target/release/autopin}
. "$ROOT/bench/programs_common.sh"
PROGS=${PROGS:-$ALL}
cmd() {
  case $1 in
    ompwork) echo "$W/ompwork -m imbalance -r $(sc 250000)" ;;
    serial) echo "$W/ompwork -m imbalance -s 2 -r $(sc 120000)" ;;
    syncbench) echo "$W/syncbench -s 0 -b $(sc 4000000) -r 1" ;;
    gromacs) echo "gmx mdrun -s $W/md.tpr -ntmpi 1 -ntomp 2 -pin off -nb cpu -nsteps $(sc 4000) -deffnm $W/gmx" ;;
    msgmerge) echo "msgmerge -q $W/def.po $W/ref.pot -o $W/out.po" ;;
  esac
}
t() { s=$(date +%s.%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s.%N); python3 -c "print($e - $s)"; }
if [ "${BUSY:-1}" = 1 ]; then
  taskset -c 0 sh -c 'while :; do :; done' & BUSY_PID=$!
  echo "busy neighbour: a spinning shell on CPU 0; $ROUNDS rounds; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
else
  echo "idle machine (BUSY=0); $ROUNDS rounds; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
fi
SIDES="os pin01 pin10 ap"
CANDS=${PINNINGS:+--unpinned --schedule $PINNINGS}
[ -n "${AUTOPIN_OLD:-}" ] && SIDES="$SIDES old"
for prog in $PROGS; do
  C=$(cmd "$prog")
  echo "== $prog: $C"
  for s in $SIDES; do : > "$W/$prog.$s"; done
  : > "$W/$prog.at"; : > "$W/$prog.cost"; : > "$W/$prog.oldat"
  i=1
  while [ "$i" -le "$ROUNDS" ]; do
    order=$(python3 -c "s='$SIDES'.split(); k=$i % len(s); print(' '.join(s[k:] + s[:k]))")
    for s in $order; do
      case $s in
        os) v=$(t $C) ;;
        pin01) v=$(t "$AUTOPIN" pin -c 0,1 -- $C) ;;
        pin10) v=$(t "$AUTOPIN" pin -c 1,0 -- $C) ;;
        ap) v=$(t "$AUTOPIN" run $CANDS --report "$W/ap.json" -- $C) ;;
        old) v=$(t "$AUTOPIN_OLD" run $CANDS --report "$W/old.json" -- $C) ;;
      esac
      echo "$v" >> "$W/$prog.$s"
    done
    python3 - "$W" "$prog" "$i" "$SIDES" <<'PY'
import json, sys
w, prog, i, sides = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split()
def rep(name):
    try:
        d = json.load(open(f"{w}/{name}.json"))
    except Exception:
        return None, None, "no report"
    x = d.get("decision") or {}
    n = len(d.get("searches") or [])
    searches = f" | {n} searches" if n > 1 else ""
    return x.get("at"), d.get("search_cost"), (x.get("candidate") or "none") + " | " + (x.get("reason") or d.get("incomplete_reason") or "") + searches
at, cost, what = rep("ap")
open(f"{w}/{prog}.at", "a").write(f"{at if at is not None else 'nan'}\n")
open(f"{w}/{prog}.cost", "a").write(f"{cost if cost is not None else 'nan'}\n")
last = {s: float(open(f"{w}/{prog}.{s}").read().split()[-1]) for s in sides}
line = "  round %s: " % i + "  ".join("%s %.2f" % (s, last[s]) for s in sides)
print(line + "  | autopin decided at %s: %s" % ("%.2f s" % at if at is not None else "-", what))
if "old" in sides:
    oat, _, owhat = rep("old")
    open(f"{w}/{prog}.oldat", "a").write(f"{oat if oat is not None else 'nan'}\n")
    print("           old decided at %s: %s" % ("%.2f s" % oat if oat is not None else "-", owhat))
PY
    i=$((i + 1))
  done
  python3 - "$W" "$prog" "$SIDES" <<'PY'
import math, random, statistics, sys
w, prog, sides = sys.argv[1], sys.argv[2], sys.argv[3].split()
v = {s: [float(x) for x in open(f"{w}/{prog}.{s}").read().split()] for s in sides}
med = {s: statistics.median(x) for s, x in v.items()}
refs = ["os", "pin01", "pin10"]
best = min(refs, key=lambda s: med[s])
print("  median s: " + "  ".join("%s %.2f" % (s, med[s]) for s in sides) + f"  (best fixed: {best})")
def median_ci(x):
    # 95% percentile bootstrap interval of the median of the rounds' ratios: with a few
    # rounds on a noisy machine it is wide, and a goal inside it is neither met nor missed.
    rng = random.Random(1)
    meds = sorted(statistics.median(rng.choices(x, k=len(x))) for _ in range(2000))
    return meds[50], meds[1949]
for side in [s for s in ("ap", "old") if s in sides]:
    rbs = [a / b for a, b in zip(v[side], v[best])]
    ros = [a / b for a, b in zip(v[side], v["os"])]
    (bl, bh), (ol, oh) = median_ci(rbs), median_ci(ros)
    print(f"  {'autopin' if side == 'ap' else 'old autopin'} / best fixed ({best}): {statistics.median(rbs):.3f} (95% CI {bl:.3f}–{bh:.3f})   / OS placement: {statistics.median(ros):.3f} (95% CI {ol:.3f}–{oh:.3f})")
raw = lambda f: [float(x) for x in open(f"{w}/{prog}.{f}").read().split()]
fin = lambda f: [x for x in raw(f) if not math.isnan(x)]
costs = raw("cost")
at, cost = fin("at"), [c for c in costs if not math.isnan(c)]
# The search's cost as the report states it, over autopin's own run time (round by round):
# a figure with far less spread than the runs' times, as it comes from one run's probes.
share = [c / t for c, t in zip(costs, v["ap"]) if not math.isnan(c)]
print("  autopin decision at (median): %s; search cost (median): %s, %s of autopin's run time" % (
    "%.2f s" % statistics.median(at) if at else "never", "%.2f s" % statistics.median(cost) if cost else "-",
    "%.1f%%" % (100 * statistics.median(share)) if share else "-"))
if "old" in sides:
    oat = fin("oldat")
    print("  old autopin decision at (median): %s" % ("%.2f s" % statistics.median(oat) if oat else "never"))
PY
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
