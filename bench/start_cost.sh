#!/bin/sh
# autopin's fixed cost around a program, apart from any search (docs/threads.md): how much
# later the program's main() starts under `autopin run -q` than when started alone, and how
# much later autopin ends after the program's last instruction. The program (built here) is a
# 2-thread OpenMP loop of a few milliseconds that prints the wall clock at the start of main()
# and just before it returns. PAIRS interleaved pairs (which goes first alternates); medians.
# AUTOPIN_MEMORY is a store in the scratch folder, settled by three runs first, so the runs
# measured are what a program run again gets.
# usage: bench/start_cost.sh [PAIRS]   (default 30)
set -eu
PAIRS=${1:-30}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
AUTOPIN=${AUTOPIN:-$ROOT/target/release/autopin}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cat > "$W/stamp.c" <<'EOF'
#include <stdio.h>
#include <time.h>
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(void)
{
    double start = now(), x = 0;
#pragma omp parallel for reduction(+ : x)
    for (long i = 0; i < 4000000; i++)
        x += i * 0.5;
    printf("%.6f %.6f\n", start, x < 0 ? 0 : now());
    return 0;
}
EOF
gcc -O2 -fopenmp -o "$W/stamp" "$W/stamp.c"
export AUTOPIN_MEMORY="$W/d.db" OMP_NUM_THREADS=2
for _ in 1 2 3; do "$AUTOPIN" run -q -- "$W/stamp" >/dev/null; done
echo "autopin: $AUTOPIN; $PAIRS pairs; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$AUTOPIN" "$W/stamp" "$PAIRS" <<'EOF'
import statistics, subprocess, sys, time
autopin, stamp, pairs = sys.argv[1], sys.argv[2], int(sys.argv[3])
runs = {"alone": [], "autopin": []}
for i in range(pairs):
    for kind in ("alone", "autopin") if i % 2 == 0 else ("autopin", "alone"):
        cmd = [stamp] if kind == "alone" else [autopin, "run", "-q", "--", stamp]
        t0 = time.time()
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        t3 = time.time()
        start, end = map(float, out.split()[:2])
        runs[kind].append(((start - t0) * 1e3, (t3 - end) * 1e3, (t3 - t0) * 1e3))
med = {k: [statistics.median(r[j] for r in v) for j in range(3)] for k, v in runs.items()}
for k, (s, e, w) in med.items():
    print(f"{k:8s} main() starts {s:5.2f} ms after the launch, the launcher returns {e:5.2f} ms after main() ends, whole {w:5.2f} ms (medians)")
(sa, ea, _), (sb, eb, _) = med["autopin"], med["alone"]
print(f"autopin's fixed cost: {sa - sb:.2f} ms before the program, {ea - eb:.2f} ms after it, {sa - sb + ea - eb:.2f} ms a run")
EOF
