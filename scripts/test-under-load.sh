#!/usr/bin/env bash
# Runs the whole test suite N times (default 5) beside `stress-ng --cpu $(nproc)`, as CI
# machines shared with other work run it, and prints how often each test failed, the time
# each run took, and what the runs left in /tmp or /dev/shm.
# usage: scripts/test-under-load.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
bash scripts/deps.sh test
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --workspace --all-targets --quiet
work=$(mktemp -d)
load=
trap '[ -n "$load" ] && kill "$load" 2>/dev/null; rm -rf "$work"' EXIT
ls -A /tmp /dev/shm 2>/dev/null | sort -u >"$work/before"
: >"$work/failures"
for i in $(seq 1 "$runs"); do
    stress-ng --cpu "$(nproc)" --timeout 0 --quiet &
    load=$!
    mkdir -p "$work/tmp$i"
    start=$(date +%s)
    set +e
    TMPDIR="$work/tmp$i" AUTOPIN_SKIP_LOG="$work/skip$i" \
        cargo test --workspace --no-fail-fast >"$work/log$i" 2>&1
    set -e
    kill "$load" 2>/dev/null
    wait "$load" 2>/dev/null || true
    load=
    rm -rf "$work/tmp$i"
    grep -E '^test .* \.\.\. FAILED$' "$work/log$i" | awk '{print $2}' >>"$work/failures" || true
    n=$(grep -cE '^test .* \.\.\. FAILED$' "$work/log$i" || true)
    echo "run $i: $((($(date +%s) - start) / 60)) min $((($(date +%s) - start) % 60)) s, $n failed, $(wc -l <"$work/skip$i" 2>/dev/null || echo 0) skipped"
done
echo "failures per test over $runs runs:"
if [ -s "$work/failures" ]; then sort "$work/failures" | uniq -c | sort -rn; else echo "  none"; fi
ls -A /tmp /dev/shm 2>/dev/null | sort -u >"$work/after"
left=$(comm -13 "$work/before" "$work/after" | grep -v -e '^autopin-slurm$' -e '^$' || true)
echo "left in /tmp or /dev/shm: ${left:-nothing}"
