#!/usr/bin/env bash
# UCX's ucx_perftest, unmodified: put bandwidth (UCP ucp_put_bw) and tag
# latency (UCP tag_lat) over uroce (UCX_TLS=rc_verbs,ud_verbs and
# ud_verbs, through `uroce run`) next to UCX's own TCP transport
# (UCX_TLS=tcp) in the same run, two processes in a network namespace of
# the benchmark's own; then the same again with two `nice -n 19` busy
# loops on the machine. Prints each figure and the ratio uroce / tcp
# (bandwidth: above 1 is better; latency: below 1 is better).
# Needs root (ip netns) and ucx-utils.
#   bench/ucx_bench.sh [BUILD_DIR] [ITERS]
#   BUILD_DIR  the build with `uroce` and compat/lib (default: build)
#   ITERS      iterations per measurement (default 20000; latency uses 1/2)
set -euo pipefail
build=${1:-build}
iters=${2:-20000}
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
  local label=$1
  # put bandwidth, 64 KiB: column 6 is the overall MB/s
  local bw_rc bw_ud bw_tcp lat_rc lat_ud lat_tcp
  bw_rc=$(pair rc_verbs,ud_verbs 6 -t ucp_put_bw -s 65536 -n "$iters")
  bw_tcp=$(pair tcp 6 -t ucp_put_bw -s 65536 -n "$iters")
  # tag latency, 8 B: column 2 is the median (50th percentile) in us
  lat_rc=$(pair rc_verbs,ud_verbs 2 -t tag_lat -s 8 -n $((iters / 2)))
  lat_ud=$(pair ud_verbs 2 -t tag_lat -s 8 -n $((iters / 2)))
  lat_tcp=$(pair tcp 2 -t tag_lat -s 8 -n $((iters / 2)))
  /usr/bin/python3 - "$label" "$bw_rc" "$bw_tcp" "$lat_rc" "$lat_ud" \
    "$lat_tcp" <<'PY'
import sys
label, bw_rc, bw_tcp, lat_rc, lat_ud, lat_tcp = sys.argv[1], *map(float, sys.argv[2:])
print("== %s" % label)
print("ucp_put_bw 64 KiB   uroce rc_verbs %9.1f MB/s   tcp %9.1f MB/s   "
      "ratio %.2f" % (bw_rc, bw_tcp, bw_rc / bw_tcp))
print("tag_lat 8 B median  uroce rc_verbs %9.2f us     tcp %9.2f us     "
      "ratio %.2f" % (lat_rc, lat_tcp, lat_rc / lat_tcp))
print("tag_lat 8 B median  uroce ud_verbs %9.2f us     tcp %9.2f us     "
      "ratio %.2f" % (lat_ud, lat_tcp, lat_ud / lat_tcp))
PY
}

measure "idle ($(nproc) CPUs)"
for _ in 1 2; do
  nice -n 19 sh -c 'while :; do :; done' &
  busy+=($!)
done
measure "with two nice -n 19 busy loops"
