#!/usr/bin/env bash
# The main job, shown: uroce moves data between two processes with RDMA
# over real UDP, the packets it put on the wire are decoded and their ICRCs
# checked, and a fabric is simulated. Run by `make demo` after the build.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build
out=$B/demo
rm -rf "$out"
mkdir -p "$out"

echo "== 1. RDMA WRITE between two processes over UDP (127.0.0.1 <- 127.0.0.2),"
echo "      data verified; the server captures its packets"
$B/uroce perf write bw -s 100000 -n 50 --verify --pcap "$out/server.pcap" \
  --addr 127.0.0.1 -p 18599 >"$out/server.log" 2>&1 &
srv=$!
sleep 0.3
$B/uroce perf write bw -s 100000 -n 50 --verify --addr 127.0.0.2 -p 18599 127.0.0.1
wait $srv

echo
echo "== 2. What went over the wire: uroce dump $out/server.pcap (first packets)"
($B/uroce dump "$out/server.pcap" || true) | head -6
echo "   ..."
$B/uroce dump --quiet "$out/server.pcap"

echo
echo "== 3. Every packet kind (SEND, WRITE, READ, atomics, ACK/NAK/RNR NAK, CNP,"
echo "      UD, IPv6), one corrupted on purpose: uroce pktgen --demo | uroce dump"
$B/uroce pktgen --demo --out "$out/kinds.pcap" 2>/dev/null
($B/uroce dump "$out/kinds.pcap" || true) | grep -E "BAD|RNR|NAK|CNP" | head -5

echo
echo "== 4. A 16-to-1 incast with PFC on a leaf-spine fabric: uroce sim"
$B/uroce sim examples/sim/incast_pfc.yaml -o "$out/sim" 2>&1 | tail -3
echo
echo "Plots and CSVs: $out/sim/ (fct_cdf.png, queues.png, pfc.png, throughput.png)"
