#!/usr/bin/env bash
# Installs what is missing, then runs every check autopin's CI runs: formatting, clippy with
# warnings as errors, unused dependencies (cargo-machete), the build with the declared
# rust-version, and the whole test suite (unit, integration, real-dump comparisons).
# The suite runs to the end (--no-fail-fast) and closes with one line of counts; a test that
# could not run because an optional tool is absent is counted as skipped, not passed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh test
export PATH="$HOME/.cargo/bin:$PATH"
echo "== format, lint, build" >&2
cargo fmt --all --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo build --workspace --all-targets --quiet
# The engine makes no system call (docs/architecture.md): no libc, no rustix in its tree.
echo "== the engine's dependency tree" >&2
for crate in libc rustix; do
    held=$(cargo tree -p autopin-engine -e normal -i "$crate" 2>/dev/null || true)
    if [ -n "$held" ]; then
        echo "autopin-engine depends on $crate:" >&2
        echo "$held" >&2
        exit 1
    fi
done
echo "== unused dependencies (cargo-machete)" >&2
cargo machete
# The declared rust-version must build; CI machines have the toolchain (scripts/msrv.sh).
msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
if rustup toolchain list 2>/dev/null | grep -q "^$msrv[-.]"; then
    echo "== minimum Rust version $msrv" >&2
    bash scripts/msrv.sh
else
    echo "== minimum Rust version $msrv: toolchain not installed, check skipped (scripts/msrv.sh installs it)" >&2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Everything the tests create in a temporary directory (their files, the built C test
# programs, autopin's own runtime directory) lands here and goes with it: a run leaves
# nothing in /tmp. What else appears in /tmp or /dev/shm meanwhile is listed at the end.
mkdir -p "$work/tmp"
export TMPDIR="$work/tmp"
ls -A /tmp /dev/shm 2>/dev/null | sort -u >"$work/before"
export AUTOPIN_SKIP_LOG="$work/skipped"
: >"$AUTOPIN_SKIP_LOG"
echo "== tests" >&2
set +e
cargo test --workspace --no-fail-fast 2>&1 | tee "$work/log"
status=${PIPESTATUS[0]}
set -e

# Each test binary prints "test result: ok. N passed; M failed; K ignored; ...".
read -r passed failed ignored < <(awk '/^test result:/ {
        for (i = 1; i <= NF; i++) {
            if ($(i+1) ~ /^passed/) p += $i
            if ($(i+1) ~ /^failed/) f += $i
            if ($(i+1) ~ /^ignored/) g += $i
        }
    } END { print p+0, f+0, g+0 }' "$work/log")
skipped=$(wc -l <"$AUTOPIN_SKIP_LOG")
if [ "$skipped" -gt 0 ]; then
    echo "skipped tests (optional tool or resource missing):"
    sed 's/^/  /' "$AUTOPIN_SKIP_LOG"
fi
[ "$ignored" -eq 0 ] || echo "($ignored ignored: opt-in long runs, see their doc comments)"
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
    # A binary that failed to build or crashed reports no counts: never call that a pass.
    failed=1
    echo "cargo test exited $status without a failing test count (build error or crash?)"
fi
ls -A /tmp /dev/shm 2>/dev/null | sort -u >"$work/after"
left=$(comm -13 "$work/before" "$work/after" | grep -v -e '^autopin-slurm$' -e '^/' -e '^$' || true)
[ -z "$left" ] || echo "left in /tmp or /dev/shm during the run (by the tests or by other work): $(echo $left)"
echo "summary: $((passed - skipped)) passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$status" -eq 0 ]
