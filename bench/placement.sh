#!/usr/bin/env bash
# Placement benchmarks, measured in one run and printed side by side (not a test):
#  1. `autopin cpus EXPR` vs `likwid-pin -p -c EXPR` on this host: same answer? wall time ratio.
#  2. `autopin candidates -n N` on the big hwloc dumps: classes found and wall time.
# Usage: bench/placement.sh [path/to/autopin]   (default: target/release/autopin)
set -euo pipefail
# Every round searches afresh: remembered decisions would turn later rounds into checks.
export AUTOPIN_MEMORY=off
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/target/release/autopin}
[ -x "$bin" ] || { echo "build first: cargo build --release -p autopin (or pass the binary)"; exit 2; }
reps=20

ms() { # command... → mean wall milliseconds over $reps runs
  local t0 t1
  t0=$(date +%s%N)
  for _ in $(seq $reps); do "$@" >/dev/null 2>&1 || true; done
  t1=$(date +%s%N)
  echo $(( (t1 - t0) / reps / 1000000 ))
}

echo "== expressions on this host: autopin cpus vs likwid-pin -p -c ($reps runs each)"
if command -v likwid-pin >/dev/null; then
  printf '%-14s %-12s %-12s %-6s %8s %8s %6s\n' expr autopin likwid same ms_ours ms_lw ratio
  for e in N S0:0-1 E:N:2:1:1 S:scatter M0:0@S0:1 L:N:0-1 1,0; do
    ours=$("$bin" cpus -d , "$e" 2>&1 || true)
    theirs=$(likwid-pin -p -c "$e" 2>&1 || true)
    same=no; [ "$ours" = "$theirs" ] && same=yes
    a=$(ms "$bin" cpus "$e"); b=$(ms likwid-pin -p -c "$e")
    ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0) printf "%.1f", b / a; else print "-" }')
    printf '%-14s %-12s %-12s %-6s %8s %8s %6s\n' "$e" "$ours" "$theirs" "$same" "$a" "$b" "$ratio"
  done
else
  echo "likwid-pin not installed: skipped"
fi

echo
echo "== candidates on hwloc dumps (classes, wall ms)"
data=$here/../tests/data/hwloc-linux
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf '%-34s %4s %10s %8s\n' dump n classes ms
for d in 16em64t-4s2c2t 64fake-4n2s2ca2c2t 128arm-2pa2n8cluster4co 256ppc-8n8s4t; do
  [ -f "$data/$d.tar.bz2" ] || { echo "$d: missing from tests/data" >&2; exit 1; }
  mkdir -p "$tmp/$d"; tar xjf "$data/$d.tar.bz2" -C "$tmp/$d"
  root=$(find "$tmp/$d" -mindepth 1 -maxdepth 1 -type d | head -1)
  for n in 2 4 8 16; do
    classes=$("$bin" candidates -n "$n" --max 0 --sysfs-root "$root" 2>&1 >/dev/null | awk '{ if ($1 == "note:") print "~" $3 " (even: listed)"; else print $1 }')
    t=$(reps=3; ms "$bin" candidates -n "$n" --sysfs-root "$root")
    printf '%-34s %4s %10s %8s\n' "$d" "$n" "$classes" "$t"
  done
done
