#!/usr/bin/env bash
# Benchmark of `autopin measure latency`: time for the full matrix, stability (two runs back
# to back), extrapolation to a 160-context machine (MCTOP reports 96 s there), and, when
# core-to-core-latency is installed, the same numbers for it side by side.
#
#   bench/latency.sh                 # autopin only (core-to-core-latency if found on PATH
#                                    #   or in $C2C_ROOT/bin)
#   C2C_INSTALL=1 bench/latency.sh   # first `cargo install core-to-core-latency` into a temp root
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --release -q -p autopin
BIN="$CARGO_TARGET_DIR/release/autopin"
C2C_ROOT="${C2C_ROOT:-/tmp/c2c-root}"
if [[ "${C2C_INSTALL:-0}" == 1 && ! -x "$C2C_ROOT/bin/core-to-core-latency" ]]; then
  cargo install -q core-to-core-latency --root "$C2C_ROOT"
fi
C2C="$(command -v core-to-core-latency || true)"
[[ -z "$C2C" && -x "$C2C_ROOT/bin/core-to-core-latency" ]] && C2C="$C2C_ROOT/bin/core-to-core-latency"

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

run_autopin() { # $1 = output json
  local t0 t1
  t0=$(date +%s.%N)
  "$BIN" measure latency --json >"$1"
  t1=$(date +%s.%N)
  echo "$t0 $t1" >"$1.wall"
}
run_autopin "$TMP/a1.json"
run_autopin "$TMP/a2.json"

C2C_NOTE="core-to-core-latency: not installed (C2C_INSTALL=1 installs it into $C2C_ROOT)"
if [[ -n "$C2C" ]]; then
  for i in 1 2; do
    t0=$(date +%s.%N)
    "$C2C" --csv >"$TMP/c$i.csv" 2>"$TMP/c$i.err"
    t1=$(date +%s.%N)
    echo "$t0 $t1" >"$TMP/c$i.wall"
  done
  C2C_NOTE=""
fi

python3 - "$TMP" "$C2C_NOTE" <<'PY'
import json, sys, os, csv
tmp, note = sys.argv[1], sys.argv[2]
def wall(p):
    a, b = map(float, open(p).read().split()); return b - a
def pairs_of(m):
    n = len(m); return [(i, j, m[i][j]) for i in range(n) for j in range(i + 1, n)]
def c2c_matrix(p):
    rows = [r for r in csv.reader(open(p)) if r]
    n = len(rows); m = [[0.0] * n for _ in range(n)]
    for i, r in enumerate(rows):
        for j, v in enumerate(r):
            if v.strip() and j < i: m[i][j] = m[j][i] = float(v)
    return m
def stability(m1, m2):
    d = [abs(a - b) / max(min(a, b), 1e-9) for (_, _, a), (_, _, b) in zip(pairs_of(m1), pairs_of(m2))]
    d.sort(); return d[len(d) // 2], d[-1]
a = [json.load(open(f"{tmp}/a{i}.json")) for i in (1, 2)]
n = len(a[0]["cpus"]); npairs = n * (n - 1) // 2
P160 = 160 * 159 // 2
print(f"machine: {n} CPUs, {npairs} pair(s)")
print(f"{'tool':<22} {'run':>3} {'wall s':>8} {'per pair ms':>12} {'mean ns':>9}  extrapolated to 160 contexts ({P160} pairs)")
rows = {}
for i, r in enumerate(a, 1):
    w = wall(f"{tmp}/a{i}.json.wall"); pp = r["per_pair_us"] / 1000
    mean = sum(v for _, _, v in pairs_of(r["ns"])) / npairs
    print(f"{'autopin':<22} {i:>3} {w:>8.3f} {pp:>12.3f} {mean:>9.1f}  {P160 * pp / 1000:8.1f} s (MCTOP: 96 s)")
med, worst = stability(a[0]["ns"], a[1]["ns"])
print(f"autopin stability run1 vs run2: median relative difference {med*100:.1f}%, worst pair {worst*100:.1f}%")
print(f"autopin spread (IQR/median) run1: max {max(max(r) for r in a[0]['spread'])*100:.1f}%, re-measured pairs {a[0]['remeasured_pairs']}")
print(f"autopin inference run1: " + "; ".join(l for l in [a[0]['inference']['notes'] and 'notes: ' + ' | '.join(a[0]['inference']['notes']) or 'no notes']))
if note:
    print(note)
else:
    c = [c2c_matrix(f"{tmp}/c{i}.csv") for i in (1, 2)]
    for i, m in enumerate(c, 1):
        w = wall(f"{tmp}/c{i}.wall"); pp = w / max(npairs, 1)
        mean = sum(v for _, _, v in pairs_of(m)) / npairs
        print(f"{'core-to-core-latency':<22} {i:>3} {w:>8.3f} {pp*1000:>12.3f} {mean:>9.1f}  {P160 * pp:8.1f} s (its per-pair time includes process start)")
    med, worst = stability(c[0], c[1])
    print(f"core-to-core-latency stability: median relative difference {med*100:.1f}%, worst pair {worst*100:.1f}%")
    am = sum(v for _, _, v in pairs_of(a[0]["ns"])) / npairs
    cm = sum(v for _, _, v in pairs_of(c[0])) / npairs
    print(f"ratio autopin/core-to-core-latency mean latency: {am/cm:.2f} (autopin times one transfer; c2c bench 1 times a CAS round trip / 2)")
PY
