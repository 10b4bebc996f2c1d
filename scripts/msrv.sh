#!/usr/bin/env bash
# Builds the workspace with the toolchain named by `rust-version` in Cargo.toml, so the
# declared minimum stays true. Where that toolchain is missing and rustup cannot fetch it
# (no network), the check is skipped with a message, not failed.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
[ -n "$msrv" ] || { echo "msrv.sh: no rust-version in Cargo.toml" >&2; exit 1; }
has_toolchain() { rustup toolchain list 2>/dev/null | grep -q "^$msrv[-.]"; }
if ! has_toolchain; then
    timeout 300 rustup toolchain install "$msrv" --profile minimal >/dev/null 2>&1 || true
fi
if ! has_toolchain; then
    echo "msrv.sh: toolchain $msrv (rust-version) not installed and rustup could not fetch it; MSRV check skipped" >&2
    exit 0
fi
echo "msrv.sh: cargo +$msrv check --workspace --all-targets" >&2
CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}/msrv cargo "+$msrv" check --workspace --all-targets --quiet
echo "msrv.sh: builds with Rust $msrv" >&2
