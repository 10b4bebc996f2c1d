# Shared by bench/search_real.sh and bench/thread_count.sh (sourced after ROOT and SCALE are
# set): a scratch folder W removed on exit (with the busy loop BUSY_PID, when one was
# started), OpenMP programs of two threads built from workloads/, sc N scaling a count by
# SCALE, and ALL, the real programs found: ompwork, syncbench, GROMACS (a box of water
# with PME) when gmx is installed, and gettext's msgmerge (OpenMP in its fuzzy matching: one
# long parallel region) merging a made-up catalogue when it is installed.
W=$(mktemp -d)
cleanup() { [ -n "${BUSY_PID:-}" ] && kill "$BUSY_PID" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
export OMP_NUM_THREADS=2
# GROMACS keeps 99 backups of each output file and then refuses to run: with 20 rounds or
# more (five runs a round) every later run ended at once.
export GMX_MAXBACKUP=-1
gcc -O2 -fopenmp -o "$W/ompwork" "$ROOT/workloads/ompwork.c"
gcc -O2 -fopenmp -I"$ROOT/include" -o "$W/syncbench" "$ROOT/workloads/syncbench.c"
sc() { python3 -c "print(int($1 * $SCALE))"; }
ALL="ompwork syncbench"
if command -v gmx >/dev/null 2>&1; then
  (cd "$W" && gmx solvate -cs spc216.gro -box 2.5 2.5 2.5 -o water.gro >/dev/null 2>&1 &&
    printf '#include "oplsaa.ff/forcefield.itp"\n#include "oplsaa.ff/spce.itp"\n[ system ]\nwater\n[ molecules ]\nSOL %s\n' "$(grep -c OW water.gro)" > topol.top &&
    printf 'integrator = md\nnsteps = 1000000\ndt = 0.002\ncutoff-scheme = Verlet\ncoulombtype = PME\nrcoulomb = 1.0\nrvdw = 1.0\ntcoupl = v-rescale\ntc-grps = System\ntau-t = 0.1\nref-t = 300\nconstraints = h-bonds\nnstxout = 0\nnstvout = 0\nnstenergy = 0\nnstlog = 0\nnstcalcenergy = 100\n' > md.mdp &&
    gmx grompp -f md.mdp -c water.gro -p topol.top -o md.tpr -maxwarn 2 >/dev/null 2>&1) && ALL="$ALL gromacs"
fi
if command -v msgmerge >/dev/null 2>&1; then
  # A catalogue of $(sc 6000) messages of words from a small vocabulary (so each message
  # is near many others) and a template where every one changed a little: every message is
  # matched fuzzily, which msgmerge spreads over its OpenMP threads (1.8 s with two threads,
  # 3.4 s with one, on this project's VM; the output is the same).
  python3 - "$W" "$(sc 6000)" <<'PY' && ALL="$ALL msgmerge"
import random, sys
w, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(7)
words = ["".join(rng.choice("etaoinshrdlu") for _ in range(rng.randint(2, 7))) for _ in range(120)]
msgs = [" ".join(rng.choice(words) for _ in range(rng.randint(5, 16))) for _ in range(n)]
head = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
with open(f"{w}/def.po", "w") as f:
    f.write(head + "".join(f'msgid "{m}"\nmsgstr "{m[::-1]}"\n\n' for m in msgs))
with open(f"{w}/ref.pot", "w") as f:
    f.write(head + "".join(f'msgid "{m} x"\nmsgstr ""\n\n' for m in msgs))
PY
fi
