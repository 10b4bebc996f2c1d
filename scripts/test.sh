#!/usr/bin/env bash
# Installs what is missing, then runs every check autopin's CI runs: formatting, clippy with
# warnings as errors, and the whole test suite (unit, integration, real-dump comparisons).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
cargo fmt --all --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo build --workspace --all-targets --quiet
cargo test --workspace --quiet 2>&1
