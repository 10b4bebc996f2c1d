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
        s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N)
        ts+=("$(echo "$e - $s" | bc -l)")
    done
    printf '%s\n' "${ts[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
row() { printf '%-38s %9.4f s  %6.2fx\n' "$1" "$2" "$(echo "$2 / $3" | bc -l)"; }

echo "== thread creation: $THREADS create+join, median of $REPS (ratio to plain)"
plain=$(median "$tmp/churn" "$THREADS")
row "plain" "$plain" "$plain"
row "autopin pin -c 0,1" "$(median "$AUTOPIN" pin -c 0,1 -- "$tmp/churn" "$THREADS")" "$plain"
[[ $have_likwid == 1 ]] && row "likwid-pin -q -c 0,1" "$(median likwid-pin -q -c 0,1 "$tmp/churn" "$THREADS")" "$plain"
row "taskset -c 0,1 (no per-thread pin)" "$(median taskset -c 0,1 "$tmp/churn" "$THREADS")" "$plain"

echo "== syncbench barrier phase, 2 threads, OMP_WAIT_POLICY=active, median of $REPS (ratio to one per CPU)"
export OMP_WAIT_POLICY=active OMP_NUM_THREADS=2
args=(-b 20000 -s 0 -n 1000)
best=$(median "$AUTOPIN" pin -c 0,1 -- "$tmp/syncbench" "${args[@]}")
row "autopin pin -c 0,1" "$best" "$best"
[[ $have_likwid == 1 ]] && row "likwid-pin -q -c 0,1" "$(median likwid-pin -q -c 0,1 "$tmp/syncbench" "${args[@]}")" "$best"
row "unpinned" "$(median "$tmp/syncbench" "${args[@]}")" "$best"
row "autopin pin -c 0,0 (one CPU)" "$(median "$AUTOPIN" pin -c 0,0 -- "$tmp/syncbench" "${args[@]}")" "$best"
row "taskset -c 0 (one CPU)" "$(median taskset -c 0 "$tmp/syncbench" "${args[@]}")" "$best"
