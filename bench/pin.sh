#!/usr/bin/env bash
# bench/pin.sh — autopin pin against likwid-pin and taskset, measured in one run.
#
#  1. Cost of the preload library on thread creation: a program that creates and joins
#     THREADS threads, plain / under `autopin pin` / under `likwid-pin`.
#  2. What pinning does to a barrier-heavy OpenMP phase (workloads/syncbench.c, spinning
#     waits): unpinned, one thread per CPU (autopin pin, likwid-pin), both on one CPU.
# Each cell is the median of REPS runs. Needs gcc with OpenMP and a built autopin
# (AUTOPIN=path, default target/release/autopin or target/debug/autopin).
set -euo pipefail
# Every round searches afresh: remembered decisions would turn later rounds into checks.
export AUTOPIN_MEMORY=off
here=$(cd "$(dirname "$0")/.." && pwd)
REPS=${REPS:-5}
THREADS=${THREADS:-5000}
AUTOPIN=${AUTOPIN:-}
for c in "$here/target/release/autopin" "$here/target/debug/autopin"; do
    [[ -z $AUTOPIN && -x $c ]] && AUTOPIN=$c
done
[[ -x ${AUTOPIN:-} ]] || { echo "bench/pin.sh: build autopin first or set AUTOPIN=" >&2; exit 2; }
have_likwid=0; command -v likwid-pin >/dev/null && have_likwid=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

cat > "$tmp/churn.c" <<'C'
#include <pthread.h>
#include <stdlib.h>
static void *body(void *a) { return a; }
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000;
    for (long i = 0; i < n; i++) { pthread_t t; pthread_create(&t, 0, body, 0); pthread_join(t, 0); }
    return 0;
}
C
gcc -O2 -pthread -o "$tmp/churn" "$tmp/churn.c"
gcc -O2 -fopenmp -I"$here/include" -o "$tmp/syncbench" "$here/workloads/syncbench.c"

# median wall seconds of "$@" over REPS runs
median() {
    local ts=()
    for _ in $(seq "$REPS"); do
        local s e
        s=$(date +%s.%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s.%N)
        ts+=("$(echo "$e - $s" | bc -l)")
    done
    printf '%s\n' "${ts[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
row() { printf '%-38s %9.4f s  %6.2fx\n' "$1" "$2" "$(echo "$2 / $3" | bc -l)"; }

# per-thread cost in microseconds: (time for N threads - time for 1) / N
per_thread() {
    local n=$1; shift
    local tn t1
    tn=$(median "$@" "$n"); t1=$(median "$@" 1)
    echo "($tn - $t1) / $n * 1000000" | bc -l
}
prow() { printf '%-38s %9.1f us/thread  %7.2fx\n' "$1" "$2" "$(echo "$2 / $3" | bc -l)"; }
echo "== thread creation: create+join, microseconds per thread, median of $REPS (ratio to plain)"
plain=$(per_thread "$THREADS" "$tmp/churn")
prow "plain ($THREADS threads)" "$plain" "$plain"
prow "autopin pin -c 0,1 ($THREADS threads)" "$(per_thread "$THREADS" "$AUTOPIN" pin -c 0,1 -- "$tmp/churn")" "$plain"
prow "taskset -c 0,1 ($THREADS threads)" "$(per_thread "$THREADS" taskset -c 0,1 "$tmp/churn")" "$plain"
# likwid-pin's wrapper runs `nm` on the binary at every pthread_create: keep N small.
[[ $have_likwid == 1 ]] && prow "likwid-pin -q -c 0,1 (${LIKWID_THREADS:-50} threads)" \
    "$(per_thread "${LIKWID_THREADS:-50}" likwid-pin -q -c 0,1 "$tmp/churn")" "$plain"

echo "== syncbench barrier phase, 2 threads, OMP_WAIT_POLICY=active: us per barrier, median of $REPS (ratio to one per CPU)"
# Two spinning threads on one CPU wait a whole time slice per barrier, so those cases
# run fewer barriers; syncbench reports the time per barrier itself.
export OMP_WAIT_POLICY=active OMP_NUM_THREADS=2
us_per_barrier() {
    local b=$1; shift
    for _ in $(seq "$REPS"); do
        "$@" -b "$b" -s 0 -n 1000 2>/dev/null | sed -n 's/.*us_per_barrier=\([0-9.]*\).*/\1/p'
    done | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
brow() { printf '%-38s %10.2f us/barrier  %8.2fx\n' "$1" "$2" "$(echo "$2 / $3" | bc -l)"; }
best=$(us_per_barrier 20000 "$AUTOPIN" pin -c 0,1 -- "$tmp/syncbench")
brow "autopin pin -c 0,1" "$best" "$best"
[[ $have_likwid == 1 ]] && brow "likwid-pin -q -c 0,1" "$(us_per_barrier 20000 likwid-pin -q -c 0,1 "$tmp/syncbench")" "$best"
brow "unpinned" "$(us_per_barrier 20000 "$tmp/syncbench")" "$best"
brow "autopin pin -c 0,0 (one CPU)" "$(us_per_barrier 100 "$AUTOPIN" pin -c 0,0 -- "$tmp/syncbench")" "$best"
brow "taskset -c 0 (one CPU)" "$(us_per_barrier 2000 taskset -c 0 "$tmp/syncbench")" "$best"
echo "(taskset -c 0 is faster than autopin -c 0,0 because libgomp sees 1 allowed CPU at start-up"
echo " and throttles its spinning; under autopin and likwid-pin it sees all CPUs.)"
