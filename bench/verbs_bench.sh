#!/usr/bin/env bash
# perftest's ib_write_bw, unmodified, over uroce's libibverbs.so.1 drop-in,
# next to iperf3 (TCP, one stream) in the same run on loopback; prints both
# and the ratio. Usage: bench/verbs_bench.sh [BUILD_DIR] [SIZE] [SECONDS]
#   BUILD_DIR  the build with `uroce` and compat/lib (default: build)
#   SIZE       ib_write_bw message size in bytes (default 65536)
#   SECONDS    duration of each measurement (default 5)
set -euo pipefail
build=${1:-build}
size=${2:-65536}
secs=${3:-5}
uroce=$build/uroce
[ -x "$uroce" ] || { echo "no $uroce: build first" >&2; exit 1; }
need() { command -v "$1" >/dev/null || apt-get install -y "$2" >/dev/null; }
need iperf3 iperf3
need ib_write_bw perftest

# iperf3: one TCP stream on loopback.
iperf3 -s -1 -p 5299 >/dev/null 2>&1 &
sleep 0.5
tcp_bps=$(iperf3 -c 127.0.0.1 -p 5299 -t "$secs" -J -C cubic |
  /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"])')
wait

# ib_write_bw between two uroce endpoints (two processes, two addresses).
"$uroce" run --addr 127.0.0.2 -- ib_write_bw -x 1 -s "$size" -D "$secs" \
  -p 18590 >/dev/null 2>&1 &
srv=$!
for _ in $(seq 100); do
  ss -Hltn 'sport = :18590' | grep -q . && break
  sleep 0.05
done
out=$("$uroce" run --addr 127.0.0.3 -- ib_write_bw -x 1 -s "$size" \
  -D "$secs" -p 18590 127.0.0.2)
wait "$srv"
# With -D the table row is: #bytes #iterations peak avg msgrate (MB/s =
# 2^20 bytes/s).
row=$(echo "$out" | awk '/#bytes/ {t=1; next} t && $1 ~ /^[0-9]+$/ {print; exit}')
mbs=$(echo "$row" | awk '{print $4}')
[ -n "$mbs" ] || { echo "$out"; echo "no ib_write_bw figure" >&2; exit 1; }

/usr/bin/python3 - "$tcp_bps" "$mbs" "$size" <<'PY'
import sys
tcp = float(sys.argv[1]) / 8 / 1e9           # GB/s
rdma = float(sys.argv[2]) * 2**20 / 1e9      # GB/s
print("iperf3 TCP, 1 stream, loopback:        %6.2f GB/s" % tcp)
print("ib_write_bw over uroce (%7s B msgs): %6.2f GB/s" % (sys.argv[3], rdma))
print("ratio uroce / iperf3:                   %6.2f" % (rdma / tcp))
PY
