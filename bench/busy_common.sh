# Shared by bench/busy.sh and bench/decision.sh (sourced): the autopin binary, a work
# directory removed on exit, the one-thread program bench/busy_work.c built into it, and
# `busy_neighbour`, which starts a spinning shell on CPU 0 that is killed on exit too.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
AUTOPIN=${AUTOPIN:-$ROOT/target/release/autopin}
W=$(mktemp -d)
cleanup() { [ -n "${BUSY_PID:-}" ] && kill "$BUSY_PID" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
gcc -O2 -o "$W/work" "$ROOT/bench/busy_work.c"
busy_neighbour() { taskset -c 0 sh -c 'while :; do :; done' & BUSY_PID=$!; }
