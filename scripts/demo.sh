#!/usr/bin/env bash
# Builds autopin and runs its main job on the bundled demo workload: the optimizer probes
# candidate pinnings of a 2-phase OpenMP program and keeps the best one.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh demo
export PATH="$HOME/.cargo/bin:$PATH"
# A release build takes a minute or two the first time: say so, and let cargo show progress.
echo "== building autopin (release; the first build takes a few minutes)" >&2
cargo build --release --workspace
autopin="${CARGO_TARGET_DIR:-target}/release/autopin"
make -s -C workloads
out=${AUTOPIN_DEMO_OUT:-target/demo}
mkdir -p "$out"
echo "== the machine" >&2
"$autopin" topology
echo "== autopin run on workloads/syncbench (report: $out/report.json, $out/timeline.svg)" >&2
# Two OpenMP threads with spinning barriers: sharing one CPU (0,0) is ~10x slower in the
# barrier phase; the triad phase is memory-bound. Each phase is searched on its own.
sb_args=("$@")
[ ${#sb_args[@]} -gt 0 ] || sb_args=(-b 6000000 -s 300 -r 3)
OMP_NUM_THREADS=2 OMP_WAIT_POLICY=active \
    "$autopin" run --schedule '0,0;0,1' --unpinned --probe 0.3 -w 0.1 --budget 4 \
    --report "$out/report.json" --timeline "$out/timeline.csv" -- \
    workloads/syncbench "${sb_args[@]}"
"$autopin" report "$out/report.json"
"$autopin" report "$out/report.json" --svg "$out/timeline.svg"
