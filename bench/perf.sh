#!/bin/sh
# What this machine lets autopin count, and what counting costs here (autopin-perf).
# Prints probe results, busy-thread rates, per-switch cost of per-thread counting
# (plain vs counted ping-pong ratios measured in the same run), energy, heartbeat cost.
set -e
# Every round searches afresh: remembered decisions would turn later rounds into checks.
export AUTOPIN_MEMORY=off
cd "$(dirname "$0")/.."
cargo run --quiet --release -p autopin-perf --example perf_report
