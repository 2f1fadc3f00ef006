#!/usr/bin/env bash
# UCX's ucx_perftest, unmodified: put bandwidth (UCP ucp_put_bw) and tag
# latency (UCP tag_lat) over uroce (UCX_TLS=rc_verbs,ud_verbs and
# ud_verbs, through `uroce run`) next to UCX's own TCP transport
# (UCX_TLS=tcp) in the same run, two processes in a network namespace of
# the benchmark's own; then the same again with two `nice -n 19` busy
# loops on the machine. Prints each figure and the ratio uroce / tcp
# (bandwidth: above 1 is better; latency: below 1 is better). Each
# condition runs ROUNDS rounds, the contenders taking turns in each; the
# figures are the medians over the rounds, with the range of the ratio.
# Needs root (ip netns) and ucx-utils.
#   bench/ucx_bench.sh [BUILD_DIR] [ITERS]
#   BUILD_DIR  the build with `uroce` and compat/lib (default: build)
#   ITERS      iterations per measurement (default 20000; latency uses 1/2)
#   env ROUNDS rounds per condition (default 3)
set -euo pipefail
build=${1:-build}
iters=${2:-20000}
rounds=${ROUNDS:-3}
[[ $rounds =~ ^[1-9][0-9]?$ ]] || { echo "ROUNDS must be 1..99" >&2; exit 2; }
uroce=$(realpath "$build/uroce")
[ -x "$uroce" ] || { echo "no $build/uroce: build first" >&2; exit 1; }
command -v ucx_perftest >/dev/null ||
  { echo "ucx_perftest missing: apt install ucx-utils" >&2; exit 1; }

ns=uroce-ucxb-$$
busy=()
cleanup() {
  for p in "${busy[@]}"; do kill "$p" 2>/dev/null || true; done
  ip netns del "$ns" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$ns"
ip -n "$ns" link set lo up
port=19700

# One server/client pair; prints the client's final line's column $2
# (ucx_perftest -f: iterations, 3 latencies, 2 bandwidths, 2 rates).
pair() { # TLS COLUMN ARGS...
  local tls=$1 col=$2 wrap=()
  shift 2
  port=$((port + 1))
  [ "$tls" = tcp ] || wrap=("$uroce" run --addr 127.0.0.2 --)
  local srv_wrap=("${wrap[@]}") cli_wrap=()
  [ "$tls" = tcp ] || cli_wrap=("$uroce" run --addr 127.0.0.3 --)
  UCX_TLS=$tls ip netns exec "$ns" "${srv_wrap[@]}" ucx_perftest -p "$port" \
    -f "$@" >/dev/null 2>&1 &
  local srv=$!
  for _ in $(seq 200); do # the server listens once its device is up
    ip netns exec "$ns" ss -Hltn "sport = :$port" | grep -q . && break
    sleep 0.05
  done
  local out
  out=$(UCX_TLS=$tls ip netns exec "$ns" "${cli_wrap[@]}" timeout 300 \
    ucx_perftest -p "$port" -f "$@" 127.0.0.2 2>&1) || true
  # a server whose client never came is not waited for
  { sleep 30; kill "$srv" 2>/dev/null; } &
  local guard=$!
  wait "$srv" || true
  kill "$guard" 2>/dev/null || true
  echo "$out" | awk -v c="$col" '{ sub(/^Final:/, "") }
      NF == 8 && $1 ~ /^[0-9]+$/ { v = $c } END { if (v == "") exit 1; print v }' ||
    { echo "$out" >&2; echo "ucx_perftest $tls $*: no figure" >&2; exit 1; }
}

measure() { # LABEL
  local label=$1 r rows=()
  for ((r = 0; r < rounds; r++)); do
    # put bandwidth, 64 KiB: column 6 is the overall MB/s; tag latency,
    # 8 B: column 2 is the median (50th percentile) in us
    rows+=("$(pair rc_verbs,ud_verbs 6 -t ucp_put_bw -s 65536 -n "$iters")
$(pair tcp 6 -t ucp_put_bw -s 65536 -n "$iters")
$(pair rc_verbs,ud_verbs 2 -t tag_lat -s 8 -n $((iters / 2)))
$(pair ud_verbs 2 -t tag_lat -s 8 -n $((iters / 2)))
$(pair tcp 2 -t tag_lat -s 8 -n $((iters / 2)))")
  done
  printf '%s\n' "${rows[@]}" | /usr/bin/python3 -c '
import statistics as st, sys
label, n = sys.argv[1], int(sys.argv[2])
v = [float(x) for x in sys.stdin.read().split()]
bw_rc, bw_tcp, lat_rc, lat_ud, lat_tcp = (v[k::5] for k in range(5))
med = st.median
def rng(a, b):
    q = [x / y for x, y in zip(a, b)]
    return "ratio %.2f (rounds %.2f..%.2f)" % (med(a) / med(b), min(q), max(q))
print("== %s, medians of %d rounds" % (label, n))
print("ucp_put_bw 64 KiB   uroce rc_verbs %9.1f MB/s   tcp %9.1f MB/s   %s"
      % (med(bw_rc), med(bw_tcp), rng(bw_rc, bw_tcp)))
print("tag_lat 8 B median  uroce rc_verbs %9.2f us     tcp %9.2f us     %s"
      % (med(lat_rc), med(lat_tcp), rng(lat_rc, lat_tcp)))
print("tag_lat 8 B median  uroce ud_verbs %9.2f us     tcp %9.2f us     %s"
      % (med(lat_ud), med(lat_tcp), rng(lat_ud, lat_tcp)))
' "$label" "$rounds"
}

measure "idle ($(nproc) CPUs)"
for _ in 1 2; do
  nice -n 19 sh -c 'while :; do :; done' &
  busy+=($!)
done
measure "with two nice -n 19 busy loops"
