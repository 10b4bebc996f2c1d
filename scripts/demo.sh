#!/usr/bin/env bash
# Builds autopin and runs its main job on the bundled demo workload: the optimizer probes
# candidate pinnings of a 2-phase OpenMP program and keeps the best one.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release --workspace --quiet
make -s -C workloads
out=${AUTOPIN_DEMO_OUT:-target/demo}
mkdir -p "$out"
echo "== the machine" >&2
target/release/autopin topology
echo "== autopin run on workloads/syncbench (report: $out/report.json, $out/timeline.svg)" >&2
threads=$(nproc)
OMP_NUM_THREADS=$threads OMP_WAIT_POLICY=active \
    target/release/autopin run --report "$out/report.json" --timeline "$out/timeline.csv" -- \
    workloads/syncbench "$@"
target/release/autopin report "$out/report.json" --svg "$out/timeline.svg"
