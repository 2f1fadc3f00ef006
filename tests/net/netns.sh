#!/usr/bin/env bash
# Two test hosts joined by a veth pair, in network namespaces this script
# creates (needs root and iproute2):
#   uroce-a: 10.77.0.1/24, fd77::1/64     uroce-b: 10.77.0.2/24, fd77::2/64
# Usage: netns.sh up|down [SUFFIX]
set -euo pipefail
cmd=${1:-}
sfx=${2:-}
A=uroce-a$sfx
B=uroce-b$sfx
VA=ua$sfx
VB=ub$sfx

up() {
  down 2>/dev/null || true
  ip netns add "$A"
  ip netns add "$B"
  ip link add "$VA" type veth peer name "$VB"
  ip link set "$VA" netns "$A"
  ip link set "$VB" netns "$B"
  ip -n "$A" addr add 10.77.0.1/24 dev "$VA"
  ip -n "$B" addr add 10.77.0.2/24 dev "$VB"
  ip -n "$A" -6 addr add fd77::1/64 dev "$VA" nodad
  ip -n "$B" -6 addr add fd77::2/64 dev "$VB" nodad
  for ns in "$A" "$B"; do
    ip -n "$ns" link set lo up
  done
  ip -n "$A" link set "$VA" mtu 9000 up
  ip -n "$B" link set "$VB" mtu 9000 up
  # Wait until both ends have carrier.
  for _ in $(seq 50); do
    if ip -n "$A" link show "$VA" | grep -q "state UP" &&
      ip -n "$B" link show "$VB" | grep -q "state UP"; then
      return 0
    fi
    sleep 0.1
  done
  echo "netns.sh: veth link did not come up" >&2
  return 1
}

down() {
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
}

case "$cmd" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down [SUFFIX]" >&2; exit 2 ;;
esac
