#!/usr/bin/env bash
# Decisions a user can trust: the README's demo run and the tour's `autopin run` of
# syncbench, ROUNDS times each beside a busy loop on CPU 0, then on CPU 1, every report
# checked by bench/check_report.py (valid indices, no negative cost, margins that add up,
# no stacked final pinning without a significant win). Prints one line per run and the
# counts at the end; exits 1 when a report breaks a rule or a run outlasts RUN_LIMIT seconds
# (default 60: every run takes 3-15 s when the decision is right; a wrong one once held
# syncbench's barrier phase at 250 beats/s for over 10 minutes). Not a timing benchmark.
#   usage: [LOOPS=N] [RUN_LIMIT=S] bench/trust.sh [ROUNDS]    (default 10; needs 2 CPUs)
#   LOOPS: busy loops on the busy CPU (default 1; 3 is a CPU the OS keeps the program off)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
AUTOPIN=${AUTOPIN:-$ROOT/target/release/autopin}
ROUNDS=${1:-10}
LOOPS=${LOOPS:-1}
RUN_LIMIT=${RUN_LIMIT:-60}
W=$(mktemp -d)
BUSY_PID=
cleanup() { [ -n "$BUSY_PID" ] && kill $BUSY_PID 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
make -s -C "$ROOT/workloads"
[ -x "$AUTOPIN" ] || (cd "$ROOT" && cargo build -q --release -p autopin)
SB="$ROOT/workloads/syncbench"

# The demo's run (scripts/demo.sh), the tour's two runs of syncbench (README "A tour").
demo() {
    OMP_NUM_THREADS=2 OMP_WAIT_POLICY=active timeout -s INT "$RUN_LIMIT" "$AUTOPIN" run -q --schedule '0,0;0,1' --unpinned \
        --probe 0.3 -w 0.1 --budget 4 --report "$1" -- "$SB" -b 6000000 -s 300 -r 3 >/dev/null
}
tour() {
    timeout -s INT "$RUN_LIMIT" "$AUTOPIN" run -q --budget 5 --report "$1" -- "$SB" -r 60 >/dev/null
}
tour_heartbeat() {
    timeout -s INT "$RUN_LIMIT" "$AUTOPIN" run -q --objective heartbeat --budget 5 --report "$1" -- "$SB" -r 60 >/dev/null
}

runs=0
broken=0
slow=0
stacked=0
for busy in 0 1; do
    BUSY_PID=
    for _ in $(seq 1 "$LOOPS"); do
        taskset -c "$busy" sh -c 'while :; do :; done' &
        BUSY_PID="$BUSY_PID $!"
    done
    # Each command's runs share one decision store, as a user's runs do: later runs meet
    # their remembered decision.
    for what in demo tour tour_heartbeat; do
        export AUTOPIN_MEMORY="$W/$what-$busy.db"
        for r in $(seq 1 "$ROUNDS"); do
            rep="$W/$what-$busy-$r.json"
            start=$(date +%s%N)
            rc=0
            "$what" "$rep" || rc=$?
            if [ "$rc" -eq 124 ]; then
                echo "  run stopped after ${RUN_LIMIT} s (RUN_LIMIT): a decision that slow is wrong"
                slow=$((slow + 1))
            fi
            secs=$(( ($(date +%s%N) - start) / 1000000 ))
            line=$(python3 "$ROOT/bench/check_report.py" "$rep") || broken=$((broken + 1))
            finals=$(python3 - "$rep" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
last = {}
for d in r["decisions"]:
    last[d.get("phase")] = d
print("; ".join("%s: %s" % (p or "-", d["candidate"]) for p, d in last.items()) or "no decision")
PY
)
            n=$(echo "$line" | sed -n 's/.*(\([0-9]*\) stacked.*/\1/p')
            stacked=$((stacked + ${n:-0}))
            runs=$((runs + 1))
            printf 'busy CPU %s  %-15s round %2d  %6d ms  %s  [%s]\n' "$busy" "$what" "$r" "$secs" \
                "$(echo "$line" | head -1 | sed 's/.*: //')" "$finals"
            echo "$line" | tail -n +2
        done
    done
    kill $BUSY_PID 2>/dev/null || true
    wait $BUSY_PID 2>/dev/null || true
    BUSY_PID=
done
echo "runs: $runs (beside $LOOPS busy loop(s)), reports breaking a rule: $broken, runs past ${RUN_LIMIT} s: $slow, stacked final pinnings (each a significant win): $stacked"
[ "$broken" -eq 0 ] && [ "$slow" -eq 0 ]
