#!/bin/sh
# autopin's own cost as machines and programs grow (issue #57):
# 1. reading the topology and generating candidates, whole process, on every real dump in
#    tests/data (2–256 PUs; unpacked first, so the time is autopin's, not bzip2's), for as
#    many threads as cores and for twice as many threads as PUs (oversubscribed): the median
#    of REPS runs, in ms;
# 2. one driver tick of the real engine (driver, session, race) on the simulated 256-PU
#    machine (256ppc-8n8s4t) at 16–256 threads: the CPU autopin spends per simulated tick,
#    with what each doubling of threads costs (the growth law);
# 3. with THREADS_RUN > 0, the real path on this machine: `bench/threads.sh THREADS_RUN`,
#    a program of that many threads under `autopin run` (the OS side of a tick: /proc reads
#    and sched_setaffinity for every thread), autopin's CPU as a share of one CPU while it
#    searches and once decided; at a tick of 0.1 s, 1% of a CPU is 1 ms a tick.
# usage: bench/scale.sh [REPS] [THREADS_RUN]   (default 5 repetitions, 512 threads; 0 skips 3)
set -eu
REPS=${1:-5}
THREADS_RUN=${2:-512}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
AUTOPIN=${AUTOPIN:-$ROOT/target/release/autopin}
[ -x "$AUTOPIN" ] || (cd "$ROOT" && cargo build -q --release -p autopin)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

# The median wall time of REPS runs of a command, in ms.
median_ms() {
  i=0
  : >"$W/t"
  while [ "$i" -lt "$REPS" ]; do
    a=$(date +%s%N)
    "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
    b=$(date +%s%N)
    echo $(((b - a) / 1000)) >>"$W/t"
    i=$((i + 1))
  done
  sort -n "$W/t" | awk '{ v[NR] = $1 } END { printf "%.1f", v[int((NR + 1) / 2)] / 1000 }'
}

echo "== topology and candidates, whole process (median of $REPS runs, ms)"
printf 'topology\tpus\tcores\ttopology_ms\tcandidates_cores_ms\tcandidates_2xpus_ms\n'
for dump in "$ROOT"/tests/data/hwloc-linux/*.tar.bz2; do
  name=$(basename "$dump" .tar.bz2)
  mkdir -p "$W/$name"
  tar -xjf "$dump" -C "$W/$name"
  dir=$(find "$W/$name" -mindepth 1 -maxdepth 1 -type d | head -n 1)
  read -r pus cores <<EOF
$("$AUTOPIN" topology --sysfs-root "$dir" --format json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
p = [p for p in d["pus"] if p.get("allowed", True) and p.get("online", True)]
print(len(p), len({x["core"] for x in p}))' 2>/dev/null || echo "0 0")
EOF
  [ "$pus" -ge 2 ] || continue
  t=$(median_ms "$AUTOPIN" topology --sysfs-root "$dir" --format json)
  c=$(median_ms "$AUTOPIN" candidates -n "$cores" --sysfs-root "$dir")
  o=$(median_ms "$AUTOPIN" candidates -n $((2 * pus)) --sysfs-root "$dir")
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$pus" "$cores" "$t" "$c" "$o"
done

echo
echo "== one tick of the engine on the simulated 256-PU machine (256ppc-8n8s4t, bandwidth, 3 seeds)"
dir=$(find "$W/256ppc-8n8s4t" -mindepth 1 -maxdepth 1 -type d | head -n 1)
printf 'threads\tms_per_tick\tx_per_doubling\n'
prev=""
for n in 16 32 64 128 256; do
  "$AUTOPIN" simulate --sysfs-root "$dir" --model bandwidth -n "$n" --seeds 3 \
    --json "$W/s.json" >/dev/null
  ms=$(python3 -c 'import json, sys; print("%.4f" % (1000 * json.load(open(sys.argv[1]))["median"]["cpu_per_tick"]))' "$W/s.json")
  if [ -n "$prev" ]; then
    x=$(python3 -c "print('%.2f' % ($ms / $prev))")
  else
    x="-"
  fi
  printf '%s\t%s\t%s\n' "$n" "$ms" "$x"
  prev=$ms
done

if [ "$THREADS_RUN" -gt 0 ]; then
  echo
  echo "== the real path: $THREADS_RUN threads under autopin run on this machine (bench/threads.sh)"
  AUTOPIN="$AUTOPIN" sh "$ROOT/bench/threads.sh" "$THREADS_RUN" 10 1
fi
