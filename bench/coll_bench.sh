#!/bin/bash
# Allreduce bus bandwidth, side by side in one run, in two layouts:
#
#  LAYOUT=host (default): RANKS ranks on this host (one table per count in
#   RANKS, default "2 4"): uroce coll-bench (uroce launch; the ranks find
#   each other on the host and use shared memory) vs Open MPI's
#   MPI_Allreduce with its default transports (shared memory) vs PyTorch's
#   Gloo backend (TCP loopback).
#  LAYOUT=hosts: two hosts, network namespaces joined by a veth
#   (10.77.0.0/16, made and removed here; root), PER_HOST ranks on each
#   (one table per count in PER_HOST, default "1 2"): uroce (shared memory
#   inside a host, RoCEv2 between; one uroce launch --nnodes 2 per host) vs
#   Open MPI over TCP (--mca btl tcp,self; mpirun starts each host's ranks
#   through ip netns exec) vs Gloo (TCP). With PER_HOST > 1 a flat ring
#   (uroce --algo ring) takes its turn too, for a second table: the
#   automatic choice (the hierarchical allreduce above 64 KiB) against it.
# float32 sum, sizes MIN..MAX bytes by factor 4; busbw = size/time *
# 2(n-1)/n (nccl-tests). Like with like: out of place (separate send and
# receive buffers) uroce against MPI_Allreduce; in place uroce against
# MPI_Allreduce with MPI_IN_PLACE and against Gloo (whose all_reduce works
# in place). The three take turns for ROUNDS rounds; the table gives each
# one's median busbw and, per mode, uroce / best(other), with the range of
# that ratio over the rounds, and the load average before and after.
#
#   bench/coll_bench.sh [BUILD_DIR]
#   env: LAYOUT=host|hosts RANKS="2 4" PER_HOST="1 2" MIN=1K MAX=256M
#        ROUNDS=5
#
# Installs openmpi-bin, libopenmpi-dev and python3-torch with apt-get when
# they are missing. With more ranks than cores every contender is
# oversubscribed alike; read the ratios, not the absolute figures.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
BUILD=${1:-$ROOT/build}
UROCE=${UROCE:-$BUILD/uroce}
LAYOUT=${LAYOUT:-host}
RANKS=${RANKS:-2 4}
PER_HOST=${PER_HOST:-1 2}
case $LAYOUT in host | hosts) ;; *)
  echo "LAYOUT must be host or hosts" >&2
  exit 2
  ;;
esac
MIN=${MIN:-1K}
MAX=${MAX:-256M}
ROUNDS=${ROUNDS:-5}
[[ $ROUNDS =~ ^[1-9][0-9]{0,2}$ ]] ||
  { echo "ROUNDS must be a whole number from 1 to 999" >&2; exit 2; }
PY=/usr/bin/python3 # Debian's python3-torch lives there, not in a venv

[ -x "$UROCE" ] || { echo "no $UROCE: build first" >&2; exit 1; }

tobytes() {
  local v=$1
  case $v in
  *K) echo $((${v%K} * 1024)) ;;
  *M) echo $((${v%M} * 1024 * 1024)) ;;
  *G) echo $((${v%G} * 1024 * 1024 * 1024)) ;;
  *) echo "$v" ;;
  esac
}
MINB=$(tobytes "$MIN")
MAXB=$(tobytes "$MAX")

need_apt=()
command -v mpicc >/dev/null && command -v mpirun >/dev/null ||
  need_apt+=(openmpi-bin libopenmpi-dev)
$PY -c 'import torch.distributed' 2>/dev/null || need_apt+=(python3-torch)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "# installing ${need_apt[*]}" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need_apt[@]}" \
    >/dev/null 2>&1 || echo "# apt-get install failed" >&2
fi
HAVE_MPI=1
command -v mpicc >/dev/null || HAVE_MPI=0
HAVE_GLOO=1
$PY -c 'import torch.distributed as d; assert d.is_gloo_available()' \
  2>/dev/null || HAVE_GLOO=0

TMP=$(mktemp -d /tmp/uroce-coll-bench.XXXXXX)
# Open MPI and Gloo run over TCP with the host's default congestion
# control. Some hosts default to BBR, whose pacing holds loopback TCP to
# a quarter of what CUBIC (Debian's default) reaches; the TCP contenders
# get CUBIC for the run, and the host's setting comes back at exit.
OLD_CC=$(sysctl -n net.ipv4.tcp_congestion_control 2>/dev/null || true)
SET_CC=0
if [ -n "$OLD_CC" ] && [ "$OLD_CC" != cubic ]; then
  if sysctl -q -w net.ipv4.tcp_congestion_control=cubic 2>/dev/null; then
    SET_CC=1
    echo "# TCP congestion control $OLD_CC -> cubic for this run" >&2
  else
    echo "# TCP congestion control stays $OLD_CC (cannot set cubic)" >&2
  fi
fi
NSA=hx-coll-ba$$
NSB=hx-coll-bb$$
cleanup() {
  if [ "$LAYOUT" = hosts ]; then
    ip netns del "$NSA" 2>/dev/null || true
    ip netns del "$NSB" 2>/dev/null || true
  fi
  rm -rf "$TMP"
  [ $SET_CC = 0 ] || sysctl -q -w net.ipv4.tcp_congestion_control="$OLD_CC"
}
trap cleanup EXIT

# Iterations per size: enough to average small sizes, few for the big ones
# so that the sweep ends in minutes on a small machine. The same rule for
# every contender.
iters_for() { # bytes -> "warmup iters"
  local b=$1
  if [ "$b" -le 65536 ]; then echo "5 50"
  elif [ "$b" -le 1048576 ]; then echo "3 20"
  elif [ "$b" -le 16777216 ]; then echo "2 5"
  else echo "1 3"; fi
}
SIZES=()
for ((b = MINB; b <= MAXB; b *= 4)); do SIZES+=("$b"); done

# ---- Open MPI -------------------------------------------------------------
cat >"$TMP/mpi_allreduce.c" <<'EOF'
/* MPI_Allreduce timing: float32 sum, out of place and then in place
 * (MPI_IN_PLACE) at each size; prints "bytes usec_oop usec_ip", the
 * slowest rank's mean time per call. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  for (int a = 1; a + 2 < argc; a += 3) {
    size_t bytes = strtoull(argv[a], NULL, 10);
    int warm = atoi(argv[a + 1]), iters = atoi(argv[a + 2]);
    size_t count = bytes / sizeof(float);
    float *s = malloc(count * sizeof(float) + 64);
    float *r = malloc(count * sizeof(float) + 64);
    for (size_t i = 0; i < count; i++)
      s[i] = (float)((i + (size_t)rank) % 7);
    memset(r, 0, count * sizeof(float));
    double tmax[2];
    for (int ip = 0; ip < 2; ip++) {
      const void *in = ip ? MPI_IN_PLACE : s;
      for (int i = 0; i < warm; i++)
        MPI_Allreduce(in, r, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (int i = 0; i < iters; i++)
        MPI_Allreduce(in, r, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double t = (MPI_Wtime() - t0) / iters * 1e6;
      MPI_Reduce(&t, &tmax[ip], 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    }
    if (rank == 0) {
      printf("%zu %.3f %.3f\n", count * sizeof(float), tmax[0], tmax[1]);
      fflush(stdout);
    }
    free(s);
    free(r);
  }
  MPI_Finalize();
  return 0;
}
EOF

# ---- Gloo -------------------------------------------------------------------
cat >"$TMP/gloo_allreduce.py" <<'EOF'
"""torch.distributed all_reduce with the gloo backend: float32 sum; prints
"bytes usec", the slowest rank's mean time per call."""
import os, sys, time
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(local, n, first, addr, ifname, port, plan):
    rank = first + local
    os.environ["GLOO_SOCKET_IFNAME"] = ifname
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://%s:%d" % (addr, port),
                            rank=rank, world_size=n)
    for bytes_, warm, iters in plan:
        x = torch.arange(bytes_ // 4, dtype=torch.float32).remainder_(7)
        for _ in range(warm):
            dist.all_reduce(x)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(x)
        t = torch.tensor([(time.perf_counter() - t0) / iters * 1e6],
                         dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        if rank == 0:
            print("%d %.3f" % (bytes_ // 4 * 4, t.item()), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    # world size, first rank here, ranks here, master address, interface,
    # port, plan
    n, first, nlocal = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    addr, ifname, port = sys.argv[4], sys.argv[5], int(sys.argv[6])
    a = sys.argv[7:]
    plan = [(int(a[i]), int(a[i + 1]), int(a[i + 2]))
            for i in range(0, len(a), 3)]
    mp.start_processes(worker, args=(n, first, addr, ifname, port, plan),
                       nprocs=nlocal, join=True, start_method="fork")
EOF

# The first size of every library's run warms up 200 times, not 5: with
# two nice -n 19 loops on this 2-core machine, fresh ranks ran the first
# few milliseconds 20-300x slower now and then (2 uroce ranks, 64 KiB, 5
# warm-up calls: 14 of 40 runs 0.2-3.4 ms a call against 10 us; after
# 200 warm-up calls none of 12), the scheduler still placing the new
# processes.
PLAN=()
for b in "${SIZES[@]}"; do
  read -r w i <<<"$(iters_for "$b")"
  [ ${#PLAN[@]} -gt 0 ] || w=200
  PLAN+=("$b" "$w" "$i")
done

if [ "$LAYOUT" = hosts ]; then
  ip netns add "$NSA"
  ip netns add "$NSB"
  ip link add hxcb$$a type veth peer name hxcb$$b
  ip link set hxcb$$a netns "$NSA"
  ip link set hxcb$$b netns "$NSB"
  for i in 1 2; do
    ip -n "$NSA" addr add 10.77.1.$i/16 dev hxcb$$a
    ip -n "$NSB" addr add 10.77.2.$i/16 dev hxcb$$b
  done
  for ns in "$NSA" "$NSB"; do ip -n "$ns" link set lo up; done
  ip -n "$NSA" link set hxcb$$a mtu 9000 up
  ip -n "$NSB" link set hxcb$$b mtu 9000 up
  sleep 1
  # mpirun's remote shell: "host" is a namespace
  cat >"$TMP/nsexec" <<'EOF'
#!/bin/sh
ns=$1
shift
exec ip netns exec "$ns" sh -c "$*"
EOF
  chmod +x "$TMP/nsexec"
fi

UPLAN=""
for ((k = 0; k < ${#PLAN[@]}; k += 3)); do
  UPLAN+="${UPLAN:+,}${PLAN[k]}:${PLAN[k + 1]}:${PLAN[k + 2]}"
done
# uroce: every size in one run, as MPI and Gloo below. One launch per
# size used to time uroce in processes seconds old, against MPI and Gloo
# processes that had run the smaller sizes (the first few tens of
# collectives of fresh ranks run 2-3x slower).
run_uroce() { # round ranks-per-host [name algo]
  local name=${3:-uroce} algo=${4:-auto}
  : >"$TMP/$name.$1.txt"
  local ok=1
  if [ "$LAYOUT" = host ]; then
    "$UROCE" launch -n "$2" -- "$UROCE" coll-bench -o allreduce -d float32 \
      -r sum --algo "$algo" --plan "$UPLAN" -J >"$TMP/u.json" || ok=0
  else
    local port=$((21000 + RANDOM % 20000))
    ip netns exec "$NSB" "$UROCE" launch -n "$2" --nnodes 2 --node-rank 1 \
      --master-addr 10.77.1.1 --master-port $port --base-addr 10.77.2.1 -- \
      "$UROCE" coll-bench -o allreduce -d float32 -r sum --algo "$algo" \
      --plan "$UPLAN" -J >/dev/null &
    local pb=$!
    ip netns exec "$NSA" "$UROCE" launch -n "$2" --nnodes 2 --node-rank 0 \
      --master-addr 10.77.1.1 --master-port $port --base-addr 10.77.1.1 -- \
      "$UROCE" coll-bench -o allreduce -d float32 -r sum --algo "$algo" \
      --plan "$UPLAN" -J >"$TMP/u.json" || ok=0
    wait $pb || ok=0
  fi
  if [ $ok = 1 ]; then
    $PY - "$TMP/u.json" >>"$TMP/$name.$1.txt" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    print(r["size"], r["out_of_place"]["time_us"], r["in_place"]["time_us"])
EOF
  else
    echo "# uroce failed" >&2
  fi
}

[ $HAVE_MPI = 0 ] || mpicc -O2 -o "$TMP/mpi_allreduce" "$TMP/mpi_allreduce.c"
run_mpi() { # round ranks-per-host
  : >"$TMP/mpi.$1.txt"
  [ $HAVE_MPI = 1 ] || return 0
  if [ "$LAYOUT" = host ]; then
    # Open MPI's default transports: shared memory between local ranks
    mpirun --allow-run-as-root --oversubscribe -np "$2" \
      "$TMP/mpi_allreduce" "${PLAN[@]}" >"$TMP/mpi.$1.txt" 2>"$TMP/mpi.err" ||
      { echo "# mpirun failed:" >&2; tail -5 "$TMP/mpi.err" >&2; }
  else
    ip netns exec "$NSA" mpirun --allow-run-as-root --oversubscribe \
      -np $((2 * $2)) --host "$NSA:$2,$NSB:$2" --mca routed direct \
      --mca plm_rsh_agent "$TMP/nsexec" \
      --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/16 \
      --mca oob_tcp_if_include 10.77.0.0/16 \
      "$TMP/mpi_allreduce" "${PLAN[@]}" >"$TMP/mpi.$1.txt" 2>"$TMP/mpi.err" ||
      { echo "# mpirun failed:" >&2; tail -5 "$TMP/mpi.err" >&2; }
  fi
}
[ $HAVE_MPI = 1 ] ||
  echo "# Open MPI could not be installed: its column is empty" >&2

run_gloo() { # round ranks-per-host
  : >"$TMP/gloo.$1.txt"
  [ $HAVE_GLOO = 1 ] || return 0
  local port=$((21000 + RANDOM % 20000))
  if [ "$LAYOUT" = host ]; then
    $PY "$TMP/gloo_allreduce.py" "$2" 0 "$2" 127.0.0.1 lo "$port" \
      "${PLAN[@]}" >"$TMP/gloo.$1.txt" 2>"$TMP/gloo.err" ||
      { echo "# gloo failed:" >&2; tail -5 "$TMP/gloo.err" >&2; }
  else
    ip netns exec "$NSB" $PY "$TMP/gloo_allreduce.py" $((2 * $2)) "$2" "$2" \
      10.77.1.1 hxcb$$b "$port" "${PLAN[@]}" >/dev/null 2>"$TMP/gloo.err.b" &
    local pb=$!
    ip netns exec "$NSA" $PY "$TMP/gloo_allreduce.py" $((2 * $2)) 0 "$2" \
      10.77.1.1 hxcb$$a "$port" "${PLAN[@]}" >"$TMP/gloo.$1.txt" \
      2>"$TMP/gloo.err" ||
      { echo "# gloo failed:" >&2; tail -5 "$TMP/gloo.err" >&2; }
    wait $pb || true
  fi
}
[ $HAVE_GLOO = 1 ] ||
  echo "# python3-torch could not be installed: the Gloo column is empty" >&2

if [ "$LAYOUT" = host ]; then COUNTS=$RANKS; else COUNTS=$PER_HOST; fi
for per in $COUNTS; do
  [[ $per =~ ^[1-9][0-9]{0,2}$ ]] ||
    { echo "rank counts must be whole numbers" >&2; exit 2; }
  if [ "$LAYOUT" = host ]; then n=$per; where="on this host"; else
    n=$((2 * per)); where="on 2 hosts (netns over veth), $per per host"; fi
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  echo "# $(nproc) cores, $n ranks $where, allreduce float32 sum," \
    "$MIN..$MAX, $ROUNDS rounds, load average $load0" >&2
  # The contenders take turns, round after round: a busy spell of a shared
  # host then lands on one round of each rather than on one contender's
  # only run, and the table gives each one's median.
  # Across hosts with several ranks each, uroce's automatic choice runs the
  # hierarchical allreduce; a flat ring takes its turn too, for the ratio.
  flat=0
  [ "$LAYOUT" = hosts ] && [ "$per" -gt 1 ] && flat=1
  for ((r = 1; r <= ROUNDS; r++)); do
    run_uroce $r "$per"
    [ $flat = 0 ] || run_uroce $r "$per" flat ring
    run_mpi $r "$per"
    run_gloo $r "$per"
    echo "#   round $r of $ROUNDS done" >&2
  done
  load1=$(cut -d' ' -f1-3 /proc/loadavg)
  echo "# $n ranks $where; load average $load0 before, $load1 after"
  $PY - "$n" "$ROUNDS" "$TMP" "$flat" <<'EOF'
import statistics
import sys
n, rounds, tmp = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
flat = sys.argv[4] == "1"
factor = 2.0 * (n - 1) / n


def load(path):
    """size -> [busbw out of place, busbw in place] (None where not run)"""
    out = {}
    for line in open(path):
        f = line.split()
        if len(f) in (2, 3) and f[0].isdigit():
            b = int(f[0])
            v = [float(x) for x in f[1:]]
            v = v if len(v) == 2 else [None, v[0]]
            out[b] = [b / (t * 1e3) * factor if t else None for t in v]
    return out


# runs[name][round] = {size: [oop, ip]}
runs = {k: [load("%s/%s.%d.txt" % (tmp, k, r)) for r in range(1, rounds + 1)]
        for k in ("uroce", "mpi", "gloo") + (("flat",) if flat else ())}


def series(name, b, mode):
    return [t[b][mode] for t in runs[name] if b in t and t[b][mode]]


def med(name, b, mode):
    s = series(name, b, mode)
    return statistics.median(s) if s else None


def fmt(x):
    return "%9.3f" % x if x is not None else "%9s" % "-"


def ratio(mine, others):
    others = [x for x in others if x]
    return "%8.2fx" % (mine / max(others)) if mine and others else "%9s" % "-"


def spread(b, mode, others):
    """min..max over rounds of uroce / best other in that same round"""
    rs = []
    for r in range(rounds):
        mine = runs["uroce"][r].get(b, [None, None])[mode]
        best = [runs[k][r].get(b, [None, None])[mode] for k in others]
        best = [x for x in best if x]
        if mine and best:
            rs.append(mine / max(best))
    return ("%5.2f..%-5.2f" % (min(rs), max(rs))) if rs else "%12s" % "-"


sizes = sorted(set().union(*(t.keys() for v in runs.values() for t in v)))
print("# allreduce float32 sum, %d ranks, busbw in GB/s (10^9 B/s), "
      "median of %d round%s" % (n, rounds, "s" if rounds > 1 else ""))
print("# %10s | %-42s | %s" % ("", "out of place", "in place"))
print("# %10s | %9s %9s %9s %12s | %9s %9s %9s %9s %12s" %
      ("size (B)", "uroce", "OpenMPI", "ratio", "per round", "uroce",
       "OpenMPI", "Gloo", "ratio", "per round"))
for b in sizes:
    uo, mo = med("uroce", b, 0), med("mpi", b, 0)
    ui, mi, gi = med("uroce", b, 1), med("mpi", b, 1), med("gloo", b, 1)
    print("  %10d   %s %s %s %s   %s %s %s %s %s" %
          (b, fmt(uo), fmt(mo), ratio(uo, [mo]), spread(b, 0, ["mpi"]),
           fmt(ui), fmt(mi), fmt(gi), ratio(ui, [mi, gi]),
           spread(b, 1, ["mpi", "gloo"])))
print("# ratio: uroce's median / the best other's median in the same mode;")
print("# per round: the lowest and highest of uroce / best other, round by "
      "round")
if flat:
    print("# uroce's automatic choice (hier above 64 KiB) against a flat ring "
          "(--algo ring), same rounds, busbw medians")
    print("# %10s | %9s %9s %9s | %9s %9s %9s" %
          ("size (B)", "auto", "ring", "ratio", "auto", "ring", "ratio"))
    for b in sizes:
        ao, fo = med("uroce", b, 0), med("flat", b, 0)
        ai, fi = med("uroce", b, 1), med("flat", b, 1)
        print("  %10d   %s %s %s   %s %s %s" %
              (b, fmt(ao), fmt(fo), ratio(ao, [fo]), fmt(ai), fmt(fi),
               ratio(ai, [fi])))
EOF
done
