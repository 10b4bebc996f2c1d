#!/bin/sh
# The search on LAMMPS (Debian's `lammps` package), a real HPC code nobody here wrote: a
# Lennard-Jones melt (32 000 atoms) run as 2 MPI ranks beside a spinning shell on CPU 0.
# Debian's build has no OPENMP package (`lmp -h` lists none; `-sf omp` fails), so its
# parallelism is MPI ranks, one thread of work each: every rank runs under its own
# `autopin run`, which sees the job's ranks on this node and searches with them.
# Sides, in interleaved rounds (the order rotating): the OS placement (mpirun --bind-to
# none), each rank bound to its own core (mpirun --bind-to core, the launcher's fixed
# pinning) and autopin (mpirun --bind-to none ... autopin run). Printed: median seconds per
# side, the median over rounds of autopin ÷ bound and autopin ÷ OS placement, and rank 0's
# median decision time and search cost from its report.
# BUSY=0 runs on an idle machine. Skips (exit 0) when lmp or mpirun is missing.
# usage: bench/lammps.sh [ROUNDS] [STEPS]   (default 5 rounds, 1000 steps ≈ 16 s a run here)
set -eu
ROUNDS=${1:-5}
STEPS=${2:-1000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
AUTOPIN=${AUTOPIN:-$ROOT/target/release/autopin}
for tool in lmp mpirun; do
  command -v "$tool" >/dev/null 2>&1 || { echo "bench/lammps.sh: $tool not found (apt-get install lammps openmpi-bin); skipped" >&2; exit 0; }
done
# Every round searches afresh: remembered decisions would turn later rounds into checks.
export AUTOPIN_MEMORY=off OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
W=$(mktemp -d)
cleanup() { [ -n "${BUSY_PID:-}" ] && kill "$BUSY_PID" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
cat > "$W/in.lj" <<'EOF'
units           lj
atom_style      atomic
lattice         fcc 0.8442
region          box block 0 20 0 20 0 20
create_box      1 box
create_atoms    1 box
mass            1 1.0
velocity        all create 3.0 87287 loop geom
pair_style      lj/cut 2.5
pair_coeff      1 1 1.0 1.0 2.5
neighbor        0.3 bin
neigh_modify    every 20 delay 0 check no
fix             1 all nve
thermo          1000
run             ${n}
EOF
L="lmp -var n $STEPS -in $W/in.lj -log none -screen none"
if [ "${BUSY:-1}" = 1 ]; then
  taskset -c 0 sh -c 'while :; do :; done' & BUSY_PID=$!
  echo "busy neighbour: a spinning shell on CPU 0; $ROUNDS rounds of $STEPS steps"
else
  echo "idle machine (BUSY=0); $ROUNDS rounds of $STEPS steps"
fi
t() { s=$(date +%s.%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s.%N); python3 -c "print($e - $s)"; }
: > "$W/times"
i=1
while [ "$i" -le "$ROUNDS" ]; do
  order=$(python3 -c "s='os bound ap'.split(); k=$i % 3; print(' '.join(s[k:] + s[:k]))")
  line="  round $i:"
  for s in $order; do
    case $s in
      os) v=$(t mpirun --oversubscribe --bind-to none -np 2 $L) ;;
      bound) v=$(t mpirun --bind-to core -np 2 $L) ;;
      ap) v=$(t mpirun --oversubscribe --bind-to none -np 2 "$AUTOPIN" run --report "$W/ap$i.%r.json" -- $L) ;;
    esac
    echo "$i $s $v" >> "$W/times"
    line="$line $s $(printf '%.2f' "$v")"
  done
  echo "$line"
  i=$((i + 1))
done
python3 - "$W" "$ROUNDS" <<'PY'
import json, statistics as st, sys
w, rounds = sys.argv[1], int(sys.argv[2])
t = {}
for l in open(f"{w}/times"):
    i, s, v = l.split()
    t.setdefault(int(i), {})[s] = float(v)
med = lambda xs: st.median(list(xs))
print("  median s: " + "  ".join(f"{s} {med(r[s] for r in t.values()):.2f}" for s in ("os", "bound", "ap")))
print(f"  autopin / bound to cores: {med(r['ap'] / r['bound'] for r in t.values()):.3f}"
      f"   / OS placement: {med(r['ap'] / r['os'] for r in t.values()):.3f}")
at, cost = [], []
for i in range(1, rounds + 1):
    try:
        d = json.load(open(f"{w}/ap{i}.0.json"))
    except (OSError, ValueError):
        continue
    dec = d.get("decision") or {}
    if dec.get("at") is not None:
        at.append(dec["at"])
    cost.append(d.get("search_cost") or 0.0)
if at:
    print(f"  rank 0 decided at (median): {med(at):.2f} s in {len(at)} of {rounds} rounds; "
          f"search cost (median): {med(cost):.3f} s")
else:
    print("  rank 0 reached no decision in any round")
PY
