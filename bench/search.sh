#!/bin/sh
# The search in the simulator: today's race against an earlier one (by default the race
# before the lost-work rewrite, commit 24d5385), on the same simulated programs and seeds
# (crates/autopin-engine/examples/search_sim.rs: 2 to 12 candidates, gaps from 1.0× to 5×,
# quiet, noisy, heavy-tailed and swinging candidates, a neighbour arriving mid-search).
# Both are built from the same simulator source; the table prints, side by side, the mean
# lost work (seconds of a 60 s program at the best candidate's rate) and the rate of wrong
# decisions (more than 2% slower than the best), per gap and noise scenario, then overall.
# usage: bench/search.sh [SEEDS] [BASE_COMMIT]   (default 200 seeds a case, 24d5385)
set -eu
SEEDS=${1:-200}
BASE=${2:-24d5385}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d)
cleanup() { git -C "$ROOT" worktree remove --force "$W/base" 2>/dev/null || true; rm -rf "$W"; }
trap cleanup EXIT
git -C "$ROOT" worktree add -q --detach "$W/base" "$BASE"
mkdir -p "$W/base/crates/autopin-engine/examples"
cp "$ROOT/crates/autopin-engine/examples/search_sim.rs" "$W/base/crates/autopin-engine/examples/"
echo "building the baseline ($BASE) and today's search..." >&2
(cd "$W/base" && CARGO_TARGET_DIR="$W/target-base" RUSTFLAGS="--cfg old_race" cargo build -q --release -p autopin-engine --example search_sim)
(cd "$ROOT" && cargo build -q --release -p autopin-engine --example search_sim)
"$W/target-base/release/examples/search_sim" "$SEEDS" > "$W/base.tsv"
"${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/search_sim" "$SEEDS" > "$W/new.tsv"
python3 - "$W/base.tsv" "$W/new.tsv" "$BASE" "$SEEDS" <<'PY'
import csv, sys
from collections import defaultdict
def load(p):
    return {(r["gaps"], r["noise"], r["k"], r["shift"]): r for r in csv.DictReader(open(p), delimiter="\t")}
base, new = load(sys.argv[1]), load(sys.argv[2])
F = ["lost_s", "search_lost_s", "wrong", "decided_s"]
groups = defaultdict(lambda: defaultdict(float))
for key in base:
    for side, d in (("b", base), ("n", new)):
        for f in F:
            groups[key[:2]][side + f] += float(d[key][f])
    groups[key[:2]]["c"] += 1
print(f"{len(base)} cases x {sys.argv[4]} seeds; baseline {sys.argv[3]} (b) vs today (n), same cases and seeds")
print("lost: seconds of a 60 s program's work at the best candidate's rate (search: the part lost while searching);")
print("wrong: decisions more than 2% slower than the best; decided: seconds until the decision")
print(f"{'gaps':<7} {'noise':<12} {'lost b':>7} {'lost n':>7} {'b/n':>5} {'search b':>8} {'search n':>8} {'wrong b':>7} {'wrong n':>7} {'decided b':>9} {'decided n':>9}")
tot = defaultdict(float)
for g, v in groups.items():
    c = v["c"]
    ratio = v["blost_s"] / v["nlost_s"] if v["nlost_s"] > 0 else float("nan")
    print(f"{g[0]:<7} {g[1]:<12} {v['blost_s']/c:>7.3f} {v['nlost_s']/c:>7.3f} {ratio:>5.2f} {v['bsearch_lost_s']/c:>8.3f} {v['nsearch_lost_s']/c:>8.3f} {100*v['bwrong']/c:>6.1f}% {100*v['nwrong']/c:>6.1f}% {v['bdecided_s']/c:>9.2f} {v['ndecided_s']/c:>9.2f}")
    for k, x in v.items():
        tot[k] += x
c = tot["c"]
print(f"all: lost work {tot['blost_s']/c:.3f} -> {tot['nlost_s']/c:.3f} s (baseline/today {tot['blost_s']/tot['nlost_s']:.2f}x), "
      f"while searching {tot['bsearch_lost_s']/c:.3f} -> {tot['nsearch_lost_s']/c:.3f} s; "
      f"wrong decisions {100*tot['bwrong']/c:.2f}% -> {100*tot['nwrong']/c:.2f}%")
PY
