#!/bin/sh
# How soon autopin decides between two candidates that differ 2×: a busy loop owns CPU 0, a
# one-thread program runs under `autopin run --schedule '0;1'` (on CPU 0 it gets half the
# CPU, on CPU 1 all of it). Printed per run: when the decision fell (seconds after the
# program started, from the report), what it was and why; then the median. Goal: < 1.5 s.
# usage: bench/decision.sh [RUNS]   (default 7)
set -eu
# Every round searches afresh: remembered decisions would turn later rounds into checks.
export AUTOPIN_MEMORY=off
RUNS=${1:-7}
. "$(cd "$(dirname "$0")" && pwd)/busy_common.sh"
busy_neighbour
echo "busy neighbour on CPU 0 (pid $BUSY_PID); candidates 0 and 1; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "run  decided_at_s  decision  reason"
: > "$W/at"
i=1
while [ "$i" -le "$RUNS" ]; do
  "$AUTOPIN" run -q --schedule '0;1' --report "$W/r.json" -- "$W/work" 3000 >/dev/null 2>&1 || true
  python3 - "$W/r.json" "$i" "$W/at" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
x = d.get("decision") or {}
at = x.get("at")
print("%3s  %12s  %-8s  %s" % (sys.argv[2], "%.2f" % at if at is not None else "none",
      x.get("candidate", "-"), x.get("reason", d.get("incomplete_reason", ""))))
if at is not None:
    open(sys.argv[3], "a").write("%f\n" % at)
PY
  i=$((i + 1))
done
python3 - "$W/at" <<'PY'
import statistics, sys
v = [float(l) for l in open(sys.argv[1]) if l.strip()]
print("median decision time: %.2f s over %d decided runs" % (statistics.median(v), len(v)) if v else "no decision")
PY
