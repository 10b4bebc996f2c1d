# Shared by bench/busy.sh, bench/decision.sh and bench/arrival.sh (sourced): the autopin
# binary, a work directory removed on exit, the one-thread program bench/busy_work.c built
# into it, `busy_neighbour`, which starts a spinning shell on CPU 0 that is killed on exit
# too, and `rotated3`, which runs three sides of a round in an order that rotates.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
AUTOPIN=${AUTOPIN:-$ROOT/target/release/autopin}
W=$(mktemp -d)
cleanup() { [ -n "${BUSY_PID:-}" ] && kill "$BUSY_PID" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
gcc -O2 -o "$W/work" "$ROOT/bench/busy_work.c"
busy_neighbour() { taskset -c 0 sh -c 'while :; do :; done' & BUSY_PID=$!; }
# rotated3 ROUND SIDE1 SIDE2 SIDE3: runs the three side functions (each prints its seconds)
# in an order that rotates with the round, so slow drift of the machine's load hits every
# side alike; their outputs land in R1, R2 and R3, in the sides' order.
rotated3() {
  case $(($1 % 3)) in
    1) R1=$($2); R2=$($3); R3=$($4) ;;
    2) R3=$($4); R1=$($2); R2=$($3) ;;
    0) R2=$($3); R3=$($4); R1=$($2) ;;
  esac
}
