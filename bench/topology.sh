#!/usr/bin/env bash
# Time to read a machine dump: `autopin topology` vs hwloc's `lstopo-no-graphics`, on the
# same extracted dump, alternating runs so machine noise hits both alike. Prints medians and
# their ratio. Usage: bench/topology.sh [DUMP-NAME] [RUNS]   (default 256ppc-8n8s4t, 21)
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:-256ppc-8n8s4t}
runs=${2:-21}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar xjf "tests/data/hwloc-linux/$name.tar.bz2" -C "$tmp"
root=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d | head -1)
cargo build --release -p autopin --quiet
export AUTOPIN="${AUTOPIN:-${CARGO_TARGET_DIR:-target}/release/autopin}"
command -v lstopo-no-graphics >/dev/null || { echo "lstopo-no-graphics not installed (apt-get install hwloc)"; exit 1; }
python3 - "$root" "$runs" <<'PY'
import os, statistics, subprocess, sys, time
root, runs = sys.argv[1], int(sys.argv[2])
cmds = {
    "autopin topology (tree)": ([os.environ["AUTOPIN"], "topology", "--sysfs-root", root], {}),
    "autopin topology (json)": ([os.environ["AUTOPIN"], "topology", "--sysfs-root", root, "--format", "json"], {}),
    "lstopo-no-graphics": (["lstopo-no-graphics"], {"HWLOC_FSROOT": root, "HWLOC_COMPONENTS": "-x86"}),
}
times = {k: [] for k in cmds}
for i in range(runs + 1):
    for k, (argv, extra) in cmds.items():
        env = dict(os.environ, **extra)
        t = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        if i:  # the first round warms the page cache
            times[k].append(time.perf_counter() - t)
base = statistics.median(times["lstopo-no-graphics"])
for k, v in times.items():
    m = statistics.median(v)
    print(f"{k:28s} median {m*1e3:8.2f} ms  (min {min(v)*1e3:7.2f}, max {max(v)*1e3:7.2f})  ratio to lstopo {m/base:5.2f}")
PY
