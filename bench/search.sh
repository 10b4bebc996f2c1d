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
(cd "$W/base" && CARGO_TARGET_DIR="$W/target-base" cargo build -q --release -p autopin-engine --example search_sim)
(cd "$ROOT" && cargo build -q --release -p autopin-engine --example search_sim)
"$W/target-base/release/examples/search_sim" "$SEEDS" > "$W/base.tsv"
"${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/search_sim" "$SEEDS" > "$W/new.tsv"
python3 - "$W/base.tsv" "$W/new.tsv" "$BASE" "$SEEDS" <<'PY'
import csv, sys
from collections import defaultdict
def load(p):
    return {(r["gaps"], r["noise"], r["k"], r["shift"]): r for r in csv.DictReader(open(p), delimiter="\t")}
base, new = load(sys.argv[1]), load(sys.argv[2])
print(f"{len(base)} cases × {sys.argv[4]} seeds; baseline {sys.argv[3]} vs today (same cases, same seeds)")
print(f"{'gaps':<7} {'noise':<12} {'lost_base_s':>11} {'lost_now_s':>10} {'base/now':>8} {'wrong_base':>10} {'wrong_now':>9} {'decide_base_s':>13} {'decide_now_s':>12}")
groups = defaultdict(lambda: [0.0] * 7)
for key in base:
    b, n = base[key], new[key]
    g = groups[key[:2]]
    for i, (x, f) in enumerate([(b, "lost_s"), (n, "lost_s"), (b, "wrong"), (n, "wrong"), (b, "decided_s"), (n, "decided_s")]):
        g[i] += float(x[f])
    g[6] += 1
tot = [0.0] * 7
for (gaps, noise), g in groups.items():
    c = g[6]
    print(f"{gaps:<7} {noise:<12} {g[0]/c:>11.3f} {g[1]/c:>10.3f} {g[0]/max(g[1],1e-9):>8.2f} {100*g[2]/c:>9.1f}% {100*g[3]/c:>8.1f}% {g[4]/c:>13.2f} {g[5]/c:>12.2f}")
    tot = [a + b for a, b in zip(tot, g)]
c = tot[6]
print(f"{'all':<7} {'':<12} {tot[0]/c:>11.3f} {tot[1]/c:>10.3f} {tot[0]/max(tot[1],1e-9):>8.2f} {100*tot[2]/c:>9.1f}% {100*tot[3]/c:>8.1f}% {tot[4]/c:>13.2f} {tot[5]/c:>12.2f}")
print(f"lost work, baseline / today: {tot[0]/max(tot[1],1e-9):.2f}x; wrong decisions: {100*tot[2]/c:.2f}% -> {100*tot[3]/c:.2f}%")
PY
