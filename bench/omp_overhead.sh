#!/bin/sh
# Cost of counting OpenMP progress (the preload library's GOMP_* and __kmpc_* wrappers)
# on a barrier-heavy program: workloads/ompwork -m imbalance -w 1 is two threads passing
# barriers back to back (OMP_WAIT_POLICY=active, one thread per CPU), the worst case for a
# per-barrier cost. Each pair runs the program with the preload library counting
# (AUTOPIN_HEARTBEAT names a 16 KiB file) and without it (no preload at all), alternating
# which goes first; the program's own timing is compared. Built with gcc (libgomp) and, when
# available, clang (libomp). Target: median ratio ≤ 1.01.
# usage: bench/omp_overhead.sh [PAIRS] [ROUNDS]   (default 9 pairs, 2000000 rounds ≈ 1.5 s a run;
# shorter runs drown a 1% difference in start-up noise)
set -eu
PAIRS=${1:-9}
ROUNDS=${2:-2000000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
gcc -O2 -fPIC -shared -std=gnu11 -pthread -o "$W/preload.so" "$ROOT/crates/autopin-preload/c/preload.c" -ldl
gcc -O2 -fopenmp -o "$W/ow-gcc" "$ROOT/workloads/ompwork.c"
COMPILERS=gcc
if command -v clang >/dev/null 2>&1 && clang -O2 -fopenmp -o "$W/ow-clang" "$ROOT/workloads/ompwork.c" 2>/dev/null; then
  COMPILERS="gcc clang"
fi
# KMP_BLOCKTIME=infinite: libomp's barrier times on a 2-CPU VM are bimodal (0.6 or 2.5 s a
# run, whatever the side) unless its threads spin without ever sleeping.
export OMP_NUM_THREADS=2 OMP_WAIT_POLICY=active OMP_PLACES='{0},{1}' OMP_PROC_BIND=true KMP_BLOCKTIME=infinite
secs() { "$@" | sed -n 's/.*: \([0-9.]*\) s,.*/\1/p'; }
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for cc in $COMPILERS; do
  P="$W/ow-$cc -m imbalance -w 1 -r $ROUNDS"
  : > "$W/ratios"
  echo "$cc: $ROUNDS rounds (2 barriers each)"
  echo "pair  plain_s  counting_s  ratio  constructs"
  i=1
  while [ "$i" -le "$PAIRS" ]; do
    head -c 16384 /dev/zero > "$W/hb"
    run_plain() { secs $P; }
    run_count() { secs env AUTOPIN_HEARTBEAT="$W/hb" LD_PRELOAD="$W/preload.so" $P; }
    if [ $((i % 2)) -eq 1 ]; then a=$(run_plain); b=$(run_count); else b=$(run_count); a=$(run_plain); fi
    n=$(python3 -c "
import struct;b=open('$W/hb','rb').read()
print(sum(struct.unpack_from('<5Q',b,192+64*i)[k] for i in range(253) for k in range(5)))")
    r=$(python3 -c "print('%.4f' % ($b / $a))")
    echo "$r" >> "$W/ratios"
    printf "%4d  %7.3f  %10.3f  %5s  %s\n" "$i" "$a" "$b" "$r" "$n"
    i=$((i + 1))
  done
  python3 -c "import statistics;print('$cc median ratio counting/plain: %.4f' % statistics.median(float(l) for l in open('$W/ratios')))"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
