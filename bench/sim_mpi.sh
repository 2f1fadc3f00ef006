#!/bin/bash
# The simulator on one thread, on two threads and on two MPI ranks
# (uroce-sim-mpi), side by side on one scenario: the permutation of 2 MiB
# messages with packet spraying on a k-ary fat-tree (1024 hosts at k=16).
# The three run in turn, ROUNDS times; the script prints the median wall
# time of each, events/s, the speedups over one thread, and checks that the
# three wrote the same summary.json.
#
#   bench/sim_mpi.sh [K] [ROUNDS] [--load]
#
# --load runs them with two `nice -n 19` busy loops beside them.
set -euo pipefail

K=${1:-16}
ROUNDS=${2:-3}
LOAD=${3:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
UROCE=$ROOT/build/uroce
MPI=$ROOT/build/uroce-sim-mpi
[ -x "$UROCE" ] || { echo "sim_mpi: $UROCE missing: run make build" >&2; exit 2; }
[ -x "$MPI" ] || { echo "sim_mpi: $MPI missing: install libopenmpi-dev and openmpi-bin, then make build" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "sim_mpi: mpirun missing (openmpi-bin)" >&2; exit 2; }
case $K in 4|6|8|10|12|14|16|18|20|22|24) ;;
  *) echo "sim_mpi: K must be even, 4..24 (got $K)" >&2; exit 2 ;; esac

W=$(mktemp -d)
BUSY=()
cleanup() {
  for p in "${BUSY[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$W"
}
trap cleanup EXIT

cat > "$W/perm.yaml" <<EOF2
name: perm
seed: 1
topology:
  kind: fat_tree
  k: $K
  links:
    all: {rate_gbps: 100, delay_us: 1}
routing: spray
transport:
  mtu: 4096
workload:
  kind: permutation
  size: 2MiB
EOF2

if [ "$LOAD" = --load ]; then
  for i in 1 2; do nice -n 19 sh -c 'while :; do :; done' & BUSY+=($!); done
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ROOTFLAG=()
[ "$(id -u)" = 0 ] && ROOTFLAG=(--allow-run-as-root)

run() { # name command...
  local name=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  "$@" -q --no-plots -o "$W/$name" "$W/perm.yaml" >/dev/null
  t1=$(date +%s.%N)
  awk -v n="$name" -v a="$t1" -v b="$t0" 'BEGIN{print n, a - b}' >> "$W/times"
}
for r in $(seq "$ROUNDS"); do
  run one "$UROCE" sim --threads 1
  run two "$UROCE" sim --threads 2
  run mpi2 mpirun "${ROOTFLAG[@]}" --oversubscribe --bind-to none -np 2 "$MPI"
done
strip() { grep -v '"wall_s"\|"events_per_s"' "$1"; }
for x in two mpi2; do
  if ! diff <(strip "$W/one/summary.json") <(strip "$W/$x/summary.json") >/dev/null; then
    echo "sim_mpi: $x's summary.json differs from one thread's" >&2
    exit 1
  fi
done
EV=$(python3 -c "import json;print(json.load(open('$W/one/summary.json'))['events'])")
med() { grep "^$1 " "$W/times" | awk '{print $2}' | sort -g | awk '{a[NR]=$1} END{print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }
T1=$(med one); T2=$(med two); TM=$(med mpi2)
echo "k=$K fat-tree, $((K*K*K/4)) hosts, 2 MiB spray permutation, $EV events; medians of $ROUNDS rounds${LOAD:+ (two busy loops)}"
awk -v ev="$EV" -v t1="$T1" -v t2="$T2" -v tm="$TM" 'BEGIN {
  printf "%-12s %8s %12s %9s\n", "run", "wall s", "M events/s", "speedup"
  printf "%-12s %8.2f %12.2f %8.2fx\n", "1 thread", t1, ev / t1 / 1e6, 1
  printf "%-12s %8.2f %12.2f %8.2fx\n", "2 threads", t2, ev / t2 / 1e6, t1 / t2
  printf "%-12s %8.2f %12.2f %8.2fx\n", "2 MPI ranks", tm, ev / tm / 1e6, t1 / tm
}'
echo "results: the same summary.json on all three"
