#!/usr/bin/env bash
# Builds the workspace with the toolchain named by `rust-version` in Cargo.toml (so the
# declared minimum stays true), and lists unused dependencies when cargo-machete is there.
set -euo pipefail
cd "$(dirname "$0")/.."
msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
rustup toolchain install "$msrv" --profile minimal >/dev/null
CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}/msrv cargo "+$msrv" check --workspace --all-targets
if command -v cargo-machete >/dev/null; then
    cargo machete
else
    echo "msrv.sh: cargo-machete not installed (cargo install cargo-machete); unused-dependency check skipped" >&2
fi
