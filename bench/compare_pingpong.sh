#!/usr/bin/env bash
# The issue-6 experiment: two threads ping-ponging through a spin flag, run under the OS's
# placement (none), on two CPUs (0,1) and both on one CPU (0,0), N interleaved rounds.
# Prints autopin compare's table and writes JSON / SVG next to it.
# Usage: bench/compare_pingpong.sh [RUNS] [ITERS] [OUTDIR]
set -euo pipefail
# Every round searches afresh: remembered decisions would turn later rounds into checks.
export AUTOPIN_MEMORY=off
runs=${1:-10}
iters=${2:-20000}
out=${3:-$(mktemp -d /tmp/autopin-compare-bench.XXXXXX)}
here=$(cd "$(dirname "$0")" && pwd)
autopin=${AUTOPIN:-$here/../target/release/autopin}
[ -x "$autopin" ] || { echo "build autopin first (cargo build --release -p autopin) or set AUTOPIN" >&2; exit 2; }
mkdir -p "$out"
gcc -O2 -pthread "$here/compare_pingpong.c" -o "$out/pingpong"
echo "host: $(nproc) CPUs online, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"$autopin" compare -n "$runs" --seed 1 \
  --strategy none --strategy 0,1 --strategy 0,0 \
  --export-json "$out/pingpong.json" --svg "$out/pingpong.svg" \
  -- "$out/pingpong" "$iters"
# Cross-check with scipy (when installed): the one-sided p-values from the raw runs, and
# 0,0 against 0,1, which the table (baseline none) does not show.
python3 - "$out/pingpong.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
by = {s["strategy"]: s for s in d["strategies"]}
wall = lambda k: [r["wall_s"] for r in by[k]["runs"] if r["success"]]
print("median wall time ratios: none/0,1 = %.2f   0,0/0,1 = %.2f   0,0/none = %.2f" % (
    by["none"]["median_s"] / by["0,1"]["median_s"],
    by["0,0"]["median_s"] / by["0,1"]["median_s"],
    by["0,0"]["median_s"] / by["none"]["median_s"]))
try:
    from scipy import stats
except ImportError:
    sys.exit(0)
for a, b in [("0,1", "none"), ("0,0", "none"), ("0,0", "0,1")]:
    x, y = wall(a), wall(b)
    alt = "less" if sum(x) / len(x) < sum(y) / len(y) else "greater"
    t = stats.ttest_ind(x, y, equal_var=False, alternative=alt).pvalue
    # exact when there are no ties, as autopin does (scipy's default switches at n >= 8)
    exact = len(set(x + y)) == len(x + y)
    u = stats.mannwhitneyu(x, y, alternative=alt, method="exact" if exact else "asymptotic").pvalue
    mine = by[a] if b == d["baseline"] else None
    extra = "   autopin: p(t)=%.3g p(MWU)=%.3g" % (mine["p_value_welch"], mine["p_value_mwu"]) if mine else ""
    print("scipy %-4s vs %-4s: %s, p(t)=%.3g p(MWU)=%.3g%s" % (a, b, "faster" if alt == "less" else "slower", t, u, extra))
PY
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg); results in $out"
