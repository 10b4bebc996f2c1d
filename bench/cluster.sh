#!/bin/sh
# Two MPI ranks (one OpenMP thread each) of a bulk-synchronous program with an MPI_Barrier
# every iteration (bench/cluster_barrier.c), launched by srun on one node of the local Slurm
# (scripts/slurm-local.sh), beside a busy neighbour spinning on CPU 1. The job runs at the
# pace of its slowest rank, so the rank that shares CPU 1 with the neighbour sets the pace.
# Four ways to launch it, interleaved (each repetition rotates the order), wall time of the
# whole srun step (autopin's search included):
#   coordinated    srun --cpu-bind=none autopin run OPTS -- app   (ranks split the node, probe
#                  in lockstep, decide on the slowest rank's rate)
#   uncoordinated  the same with --no-coordinate (each rank searches alone over all CPUs)
#   bind-cores     srun --cpu-bind=cores app
#   no-binding     srun --cpu-bind=none app
# Prints each repetition, the medians and the ratios to no-binding.
# usage: bench/cluster.sh [REPS]   (default 3; ITERS, WORK, AUTOPIN_ARGS override the rest)
# Needs: Slurm, munge, MPICH (scripts/deps.sh), a release build of autopin.
set -eu
# Every round searches afresh: remembered decisions would turn later rounds into checks.
export AUTOPIN_MEMORY=off
REPS=${1:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
AUTOPIN=${AUTOPIN:-$ROOT/target/release/autopin}
ITERS=${ITERS:-1500}
WORK=${WORK:-100000}
AUTOPIN_ARGS=${AUTOPIN_ARGS:---budget 2 --probe 0.3 -i 0.2 --no-perturbation-estimate}
[ -x "$AUTOPIN" ] || { echo "no autopin at $AUTOPIN (cargo build --release, or set AUTOPIN)" >&2; exit 1; }
[ "$(nproc)" -ge 2 ] || { echo "needs at least 2 CPUs" >&2; exit 1; }
W=$(mktemp -d)
BUSY=
cleanup() { [ -n "$BUSY" ] && kill "$BUSY" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT INT TERM
mpicc.mpich -O2 -fopenmp -o "$W/app" "$ROOT/bench/cluster_barrier.c"
bash "$ROOT/scripts/slurm-local.sh" up
eval "$(bash "$ROOT/scripts/slurm-local.sh" env)"
export OMP_NUM_THREADS=1
calc() { python3 -c "print($1)"; }
step() { # srun options..., then the program line
    s=$(date +%s.%N)
    srun -N1 -n2 --mpi=pmi2 "$@" >"$W/out" 2>"$W/err" || { echo "step failed: $*" >&2; cat "$W/err" >&2; exit 1; }
    e=$(date +%s.%N)
    calc "$e - $s"
}
run() { # condition -> seconds
    case "$1" in
    coordinated) step --cpu-bind=none "$AUTOPIN" run -q $AUTOPIN_ARGS -- "$W/app" "$ITERS" "$WORK" ;;
    uncoordinated) step --cpu-bind=none "$AUTOPIN" run -q --no-coordinate $AUTOPIN_ARGS -- "$W/app" "$ITERS" "$WORK" ;;
    bind-cores) step --cpu-bind=cores "$W/app" "$ITERS" "$WORK" ;;
    no-binding) step --cpu-bind=none "$W/app" "$ITERS" "$WORK" ;;
    esac
}
taskset -c 1 sh -c 'while :; do :; done' &
BUSY=$!
CONDS="coordinated uncoordinated bind-cores no-binding"
echo "cluster_barrier $ITERS iterations x $WORK; 2 ranks x 1 OpenMP thread; busy neighbour on CPU 1 (pid $BUSY)"
echo "autopin: $AUTOPIN_ARGS"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%4s" rep; for c in $CONDS; do printf "  %14s" "$c"; done; echo
i=1
while [ "$i" -le "$REPS" ]; do
    # Rotate which condition goes first, so drift in the machine's load hits all of them.
    order=$(echo $CONDS | tr ' ' '\n' | awk -v k="$i" '{a[NR]=$0} END{for(j=0;j<NR;j++) print a[(j+k-1)%NR+1]}')
    for c in $order; do run "$c" >"$W/t.$c.$i"; done
    printf "%4d" "$i"; for c in $CONDS; do printf "  %14.3f" "$(cat "$W/t.$c.$i")"; echo "$(cat "$W/t.$c.$i")" >>"$W/all.$c"; done; echo
    i=$((i + 1))
done
python3 - "$W" $CONDS <<'PY'
import statistics, sys
w, conds = sys.argv[1], sys.argv[2:]
med = {c: statistics.median(float(x) for x in open(f"{w}/all.{c}")) for c in conds}
print("median_s " + "  ".join(f"{c}={med[c]:.3f}" for c in conds))
base = med["no-binding"]
print("ratio to no-binding (lower is better): " + "  ".join(f"{c}={med[c] / base:.3f}" for c in conds))
print(f"coordinated / uncoordinated: {med['coordinated'] / med['uncoordinated']:.3f}")
print(f"coordinated / bind-cores: {med['coordinated'] / med['bind-cores']:.3f}")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
