#!/bin/sh
# Remembered decisions: a short two-thread OpenMP program run RUNS times under autopin with
# one fresh decision store. Run 1 searches; later runs start on the remembered pinning and
# check it. Each run's wall time is divided by the best fixed pinning with hindsight (the
# fastest of the OS placement and the pinnings 0,1 and 1,0, each timed alone in the same
# setting before the autopin runs). PROG=ompwork (default: workloads/ompwork.c, imbalance
# mode, ~2 s) or PROG=gromacs (Debian's GROMACS, mdrun on a 2.5 nm water box, ~3 s). With
# BUSY=1 (default) a busy loop holds CPU 0 throughout; BUSY=0 is idle. With BUSY=1 and
# MOVE=1 (default) the busy loop then moves to CPU 1 for two more runs: the remembered
# pinning became wrong, and the first of them shows how soon it was overturned (its
# decision_at) and the second that the record followed.
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
# busy_on CPU: the busy loop, (re)started on CPU.
busy_on() {
  [ -n "$BUSY_PID" ] && { kill "$BUSY_PID"; wait "$BUSY_PID" 2>/dev/null || true; }
  taskset -c "$1" sh -c 'while :; do :; done' & BUSY_PID=$!
}
[ "${BUSY:-1}" = 1 ] && busy_on 0
# secs COMMAND...: its wall time (its output goes nowhere).
secs() { s=$(date +%s.%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s.%N); python3 -c "print('%.3f' % ($e - $s))"; }
# time_fixed PREFIX: the OS placement and both fixed pinnings timed once each; the best in $best.
time_fixed() {
  best=""
  for pin in os 0,1 1,0; do
    if [ "$pin" = os ]; then t=$(secs $CMD); else t=$(secs "$AUTOPIN" pin -c "$pin" -- $CMD); fi
    echo "${1}fixed $pin: $t s"
    best=$(python3 -c "b='$best'; print(min(float(b), $t) if b else $t)")
  done
}
time_fixed ""
echo "${PROG:-ompwork}: best fixed $best s   (busy CPU 0: ${BUSY:-1})"
echo "run  seconds  ÷best  decision_at  memory  busy(then→now)  decision"
: > "$W/ratios"
# one_run N: run N under autopin with the store; its line; its ratio to $best in $W/ratio.
one_run() {
  t=$(secs "$AUTOPIN" run -q --memory "$W/d.db" --report "$W/r.json" -- $CMD)
  info=$(python3 -c "
import json; r=json.load(open('$W/r.json')); d=r.get('decision') or {}; m=r.get('memory') or {}
cpus=lambda c: '?' if c is None else (','.join(map(str, c)) or '-')
print('%s %s/%s  %s→%s  %s' % (('%.2f' % d['at']) if 'at' in d else '-', 'hit' if m.get('hit') else 'miss',
  m.get('outcome'), cpus(m.get('busy_then')), cpus(r.get('busy_cpus')), d.get('candidate', '-')))")
  python3 -c "print('%.3f' % ($t / $best))" > "$W/ratio"
  printf "%3s  %7.3f  %5s  %s\n" "$1" "$t" "$(cat "$W/ratio")" "$info"
}
i=1
while [ "$i" -le "$RUNS" ]; do
  one_run "$i"
  [ "$i" -gt 1 ] && cat "$W/ratio" >> "$W/ratios"
  i=$((i + 1))
done
python3 -c "
import statistics; r=[float(l) for l in open('$W/ratios')]
print('runs 2-$RUNS ÷ best fixed: median %.3f, min %.3f, max %.3f' % (statistics.median(r), min(r), max(r)))"
if [ "${BUSY:-1}" = 1 ] && [ "${MOVE:-1}" = 1 ]; then
  busy_on 1
  time_fixed "busy loop moved to CPU 1: "
  echo "busy loop moved to CPU 1: best fixed $best s"
  one_run "m1"
  python3 -c "
import json; r=json.load(open('$W/r.json')); d=r.get('decision') or {}; m=r.get('memory') or {}
print('moved: the remembered pinning was %s %s s after the start' % (m.get('outcome'), ('%.2f' % d['at']) if 'at' in d else 'never'))"
  one_run "m2"
fi
