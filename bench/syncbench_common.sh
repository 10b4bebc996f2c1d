# Shared set-up of bench/run.sh and bench/overhead.sh (sourced, not run): the autopin
# binary, a scratch directory, syncbench built from workloads/, 2 spinning OpenMP threads,
# and a timer `t CMD...` that runs CMD (at BENCH_NICE priority when set) and prints seconds.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
AUTOPIN=${AUTOPIN:-$ROOT/target/release/autopin}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
gcc -O2 -I"$ROOT/include" -fopenmp -o "$W/syncbench" "$ROOT/workloads/syncbench.c"
export OMP_NUM_THREADS=2 OMP_WAIT_POLICY=active
calc() { python3 -c "print($1)"; }
NICE=${BENCH_NICE:+nice -n $BENCH_NICE}
t() { s=$(date +%s.%N); $NICE "$@" >/dev/null 2>&1 || true; e=$(date +%s.%N); calc "$e - $s"; }
