#!/bin/sh
# The search on every real topology in tests/data (hwloc sysfs dumps, 2–256 PUs: hybrid,
# offline CPUs, CPU-less nodes) × every program model of `autopin simulate` (docs/simulate.md)
# × three thread counts (4, half the cores, all the cores), SEEDS seeds each: one line per
# case with the medians of rate ÷ optimum, the lowest rate ÷ optimum, when it decided,
# the work the search lost and autopin's CPU time per simulated tick. Then the floor over
# every case: the lowest median rate ÷ optimum and the latest median decision.
# usage: bench/simulate.sh [SEEDS]   (default 10 seeds; programs of 20 s, phases 40 s)
#        MODELS="barrier+team" bench/simulate.sh 5   (only those models; barrier+team is the
#        barrier model with the thread count searched, `simulate --openmp-team`)
#        RACE="deadline=2.5" bench/simulate.sh 5   (the race's settings changed, `simulate --race`)
set -eu
SEEDS=${1:-10}
MODELS=${MODELS:-"bandwidth pairs smt barrier barrier+team phases"}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
AUTOPIN=${AUTOPIN:-$ROOT/target/release/autopin}
[ -x "$AUTOPIN" ] || (cd "$ROOT" && cargo build -q --release -p autopin)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
printf 'topology\tmodel\tthreads\tratio\tlowest\tdecided_s\tlost_s\tms_per_tick\n'
for dump in "$ROOT"/tests/data/hwloc-linux/*.tar.bz2; do
  name=$(basename "$dump" .tar.bz2)
  cores=$("$AUTOPIN" topology --sysfs-root "$dump" --format json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(len({p["core"] for p in d["pus"] if p.get("allowed", True) and p.get("online", True)}))' 2>/dev/null || echo 0)
  [ "$cores" -ge 2 ] || continue
  for n in $(python3 -c "print(' '.join(str(x) for x in sorted({min(4, $cores), max(1, $cores // 2), $cores})))"); do
    for model in $MODELS; do
      # barrier+team: the barrier model as an OpenMP program whose teams may change
      # mid-run, the thread count searched with the pinnings (--openmp-team).
      case $model in
        barrier+team) set -- --model barrier --openmp-team ;;
        *) set -- --model "$model" ;;
      esac
      if [ -n "${RACE:-}" ]; then set -- "$@" --race "$RACE"; fi
      if "$AUTOPIN" simulate --sysfs-root "$dump" "$@" -n "$n" --seeds "$SEEDS" \
          --json "$W/o.json" >/dev/null 2>"$W/err"; then
        python3 - "$W/o.json" "$name" "$model" "$n" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
m = d["median"]
at = m["decided_at"]
print("%s\t%s\t%s\t%.3f\t%.3f\t%s\t%.2f\t%.3f" % (sys.argv[2], sys.argv[3], sys.argv[4], m["ratio"],
      m["lowest_ratio"], "%.2f" % at if at is not None else "never", m["lost"], 1e3 * m["cpu_per_tick"]))
PY
      else
        printf '%s\t%s\t%s\terror: %s\n' "$name" "$model" "$n" "$(head -1 "$W/err")"
      fi
    done
  done
done | tee "$W/table"
python3 - "$W/table" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if "\terror" not in l]
ratios = [float(r[3]) for r in rows]
at = [float(r[5]) if r[5] != "never" else float("inf") for r in rows]
tick = [float(r[7]) for r in rows]
print(f"cases: {len(rows)}; lowest median rate ÷ optimum {min(ratios):.3f}; "
      f"cases below 0.95: {sum(r < 0.95 for r in ratios)}; latest median decision {max(at):.2f} s; "
      f"cases deciding after 3 s: {sum(a > 3 for a in at)}; most CPU a tick {max(tick):.3f} ms")
PY
