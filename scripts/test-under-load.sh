#!/usr/bin/env bash
# Runs the whole test suite N times (default 5) beside `stress-ng --cpu $(nproc)`, as CI
# machines shared with other work run it, and prints how often each test failed, the time
# each run took, and what the runs left in /tmp or /dev/shm.
# usage: [KEEP_LOGS=DIR] scripts/test-under-load.sh [N]
# The log and skip list of every run with a failure are kept (copied to KEEP_LOGS, by default
# a new directory under ${TMPDIR:-/tmp}, named at the end): a failure under load is often
# hard to reproduce, so its log is the one chance to diagnose it.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
bash scripts/deps.sh test
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --workspace --all-targets --quiet
# A named work directory: the runs' logs live here for the whole series, and a generic
# tmp.XXXXXX name is what other work sweeping /tmp would take for its own leftovers.
work=$(mktemp -d "${TMPDIR:-/tmp}/autopin-under-load.XXXXXX")
load=
trap '[ -n "$load" ] && kill "$load" 2>/dev/null; rm -rf "$work"' EXIT
ls -A /tmp /dev/shm 2>/dev/null | sort -u >"$work/before"
: >"$work/failures"
keep=
keep_dir() {
    # Created on the first failure only, so a clean series leaves nothing behind.
    if [ -z "$keep" ]; then
        if [ -n "${KEEP_LOGS:-}" ]; then
            keep=$KEEP_LOGS
            mkdir -p "$keep"
        else
            keep=$(mktemp -d "${TMPDIR:-/tmp}/autopin-under-load-logs.XXXXXX")
        fi
        keep=$(cd "$keep" && pwd)
    fi
}
for i in $(seq 1 "$runs"); do
    stress-ng --cpu "$(nproc)" --timeout 0 --quiet &
    load=$!
    mkdir -p "$work/tmp$i"
    : >"$work/skip$i"
    start=$(date +%s)
    set +e
    TMPDIR="$work/tmp$i" AUTOPIN_SKIP_LOG="$work/skip$i" \
        cargo test --workspace --no-fail-fast >"$work/log$i" 2>&1
    status=$?
    set -e
    kill "$load" 2>/dev/null
    wait "$load" 2>/dev/null || true
    load=
    # What the tests left in their TMPDIR would be left in /tmp on a machine that does not
    # redirect it. Two per-user caches are kept there on purpose and are not counted: the
    # testkit's (extracted dumps, built C programs) and autopin's own (autopin-UID: the
    # preload library, written once and reused by every run).
    residue=$(cd "$work/tmp$i" && ls -A | grep -v -e '^autopin-testkit-[0-9]*$' -e '^autopin-[0-9]*$' || true)
    rm -rf "$work/tmp$i"
    grep -E '^test .* \.\.\. FAILED$' "$work/log$i" | awk '{print $2}' >>"$work/failures" || true
    n=$(grep -cE '^test .* \.\.\. FAILED$' "$work/log$i" || true)
    if [ "$status" -ne 0 ] && [ "$n" -eq 0 ]; then
        # A binary that failed to build or crashed names no failing test: never call it a pass.
        n=1
        echo "(cargo test exited $status without a failing test: build error or crash)" >>"$work/failures"
    fi
    elapsed=$(($(date +%s) - start))
    echo "run $i: $((elapsed / 60)) min $((elapsed % 60)) s, $n failed, $(wc -l <"$work/skip$i") skipped${residue:+, left in its TMPDIR: $(echo $residue)}"
    if [ "$n" -gt 0 ]; then
        keep_dir
        cp "$work/log$i" "$keep/log$i"
        cp "$work/skip$i" "$keep/skip$i"
    fi
done
echo "failures per test over $runs runs:"
if [ -s "$work/failures" ]; then sort "$work/failures" | uniq -c | sort -rn; else echo "  none"; fi
ls -A /tmp /dev/shm 2>/dev/null | sort -u >"$work/after"
left=$(comm -13 "$work/before" "$work/after" | grep -v -e '^autopin-slurm$' -e '^/' -e '^$' \
    -e "^$(basename "${keep:-/-}")\$" || true)
echo "left in /tmp or /dev/shm (by the tests or by other work on the machine): ${left:-nothing}"
[ -z "$keep" ] || echo "logs of the runs with failures: $keep"
