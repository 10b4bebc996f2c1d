#!/bin/sh
# Remembered decisions: a short two-thread OpenMP program run RUNS times under autopin with
# one fresh decision store. Run 1 searches; later runs start on the remembered pinning and
# check it. Each run's wall time is divided by the best fixed pinning with hindsight (the
# fastest of the OS placement and the pinnings 0,1 and 1,0, each timed alone in the same
# setting before the autopin runs). PROG=ompwork (default: workloads/ompwork.c, imbalance
# mode, ~2 s) or PROG=gromacs (Debian's GROMACS, mdrun on a 2.5 nm water box, ~3 s). With
# BUSY=1 (default) a busy loop holds CPU 0 throughout; BUSY=0 is idle.
# usage: bench/memory.sh [RUNS]   (default 6)
set -eu
RUNS=${1:-6}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
AUTOPIN=${AUTOPIN:-$ROOT/target/release/autopin}
[ -x "$AUTOPIN" ] || (cd "$ROOT" && cargo build -q --release)
W=$(mktemp -d)
BUSY_PID=
cleanup() { [ -n "$BUSY_PID" ] && kill "$BUSY_PID" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
export OMP_NUM_THREADS=2 OMP_WAIT_POLICY=active
case ${PROG:-ompwork} in
  ompwork)
    gcc -O2 -fopenmp -o "$W/omp" "$ROOT/workloads/ompwork.c"
    CMD="$W/omp -m imbalance -r ${ROUNDS:-400} -w 2000000" ;;
  gromacs)
    command -v gmx >/dev/null || { echo "gmx is not installed (apt install gromacs)"; exit 2; }
    (cd "$W" && gmx solvate -cs spc216.gro -box 2.5 2.5 2.5 -o water.gro >/dev/null 2>&1 &&
      printf '#include "oplsaa.ff/forcefield.itp"\n#include "oplsaa.ff/spce.itp"\n[ system ]\nwater\n[ molecules ]\nSOL %s\n' "$(grep -c OW water.gro)" > topol.top &&
      printf 'integrator = md\nnsteps = 1000000\ndt = 0.002\ncutoff-scheme = Verlet\ncoulombtype = PME\nrcoulomb = 1.0\nrvdw = 1.0\ntcoupl = v-rescale\ntc-grps = System\ntau-t = 0.1\nref-t = 300\nconstraints = h-bonds\nnstxout = 0\nnstvout = 0\nnstenergy = 0\nnstlog = 0\nnstcalcenergy = 100\n' > md.mdp &&
      gmx grompp -f md.mdp -c water.gro -p topol.top -o md.tpr -maxwarn 2 >/dev/null 2>&1)
    CMD="gmx mdrun -s $W/md.tpr -ntmpi 1 -ntomp 2 -pin off -nb cpu -nsteps ${STEPS:-1500} -deffnm $W/gmx" ;;
  *) echo "PROG is ompwork or gromacs"; exit 2 ;;
esac
if [ "${BUSY:-1}" = 1 ]; then
  taskset -c 0 sh -c 'while :; do :; done' & BUSY_PID=$!
fi
# secs COMMAND...: its wall time (its output goes nowhere).
secs() { s=$(date +%s.%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s.%N); python3 -c "print('%.3f' % ($e - $s))"; }
best=""
for pin in os 0,1 1,0; do
  if [ "$pin" = os ]; then t=$(secs $CMD); else t=$(secs "$AUTOPIN" pin -c "$pin" -- $CMD); fi
  echo "fixed $pin: $t s"
  best=$(python3 -c "b='$best'; print(min(float(b), $t) if b else $t)")
done
echo "${PROG:-ompwork}: best fixed $best s   (busy CPU 0: ${BUSY:-1})"
echo "run  seconds  ÷best  decision_at  memory"
: > "$W/ratios"
i=1
while [ "$i" -le "$RUNS" ]; do
  t=$(secs "$AUTOPIN" run -q --memory "$W/d.db" --report "$W/r.json" -- $CMD)
  info=$(python3 -c "
import json; r=json.load(open('$W/r.json')); d=r.get('decision') or {}; m=r.get('memory') or {}
print('%s %s/%s' % (('%.2f' % d['at']) if 'at' in d else '-', 'hit' if m.get('hit') else 'miss', m.get('outcome')))")
  ratio=$(python3 -c "print('%.3f' % ($t / $best))")
  [ "$i" -gt 1 ] && echo "$ratio" >> "$W/ratios"
  printf "%3d  %7.3f  %5s  %s\n" "$i" "$t" "$ratio" "$info"
  i=$((i + 1))
done
python3 -c "
import statistics; r=[float(l) for l in open('$W/ratios')]
print('runs 2-$RUNS ÷ best fixed: median %.3f, min %.3f, max %.3f' % (statistics.median(r), min(r), max(r)))"
